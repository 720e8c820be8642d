package app_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/metrics/pkg/apis/external_metrics/v1beta1"

	"github.com/metricscale/metricscale/adapter/internal/testenv"
)

// fakeProm answers the two calls a prometheus-adapter rules file needs:
// the series relist and instant queries, recording the queries.
type fakeProm struct {
	// series is the relist's answer, a JSON array of label sets (default:
	// one queue_messages_ready series), whatever the match.
	series  string
	mu      sync.Mutex
	queries []string
}

func (f *fakeProm) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/api/v1/series":
		series := f.series
		if series == "" {
			series = `[{"__name__":"queue_messages_ready","queue":"orders","namespace":"default"}]`
		}
		fmt.Fprintf(w, `{"status":"success","data":%s}`, series)
	case "/api/v1/query":
		f.mu.Lock()
		f.queries = append(f.queries, r.Form.Get("query"))
		f.mu.Unlock()
		fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"queue":"orders"},"value":[%d,"42"]}]}}`, time.Now().Unix())
	default:
		http.NotFound(w, r)
	}
}

// prometheus-adapter's arguments (--disable-http2 too) and rules file, unchanged, start the
// adapter and serve the rule's metric through the API server.
func TestPrometheusAdapterDropIn(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prom := &fakeProm{}
	srv := httptest.NewServer(prom)
	defer srv.Close()

	dir := t.TempDir()
	rules := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(rules, []byte(`
externalRules:
- seriesQuery: '{__name__="queue_messages_ready"}'
  resources: {namespaced: false}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (queue)'
`), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := testenv.Start(ctx, dir, "--prometheus-url="+srv.URL, "--config="+rules, "--metrics-relist-interval=1s", "--disable-http2")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	// --disable-http2: the secure port no longer offers h2.
	conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", a.SecurePort), &tls.Config{RootCAs: a.RootCAs, NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	if p := conn.ConnectionState().NegotiatedProtocol; p == "h2" {
		t.Errorf("with --disable-http2 the adapter negotiated %q", p)
	}
	_ = conn.Close()
	hpa := a.NewClient(a.SecurePort, testenv.HPAToken, nil)
	path := "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_messages_ready?labelSelector=queue%3Dorders"

	list, body := externalAfterRelist(ctx, t, hpa, path)
	var code int
	if len(list.Items) != 1 || list.Items[0].Value.Value() != 42 || list.Items[0].MetricLabels["queue"] != "orders" {
		t.Errorf("answer = %s, want one item queue=orders value 42", body)
	}
	prom.mu.Lock()
	got := strings.Join(prom.queries, "\n")
	prom.mu.Unlock()
	if want := `sum(queue_messages_ready{queue="orders"}) by (queue)`; !strings.Contains(got, want) {
		t.Errorf("PromQL sent:\n%s\nwant %s", got, want)
	}

	srv.Close() // Prometheus down: a fast 503 naming the provider, never a number
	start := time.Now()
	code, body, err = hpa.Get(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if code != 503 || !strings.Contains(string(body), `metrics provider \"prometheus\" is unavailable`) {
		t.Errorf("with Prometheus down: %d %s, want 503 naming provider \"prometheus\"", code, body)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the 503 took %s", d)
	}
}

// externalAfterRelist reads an External metric list (and its body), retrying for up to 5 s while the
// adapter's first relist runs in the background.
func externalAfterRelist(ctx context.Context, t *testing.T, hpa *testenv.Client, path string) (v1beta1.ExternalMetricValueList, []byte) {
	t.Helper()
	var code int
	var body []byte
	var err error
	for range 50 {
		if code, body, err = hpa.Get(ctx, path); err != nil {
			t.Fatal(err)
		}
		if code == 200 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code != 200 {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	var list v1beta1.ExternalMetricValueList
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	return list, body
}
