package prometheus

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pmodel "github.com/prometheus/common/model"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/naming"
	"github.com/metricscale/metricscale/providers/providertest"
)

// sample is one series of a fake query result.
type sample struct {
	labels map[string]string
	value  string
}

// fakeProm is a Prometheus HTTP API that answers /api/v1/series from a
// table and /api/v1/query through a function, recording each request.
type fakeProm struct {
	srv    *httptest.Server
	series map[string][]map[string]string // by match[]

	answer func(query string) ([]sample, error)
	delay  time.Duration

	queries atomic.Int64
	relists atomic.Int64

	mu      sync.Mutex
	methods []string
	last    *http.Request
	lastQ   string
}

// promError is a PromQL error the fake answers with.
type promError struct {
	code      int
	errorType string
	msg       string
}

func (e *promError) Error() string { return e.msg }

func newFakeProm(t testing.TB) *fakeProm {
	f := &fakeProm{series: map[string][]map[string]string{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeProm) serve(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.methods = append(f.methods, r.Method)
	f.last = r.Clone(context.Background())
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/api/v1/series":
		f.relists.Add(1)
		var out []map[string]string
		for _, m := range r.Form["match[]"] {
			out = append(out, f.series[m]...)
		}
		if out == nil {
			out = []map[string]string{}
		}
		writeJSON(w, map[string]any{"status": "success", "data": out})
	case "/api/v1/query":
		f.queries.Add(1)
		q := r.Form.Get("query")
		if to := r.Form.Get("timeout"); to != "" {
			// as Prometheus parses it: float seconds or a Prometheus duration
			if _, err := strconv.ParseFloat(to, 64); err != nil {
				if _, err := pmodel.ParseDuration(to); err != nil {
					w.WriteHeader(http.StatusBadRequest)
					writeJSON(w, map[string]any{"status": "error", "errorType": "bad_data", "error": fmt.Sprintf("invalid parameter \"timeout\": %v", err)})
					return
				}
			}
		}
		f.mu.Lock()
		f.lastQ = q
		f.mu.Unlock()
		if f.delay > 0 {
			select {
			case <-time.After(f.delay):
			case <-r.Context().Done():
				return
			}
		}
		samples, err := f.answer(q)
		if pe, ok := err.(*promError); ok {
			w.WriteHeader(pe.code)
			writeJSON(w, map[string]any{"status": "error", "errorType": pe.errorType, "error": pe.msg})
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		result := make([]map[string]any, 0, len(samples))
		for _, s := range samples {
			result = append(result, map[string]any{"metric": s.labels, "value": []any{1767225600.5, s.value}})
		}
		writeJSON(w, map[string]any{"status": "success", "data": map[string]any{"resultType": "vector", "result": result}})
	default:
		http.NotFound(w, r)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	_ = json.NewEncoder(w).Encode(v)
}

func (f *fakeProm) lastRequest() (*http.Request, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last, f.lastQ
}

// objectLister is a watch cache of labelled objects.
type objectLister struct {
	calls   atomic.Int64
	objects map[schema.GroupResource]map[string]map[string]labels.Set // gr → namespace → name → labels
}

func (o *objectLister) ListNames(_ context.Context, gr schema.GroupResource, ns string, sel labels.Selector) ([]string, error) {
	o.calls.Add(1)
	var out []string
	for name, ls := range o.objects[gr][ns] {
		if sel.Matches(ls) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}

func testMapper() apimeta.RESTMapper { return providertest.Mapper() }

// testRules: a pods rule (overrides), a template rule, external rules, and
// resource rules; close to prometheus-adapter's documented examples.
const testRules = `
rules:
- seriesQuery: '{__name__=~"^http_requests_total$",namespace!="",pod!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
      pod: {resource: pod}
  name: {matches: "^(.*)_total$", as: "${1}_per_second"}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)'
- seriesQuery: '{__name__="queue_length",namespace!=""}'
  resources: {template: "<<.Resource>>"}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
externalRules:
- seriesQuery: '{__name__="queue_messages_ready"}'
  resources:
    overrides:
      namespace: {resource: namespace}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (queue)'
- seriesQuery: '{__name__="global_lag"}'
  resources: {namespaced: false}
  metricsQuery: 'max(<<.Series>>{<<.LabelMatchers>>})'
resourceRules:
  cpu:
    containerQuery: 'sum(rate(container_cpu_usage_seconds_total{<<.LabelMatchers>>,container!=""}[3m])) by (<<.GroupBy>>)'
    nodeQuery: 'sum(rate(node_cpu_seconds_total{<<.LabelMatchers>>,mode!="idle"}[3m])) by (<<.GroupBy>>)'
    resources:
      overrides:
        namespace: {resource: namespace}
        pod: {resource: pod}
        node: {resource: node}
    containerLabel: container
  memory:
    containerQuery: 'sum(container_memory_working_set_bytes{<<.LabelMatchers>>,container!=""}) by (<<.GroupBy>>)'
    nodeQuery: 'sum(node_memory_MemTotal_bytes{<<.LabelMatchers>>} - node_memory_MemAvailable_bytes{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
    resources:
      overrides:
        namespace: {resource: namespace}
        pod: {resource: pod}
        node: {resource: node}
    containerLabel: container
  window: 3m
`

func (f *fakeProm) addTestSeries() {
	f.series[`{__name__=~"^http_requests_total$",namespace!="",pod!=""}`] = []map[string]string{
		{"__name__": "http_requests_total", "namespace": "default", "pod": "web-1", "code": "200"},
	}
	f.series[`{__name__="queue_length",namespace!=""}`] = []map[string]string{
		{"__name__": "queue_length", "namespace": "default", "service": "broker", "instance": "10.0.0.1:9090"},
	}
	f.series[`{__name__="queue_messages_ready"}`] = []map[string]string{
		{"__name__": "queue_messages_ready", "namespace": "default", "queue": "jobs"},
	}
	f.series[`{__name__="global_lag"}`] = []map[string]string{
		{"__name__": "global_lag", "cluster": "a"},
	}
}

// testOptions renders options over the fake's URL; extra is more JSON
// fields ("" for none).
func testOptions(t testing.TB, url, extra string) json.RawMessage {
	t.Helper()
	cfg, err := ParseAdapterConfig([]byte(testRules))
	if err != nil {
		t.Fatal(err)
	}
	o := Options{URL: url, Config: cfg}
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	if extra != "" {
		b = []byte(strings.TrimSuffix(string(b), "}") + "," + extra + "}")
	}
	return b
}

func newTestProvider(t testing.TB, f *fakeProm, extra string, objs *objectLister) *Provider {
	t.Helper()
	if objs == nil {
		objs = &objectLister{}
	}
	mapper := testMapper()
	p, err := Factory{}.New("prom", testOptions(t, f.srv.URL, extra), providers.Deps{
		Mapper: mapper, Resources: naming.NewResolver(mapper, nil), Objects: objs,
	})
	if err != nil {
		t.Fatal(err)
	}
	pp := p.(*Provider)
	if err := pp.Relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	return pp
}

func mustSelector(t testing.TB, s string) labels.Selector {
	t.Helper()
	sel, err := labels.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

// podLister has n pods app=web in default, named web-0 ... web-(n-1).
func podLister(n int) *objectLister {
	pods := map[string]labels.Set{}
	for i := range n {
		pods[fmt.Sprintf("web-%d", i)] = labels.Set{"app": "web"}
	}
	pods["other"] = labels.Set{"app": "other"}
	return &objectLister{objects: map[schema.GroupResource]map[string]map[string]labels.Set{
		{Resource: "pods"}: {"default": pods},
	}}
}
