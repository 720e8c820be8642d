// Command loadgen sends GET requests from N concurrent clients for a
// duration, rotating over a list of URLs, and prints q/s, p50, p99 and
// errors; hack/bench-adapter.sh runs it against the adapter.
//
//	loadgen -c 8 -d 30s -token-file TOKEN -cacert CA -urls-file URLS [-json]
//	loadgen -c 8 -d 30s -cert CRT -key KEY -insecure https://...
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/metricscale/metricscale/hack/loadgen/load"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	clients := fs.Int("c", 8, "concurrent clients")
	duration := fs.Duration("d", 30*time.Second, "duration")
	requests := fs.Int("n", 0, "stop after this many requests (0: the duration only)")
	urlsFile := fs.String("urls-file", "", "file with one URL per line (besides URL arguments)")
	token := fs.String("token", "", "bearer token")
	tokenFile := fs.String("token-file", "", "file holding the bearer token")
	cert := fs.String("cert", "", "client certificate (PEM)")
	key := fs.String("key", "", "client certificate key (PEM)")
	caFile := fs.String("cacert", "", "CA to verify the server (PEM)")
	insecure := fs.Bool("insecure", false, "skip verifying the server's certificate")
	http1 := fs.Bool("http1", false, "HTTP/1.1 only (default: HTTP/2 when the server offers it)")
	shared := fs.Bool("shared-conn", false, "all clients share one connection pool (default: one each, as separate callers)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	accept := fs.String("accept", "", "Accept header, e.g. application/vnd.kubernetes.protobuf (default: none, JSON)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	urls := fs.Args()
	if *urlsFile != "" {
		more, err := readLines(*urlsFile)
		if err != nil {
			return err
		}
		urls = append(urls, more...)
	}
	if len(urls) == 0 {
		return errors.New("no URLs: give them as arguments or with -urls-file")
	}
	tok := *token
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			return err
		}
		tok = strings.TrimSpace(string(b))
	}
	tc := &tls.Config{InsecureSkipVerify: *insecure, MinVersion: tls.VersionTLS12} //nolint:gosec // asked for
	if *caFile != "" {
		pem, err := os.ReadFile(*caFile)
		if err != nil {
			return err
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return fmt.Errorf("no certificates in %s", *caFile)
		}
	}
	if (*cert == "") != (*key == "") {
		return errors.New("-cert and -key go together")
	}
	if *cert != "" {
		c, err := tls.LoadX509KeyPair(*cert, *key)
		if err != nil {
			return err
		}
		tc.Certificates = []tls.Certificate{c}
	}
	newClient := func() *http.Client {
		tr := &http.Transport{TLSClientConfig: tc, MaxIdleConnsPerHost: *clients, ForceAttemptHTTP2: !*http1}
		if *http1 {
			tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		}
		return &http.Client{Transport: tr, Timeout: 30 * time.Second}
	}
	cfg := load.Config{URLs: urls, Clients: *clients, Duration: *duration, Requests: *requests, Token: tok, Accept: *accept, Client: newClient()}
	if !*shared {
		cfg.NewClient = newClient
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	r, err := load.Run(ctx, cfg)
	if err != nil {
		return err
	}
	s := load.Summarize(r)
	if *asJSON {
		return json.NewEncoder(os.Stdout).Encode(struct {
			load.Summary
			Codes    map[int]int `json:"codes"`
			FirstErr string      `json:"firstError,omitempty"`
			// the clients' own CPU, so that a benchmark can tell it from the server's
			CPUSeconds float64 `json:"cpuSeconds"`
		}{s, r.Codes, r.FirstErr, cpuSeconds()})
	}
	fmt.Printf("requests %d  errors %d  q/s %.0f  p50 %.2fms  p99 %.2fms  max %.2fms  codes %v\n",
		s.Requests, s.Errors, s.QPS, ms(s.P50), ms(s.P99), ms(s.Max), r.Codes)
	if r.FirstErr != "" {
		fmt.Println("first error:", r.FirstErr)
	}
	return nil
}

// cpuSeconds is the user and system CPU time this process has used.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func readLines(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out, sc.Err()
}
