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
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"github.com/metricscale/metricscale/adapter/internal/testenv"
	"github.com/metricscale/metricscale/hack/freeport"
)

// BenchmarkPrometheus measures the Prometheus provider behind the real
// adapter against a real Prometheus (Debian's /usr/bin/prometheus) that
// scrapes 10,000 queue series and 20 pods' series:
//
//	go test -run '^$' -bench Prometheus -benchtime 3000x ./adapter/bench/
//
// Per query kind (external with one of 1,000 rotating label selectors,
// external all 10,000 series, the pods metric with a pod selector) and
// with the result cache off and on, it reports what runLoad says: q/s,
// p50/p99 from 8 clients in a child process, CPU-seconds per 1,000 queries
// of the adapter (this process), of the clients and of Prometheus, PromQL
// calls per API query (counted by Prometheus itself) and RSS.
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
	promURL, promPID := startPrometheus(ctx, b, strings.TrimPrefix(target.URL, "http://"))

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
		selectorPaths := make([]string, selectors)
		for i := range selectorPaths {
			selectorPaths[i] = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_messages_ready?labelSelector=" +
				url.QueryEscape(fmt.Sprintf("queue=q-%d", (i*7919)%selectors))
		}
		allSeries := []string{"/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_messages_ready"}
		kinds := []struct {
			name   string
			paths  []string
			accept string
		}{
			{"selector", selectorPaths, ""},
			{"all-series", allSeries, ""},
			// as kube-controller-manager asks (--kube-api-content-type)
			{"all-series-protobuf", allSeries, "application/vnd.kubernetes.protobuf"},
			{"pods", []string{"/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/http_requests_in_flight?labelSelector=app%3Dweb"}, ""},
		}
		for _, k := range kinds {
			b.Run(fmt.Sprintf("%s/cache=%s", k.name, cache), func(b *testing.B) {
				runLoadAccept(ctx, b, a, k.paths, k.accept, &backend{calls: func() float64 { return promQueries(b, promURL) }, pid: promPID})
			})
		}
		a.Stop()
	}
}

const promBinary = "/usr/bin/prometheus"

// startPrometheus runs a real Prometheus scraping target every second and
// returns its URL and process id once the target's series are queryable.
func startPrometheus(ctx context.Context, b *testing.B, target string) (string, int) {
	b.Helper()
	dir := b.TempDir()
	port, err := freeport.Get()
	if err != nil {
		b.Fatal(err)
	}
	cfg := fmt.Sprintf("global: {scrape_interval: 1s, scrape_timeout: 1s}\nscrape_configs:\n- job_name: bench\n  static_configs: [{targets: [%q]}]\n", target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, promBinary, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port), "--log.level=warn")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // also when the benchmark is killed
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
				return u, cmd.Process.Pid
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	b.Fatalf("Prometheus at %s did not scrape the target in time", u)
	return "", 0
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
