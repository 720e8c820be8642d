package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"github.com/metricscale/metricscale/adapter/internal/testenv"
)

// BenchmarkPrometheus measures the Prometheus provider behind the real
// adapter against a real Prometheus (Debian's /usr/bin/prometheus) that
// scrapes 10,000 queue series and 20 pods' series:
//
//	go test -run '^$' -bench Prometheus -benchtime 3000x ./adapter/bench/
//
// Per query kind and with the result cache off and on it reports q/s,
// p50/p99, the PromQL calls per API query (counted by Prometheus itself),
// and the CPU-seconds per 1,000 queries of this process (adapter, fake
// kube-apiserver and clients together; Prometheus excluded).
func BenchmarkPrometheus(b *testing.B) {
	const (
		queues    = 10_000
		pods      = 20
		selectors = 1_000
	)
	if _, err := os.Stat(promBinary); err != nil {
		b.Skipf("%s is absent (hack/cluster.sh install-prometheus installs it): %v", promBinary, err)
	}
	klog.SetOutput(nopWriter{})
	klog.LogToStderr(false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var exposition strings.Builder
	exposition.WriteString("# TYPE queue_messages_ready gauge\n")
	for i := range queues {
		fmt.Fprintf(&exposition, "queue_messages_ready{queue=\"q-%d\"} %d\n", i, i)
	}
	exposition.WriteString("# TYPE http_requests_in_flight gauge\n")
	for i := range pods {
		fmt.Fprintf(&exposition, "http_requests_in_flight{namespace=\"default\",pod=\"web-%d\"} %d\n", i, i+1)
	}
	page := exposition.String()
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write([]byte(page))
	}))
	defer target.Close()
	promURL := startPrometheus(ctx, b, strings.TrimPrefix(target.URL, "http://"))

	for _, cache := range []string{"0s", "2s"} {
		dir := b.TempDir()
		cfg := filepath.Join(dir, "adapter.yaml")
		if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
providers:
- name: prometheus
  type: prometheus
  timeout: 10s
  options:
    url: %s
    relistInterval: 1m
    queryCacheTTL: %s
    rules:
    - seriesQuery: '{__name__="http_requests_in_flight",namespace!="",pod!=""}'
      resources: {template: "<<.Resource>>"}
      metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
    externalRules:
    - seriesQuery: '{__name__="queue_messages_ready"}'
      resources: {namespaced: false}
      metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (queue)'
`, promURL, cache)), 0o600); err != nil {
			b.Fatal(err)
		}
		a, err := testenv.Start(ctx, dir, "--config="+cfg)
		if err != nil {
			b.Fatal(err)
		}
		for i := range pods {
			a.Fake.SetPod("default", fmt.Sprintf("web-%d", i), map[string]string{"app": "web"})
		}
		kinds := []struct {
			name string
			path func(i int) string
		}{
			{"selector", func(i int) string {
				return "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_messages_ready?labelSelector=" +
					url.QueryEscape(fmt.Sprintf("queue=q-%d", (i*7919)%selectors))
			}},
			{"all-series", func(int) string {
				return "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_messages_ready"
			}},
			{"pods", func(int) string {
				return "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/http_requests_in_flight?labelSelector=app%3Dweb"
			}},
		}
		for _, k := range kinds {
			b.Run(fmt.Sprintf("%s/cache=%s", k.name, cache), func(b *testing.B) {
				runLoad(ctx, b, a, k.path, func() float64 { return promQueries(b, promURL) })
			})
		}
		a.Stop()
	}
}

const promBinary = "/usr/bin/prometheus"

// startPrometheus runs a real Prometheus scraping target every second and
// returns its URL once the target's series are queryable.
func startPrometheus(ctx context.Context, b *testing.B, target string) string {
	b.Helper()
	dir := b.TempDir()
	port, err := testenv.FreePort()
	if err != nil {
		b.Fatal(err)
	}
	cfg := fmt.Sprintf("global: {scrape_interval: 1s, scrape_timeout: 1s}\nscrape_configs:\n- job_name: bench\n  static_configs: [{targets: [%q]}]\n", target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, promBinary, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port), "--log.level=warn")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	u := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(u + "/api/v1/query?query=" + url.QueryEscape("count(queue_messages_ready)"))
		if err == nil {
			body := make([]byte, 512)
			n, _ := resp.Body.Read(body)
			resp.Body.Close()
			if strings.Contains(string(body[:n]), `"10000"`) {
				return u
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	b.Fatalf("Prometheus at %s did not scrape the target in time", u)
	return ""
}

// promQueries is the number of instant queries Prometheus has answered.
func promQueries(b *testing.B, promURL string) float64 {
	b.Helper()
	resp, err := http.Get(promURL + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "prometheus_http_requests_total{") && strings.Contains(line, `handler="/api/v1/query"`) {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// runLoad sends b.N queries from benchClients clients and reports q/s,
// p50/p99 and CPU per 1,000 queries; with backendCalls (a counter the
// backend keeps), also the backend calls per query.
func runLoad(ctx context.Context, b *testing.B, a *testenv.Adapter, path func(int) string, backendCalls func() float64) {
	clients := make([]*testenv.Client, benchClients)
	for i := range clients {
		clients[i] = a.NewClient(a.SecurePort, testenv.HPAToken, nil)
	}
	for i := range 2 * benchClients { // connections, token cache, first relist
		var code int
		var body []byte
		var err error
		for range 100 {
			if code, body, err = clients[i%benchClients].Get(ctx, path(i)); err == nil && code == 200 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if code != 200 {
			b.Fatalf("warm-up %s: %d %.300s %v", path(i), code, body, err)
		}
	}
	latencies := make([][]time.Duration, benchClients)
	var wg sync.WaitGroup
	var once sync.Once
	var failure error
	var q0 float64
	if backendCalls != nil {
		q0 = backendCalls()
	}
	cpu0 := cpuSeconds()
	b.ResetTimer()
	start := time.Now()
	for w := range benchClients {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < b.N; i += benchClients {
				t0 := time.Now()
				code, body, err := clients[w].Get(ctx, path(i))
				latencies[w] = append(latencies[w], time.Since(t0))
				if err != nil || code != 200 {
					once.Do(func() { failure = fmt.Errorf("%s: %d %.300s %v", path(i), code, body, err) })
					return
				}
			}
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if failure != nil {
		b.Fatal(failure)
	}
	cpu := cpuSeconds() - cpu0
	var all []time.Duration
	for _, l := range latencies {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	pct := func(p float64) time.Duration { return all[min(len(all)-1, int(float64(len(all))*p))] }
	n := float64(len(all))
	b.ReportMetric(n/elapsed.Seconds(), "queries/s")
	b.ReportMetric(float64(pct(0.50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(pct(0.99).Microseconds())/1000, "p99-ms")
	if backendCalls != nil {
		b.ReportMetric((backendCalls()-q0)/n, "promql/query")
	}
	b.ReportMetric(cpu/n*1000, "cpu-s/1000q")
}
