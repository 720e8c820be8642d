// Command gencerts makes the adapter's TLS material with the Go standard
// library only:
//
//	go run ./certs/cmd/gencerts -out DIR [-hosts h1,h2] [-client NAME[:GROUP]]
//
// DIR/ca.crt, DIR/ca.key: the CA (kept and reused if present);
// DIR/apiserver.crt, DIR/apiserver.key: the serving certificate, the pair
// --cert-dir=DIR expects; -client adds DIR/NAME.crt, DIR/NAME.key, a client
// certificate (e.g. front-proxy-client for request-header authentication).
// -print-ca-bundle prints the CA base64-encoded, for an APIService caBundle.
package main

import (
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/metricscale/metricscale/certs"
)

const defaultHosts = "localhost,127.0.0.1,metricscale-adapter,metricscale-adapter.metricscale,metricscale-adapter.metricscale.svc,metricscale-adapter.metricscale.svc.cluster.local"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gencerts:", err)
		os.Exit(1)
	}
}

func run() error {
	out := flag.String("out", "", "directory to write into (required)")
	hosts := flag.String("hosts", defaultHosts, "comma-separated DNS names and IPs of the serving certificate")
	client := flag.String("client", "", "also make a client certificate: NAME or NAME:GROUP")
	validity := flag.Duration("validity", 365*24*time.Hour, "validity of the certificates")
	printBundle := flag.Bool("print-ca-bundle", false, "print the CA certificate base64-encoded (APIService caBundle)")
	flag.Parse()
	if *out == "" {
		return errors.New("-out is required")
	}

	caCrt, caKey := filepath.Join(*out, "ca.crt"), filepath.Join(*out, "ca.key")
	ca, err := certs.LoadCA(caCrt, caKey)
	if err != nil {
		if _, statErr := os.Stat(caCrt); statErr == nil {
			return err
		}
		var pair certs.Pair
		if ca, pair, err = certs.NewCA("metricscale-adapter-ca", *validity); err != nil {
			return err
		}
		if err := pair.Write(*out, "ca"); err != nil {
			return err
		}
	}
	serving, err := ca.Issue("metricscale-adapter", certs.Serving, split(*hosts), nil, *validity)
	if err != nil {
		return err
	}
	if err := serving.Write(*out, "apiserver"); err != nil {
		return err
	}
	if *client != "" {
		name, group, _ := strings.Cut(*client, ":")
		var orgs []string
		if group != "" {
			orgs = []string{group}
		}
		pair, err := ca.Issue(name, certs.Client, nil, orgs, *validity)
		if err != nil {
			return err
		}
		if err := pair.Write(*out, name); err != nil {
			return err
		}
	}
	if *printBundle {
		data, err := os.ReadFile(caCrt)
		if err != nil {
			return err
		}
		fmt.Println(base64.StdEncoding.EncodeToString(data))
	}
	return nil
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
