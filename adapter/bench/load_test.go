package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/metricscale/metricscale/adapter/internal/testenv"
	"github.com/metricscale/metricscale/hack/loadgen/load"
)

// childEnv carries a loadSpec to the load generator child: the benchmark
// binary re-executed, so that the clients' CPU (TLS, HTTP/2, reading the
// answers) is not counted as the adapter's.
const childEnv = "METRICSCALE_BENCH_LOAD"

type loadSpec struct {
	URLs     []string `json:"urls"`
	Clients  int      `json:"clients"`
	Requests int      `json:"requests"`
	Token    string   `json:"token"`
	CAFile   string   `json:"caFile"`
	Accept   string   `json:"accept,omitempty"`
	// CertFile and KeyFile, if set, are a client certificate (the
	// aggregator's front-proxy one), and Header is sent with every request
	// (X-Remote-User...): requests as kube-apiserver's aggregator proxies them.
	CertFile string              `json:"certFile,omitempty"`
	KeyFile  string              `json:"keyFile,omitempty"`
	Header   map[string][]string `json:"header,omitempty"`
}

// headerTransport adds a fixed header to every request.
type headerTransport struct {
	http.RoundTripper
	header http.Header
}

func (t headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range t.header {
		req.Header[k] = v
	}
	return t.RoundTripper.RoundTrip(req)
}

type loadOutput struct {
	load.Summary
	Elapsed  time.Duration `json:"elapsed"`
	FirstErr string        `json:"firstError,omitempty"`
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		if err := runChild(spec); err != nil {
			fmt.Fprintln(os.Stderr, "load child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runChild(raw string) error {
	var s loadSpec
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return err
	}
	pem, err := os.ReadFile(s.CAFile)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	tc := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if s.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
		if err != nil {
			return err
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	newClient := func() *http.Client {
		var rt http.RoundTripper = &http.Transport{TLSClientConfig: tc, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 4}
		if len(s.Header) > 0 {
			rt = headerTransport{rt, s.Header}
		}
		return &http.Client{Timeout: 30 * time.Second, Transport: rt}
	}
	r, err := load.Run(context.Background(), load.Config{
		URLs: s.URLs, Clients: s.Clients, Requests: s.Requests, Token: s.Token, Accept: s.Accept, NewClient: newClient,
	})
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(loadOutput{Summary: load.Summarize(r), Elapsed: r.Elapsed, FirstErr: r.FirstErr})
}

// backend is what the benchmark knows of the adapter's backend: its query
// counter and its process, for PromQL calls and CPU per API query.
type backend struct {
	calls func() float64
	pid   int
}

// runLoad warms the adapter up on every path (token and authorization
// caches, first relist), then sends b.N queries from benchClients clients
// in a child process, rotating over paths, and reports:
//
//   - queries/s, p50-ms, p99-ms as the clients saw them;
//   - adapter-cpu-s/1000q: this process (the adapter, the fake
//     kube-apiserver answering its TokenReviews and SubjectAccessReviews, and
//     the scrape target) — the clients are not in it;
//   - client-cpu-s/1000q: the load generator child;
//   - backend-cpu-s/1000q and promql/query, with a backend;
//   - rss-MB: this process' resident set after the run.
func runLoad(ctx context.Context, b *testing.B, a *testenv.Adapter, paths []string, be *backend) {
	runLoadAccept(ctx, b, a, paths, "", be)
}

// runLoadAccept is runLoad with an Accept header ("": JSON).
func runLoadAccept(ctx context.Context, b *testing.B, a *testenv.Adapter, paths []string, accept string, be *backend) {
	runLoadSpec(ctx, b, a, paths, loadSpec{Accept: accept, Token: testenv.HPAToken}, be)
}

// runLoadSpec is runLoad with the clients' Accept, token or client
// certificate and headers from base.
func runLoadSpec(ctx context.Context, b *testing.B, a *testenv.Adapter, paths []string, base loadSpec, be *backend) {
	warmUp(ctx, b, a, paths)
	urls := make([]string, len(paths))
	for i, p := range paths {
		urls[i] = fmt.Sprintf("https://127.0.0.1:%d%s", a.SecurePort, p)
	}
	base.URLs, base.Clients, base.Requests, base.CAFile = urls, benchClients, b.N, a.CAFile
	spec, err := json.Marshal(base)
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr

	var calls0, beCPU0 float64
	if be != nil {
		calls0, beCPU0 = be.calls(), procCPUSeconds(b, be.pid)
	}
	cpu0 := selfCPUSeconds()
	b.ResetTimer()
	err = cmd.Run()
	b.StopTimer()
	cpu := selfCPUSeconds() - cpu0
	if err != nil {
		b.Fatalf("load child: %v\n%s", err, stderr.String())
	}
	var out loadOutput
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		b.Fatalf("load child output %q: %v", stdout.String(), err)
	}
	if out.Errors > 0 {
		b.Fatalf("%d of %d queries failed, first: %s", out.Errors, out.Requests, out.FirstErr)
	}
	n := float64(out.Requests)
	client := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	b.ReportMetric(out.QPS, "queries/s")
	b.ReportMetric(float64(out.P50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(out.P99.Microseconds())/1000, "p99-ms")
	b.ReportMetric(cpu/n*1000, "adapter-cpu-s/1000q")
	b.ReportMetric(client.Seconds()/n*1000, "client-cpu-s/1000q")
	if be != nil {
		b.ReportMetric((be.calls()-calls0)/n, "promql/query")
		b.ReportMetric((procCPUSeconds(b, be.pid)-beCPU0)/n*1000, "backend-cpu-s/1000q")
	}
	b.ReportMetric(float64(rssKB(os.Getpid()))/1024, "rss-MB")
}

// warmUp asks for every path once (8 at a time), retrying the first until
// the adapter answers 200.
func warmUp(ctx context.Context, b *testing.B, a *testenv.Adapter, paths []string) {
	b.Helper()
	c := a.NewClient(a.SecurePort, testenv.HPAToken, nil)
	var code int
	var body []byte
	var err error
	for range 100 {
		if code, body, err = c.Get(ctx, paths[0]); err == nil && code == 200 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code != 200 {
		b.Fatalf("warm-up %s: %d %.300s %v", paths[0], code, body, err)
	}
	var wg sync.WaitGroup
	var once sync.Once
	var failure error
	for w := range benchClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(paths); i += benchClients {
				if code, body, err := c.Get(ctx, paths[i]); err != nil || code != 200 {
					once.Do(func() { failure = fmt.Errorf("warm-up %s: %d %.300s %v", paths[i], code, body, err) })
					return
				}
			}
		}()
	}
	wg.Wait()
	if failure != nil {
		b.Fatal(failure)
	}
}

func selfCPUSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// procCPUSeconds is a process' user and system time from /proc/PID/stat.
func procCPUSeconds(b *testing.B, pid int) float64 {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		b.Fatal(err)
	}
	// the fields after the command, which is in parentheses and may hold spaces
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // USER_HZ, 100 on Linux
}

// rssKB is a process' resident set size (VmRSS) in KiB.
func rssKB(pid int) int {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return 0
}
