package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/metricscale/metricscale/adapter/internal/testenv"
)

// usageProm is a fake Prometheus for resourceRules: per-container CPU and
// memory of pods (by namespace) and per-node usage, as the queries of
// resourceRulesFile ask for them.
type usageProm struct {
	queries atomic.Int64
}

// containers: namespace/pod → container → {cores, bytes}; db-1 and node-b
// exist in the cluster but have no series.
var (
	podSeries = map[string]map[string][2]float64{
		"default/web-1": {"app": {0.25, 100 << 20}, "sidecar": {0.05, 20 << 20}},
		"default/web-2": {"app": {0.5, 200 << 20}},
		"other/web-9":   {"app": {1, 1 << 30}},
	}
	nodeSeries = map[string][2]float64{"node-a": {2, 4 << 30}}
	nsMatcher  = regexp.MustCompile(`namespace="([^"]+)"`)
)

func (p *usageProm) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/api/v1/series":
		fmt.Fprint(w, `{"status":"success","data":[]}`)
	case "/api/v1/query":
		p.queries.Add(1)
		q := r.Form.Get("query")
		idx := 0 // CPU
		if strings.Contains(q, "memory") {
			idx = 1
		}
		type sample struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		now := float64(time.Now().Unix())
		result := []sample{}
		if strings.Contains(q, `id="/"`) {
			for node, v := range nodeSeries {
				result = append(result, sample{map[string]string{"node": node}, [2]any{now, fmt.Sprint(v[idx])}})
			}
		} else if m := nsMatcher.FindStringSubmatch(q); m != nil {
			for key, containers := range podSeries {
				ns, pod, _ := strings.Cut(key, "/")
				if ns != m[1] {
					continue
				}
				for c, v := range containers {
					result = append(result, sample{map[string]string{"namespace": ns, "pod": pod, "container": c}, [2]any{now, fmt.Sprint(v[idx])}})
				}
			}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": map[string]any{"resultType": "vector", "result": result}})
	default:
		http.NotFound(w, r)
	}
}

const resourceRulesFile = `
resourceRules:
  cpu:
    containerQuery: 'sum(rate(container_cpu_usage_seconds_total{<<.LabelMatchers>>,container!=""}[1m])) by (<<.GroupBy>>)'
    nodeQuery: 'sum(rate(container_cpu_usage_seconds_total{<<.LabelMatchers>>,id="/"}[1m])) by (<<.GroupBy>>)'
    resources:
      overrides:
        namespace: {resource: namespace}
        pod: {resource: pod}
        node: {resource: node}
    containerLabel: container
  memory:
    containerQuery: 'sum(container_memory_working_set_bytes{<<.LabelMatchers>>,container!=""}) by (<<.GroupBy>>)'
    nodeQuery: 'sum(container_memory_working_set_bytes{<<.LabelMatchers>>,id="/"}) by (<<.GroupBy>>)'
    resources:
      overrides:
        namespace: {resource: namespace}
        pod: {resource: pod}
        node: {resource: node}
    containerLabel: container
  window: 1m
`

// TestResourceMetricsInProcess: a prometheus-adapter rules file with
// resourceRules makes the adapter serve metrics.k8s.io/v1beta1 through the
// real API server stack (authentication, authorization, OpenAPI, tables),
// with pods and nodes from the watch caches and never a LIST per request.
func TestResourceMetricsInProcess(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	prom := &usageProm{}
	srv := httptest.NewServer(prom)
	defer srv.Close()
	dir := t.TempDir()
	rules := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(rules, []byte(resourceRulesFile), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := testenv.Start(ctx, dir, "--prometheus-url="+srv.URL, "--config="+rules)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	for _, verb := range []string{"get", "list"} {
		a.Fake.Allow(testenv.HPAUser, verb, "metrics.k8s.io", "*")
	}
	a.Fake.SetPod("default", "web-1", map[string]string{"app": "web"})
	a.Fake.SetPod("default", "web-2", map[string]string{"app": "web"})
	a.Fake.SetPod("default", "db-1", map[string]string{"app": "db"})
	a.Fake.SetPod("other", "web-9", map[string]string{"app": "web"})
	a.Fake.SetNode("node-a", map[string]string{"zone": "a"})
	a.Fake.SetNode("node-b", map[string]string{"zone": "b"})
	hpa := a.NewClient(a.SecurePort, testenv.HPAToken, nil)
	const base = "/apis/metrics.k8s.io/v1beta1"

	get := func(t *testing.T, c *testenv.Client, path string, wantCode int, out any) string {
		t.Helper()
		var code int
		var body []byte
		for range 50 { // the watch caches may trail the fake by a moment
			code, body, err = c.Get(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			if code == wantCode && (out == nil || !strings.Contains(string(body), `"items":[]`)) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if code != wantCode {
			t.Fatalf("GET %s: %d %s, want %d", path, code, body, wantCode)
		}
		if out != nil {
			if err := json.Unmarshal(body, out); err != nil {
				t.Fatalf("GET %s: decoding %s: %v", path, body, err)
			}
		}
		return string(body)
	}
	// podUsage renders a pod's containers as "name:cpu/memory,..." in
	// millicores and MiB, sorted.
	podUsage := func(pm v1beta1.PodMetrics) string {
		var out []string
		for _, c := range pm.Containers {
			cpu, mem := c.Usage[corev1.ResourceCPU], c.Usage[corev1.ResourceMemory]
			out = append(out, fmt.Sprintf("%s:%dm/%dMi", c.Name, cpu.MilliValue(), mem.Value()>>20))
		}
		sort.Strings(out)
		return pm.Namespace + "/" + pm.Name + "=" + strings.Join(out, ",")
	}
	podList := func(t *testing.T, path string) []string {
		t.Helper()
		var l v1beta1.PodMetricsList
		get(t, hpa, path, 200, &l)
		var out []string
		for _, pm := range l.Items {
			out = append(out, podUsage(pm))
		}
		return out
	}
	// wait until both caches hold the objects
	podList(t, base+"/pods")
	get(t, hpa, base+"/nodes", 200, &v1beta1.NodeMetricsList{})
	podListsBefore, nodeListsBefore, queriesBefore := a.Fake.PodLists.Load(), a.Fake.NodeLists.Load(), prom.queries.Load()

	t.Run("discovery", func(t *testing.T) {
		var rl metav1.APIResourceList
		get(t, hpa, base, 200, &rl)
		got := map[string]bool{}
		for _, r := range rl.APIResources {
			got[fmt.Sprintf("%s/%s/%v", r.Name, r.Kind, r.Namespaced)] = true
		}
		for _, want := range []string{"pods/PodMetrics/true", "nodes/NodeMetrics/false"} {
			if !got[want] {
				t.Errorf("discovery %v lacks %s", got, want)
			}
		}
	})

	t.Run("pods", func(t *testing.T) {
		for _, tc := range []struct {
			name, path string
			want       string
		}{
			{"namespace: db-1 has no value and is left out", "/namespaces/default/pods",
				"default/web-1=app:250m/100Mi,sidecar:50m/20Mi default/web-2=app:500m/200Mi"},
			{"label selector", "/namespaces/default/pods?labelSelector=" + url.QueryEscape("app=web"),
				"default/web-1=app:250m/100Mi,sidecar:50m/20Mi default/web-2=app:500m/200Mi"},
			{"label selector without values", "/namespaces/default/pods?labelSelector=" + url.QueryEscape("app=db"), ""},
			{"field selector", "/namespaces/default/pods?fieldSelector=" + url.QueryEscape("metadata.name=web-2"),
				"default/web-2=app:500m/200Mi"},
			{"all namespaces", "/pods",
				"default/web-1=app:250m/100Mi,sidecar:50m/20Mi default/web-2=app:500m/200Mi other/web-9=app:1000m/1024Mi"},
			{"all namespaces, field selector on the namespace", "/pods?fieldSelector=" + url.QueryEscape("metadata.namespace=other"),
				"other/web-9=app:1000m/1024Mi"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if got := strings.Join(podList(t, base+tc.path), " "); got != tc.want {
					t.Errorf("got  %s\nwant %s", got, tc.want)
				}
			})
		}
		var pm v1beta1.PodMetrics
		get(t, hpa, base+"/namespaces/default/pods/web-1", 200, &pm)
		if got := podUsage(pm); got != "default/web-1=app:250m/100Mi,sidecar:50m/20Mi" {
			t.Errorf("get web-1 = %s", got)
		}
		if pm.Labels["app"] != "web" || pm.Window.Duration != time.Minute || pm.Timestamp.IsZero() {
			t.Errorf("web-1 labels %v window %s timestamp %s: want the pod's labels, 1m, set", pm.Labels, pm.Window.Duration, pm.Timestamp)
		}
	})

	t.Run("nodes", func(t *testing.T) {
		nodes := func(path string) string {
			var l v1beta1.NodeMetricsList
			get(t, hpa, base+path, 200, &l)
			var out []string
			for _, n := range l.Items {
				cpu, mem := n.Usage[corev1.ResourceCPU], n.Usage[corev1.ResourceMemory]
				out = append(out, fmt.Sprintf("%s=%dm/%dMi", n.Name, cpu.MilliValue(), mem.Value()>>20))
			}
			return strings.Join(out, " ")
		}
		if got := nodes("/nodes"); got != "node-a=2000m/4096Mi" {
			t.Errorf("nodes = %q (node-b has no value)", got)
		}
		if got := nodes("/nodes?labelSelector=" + url.QueryEscape("zone=a")); got != "node-a=2000m/4096Mi" {
			t.Errorf("nodes zone=a = %q", got)
		}
		if got := nodes("/nodes?labelSelector=" + url.QueryEscape("zone=b")); got != "" {
			t.Errorf("nodes zone=b = %q, want none", got)
		}
		var n v1beta1.NodeMetrics
		get(t, hpa, base+"/nodes/node-a", 200, &n)
		if cpu := n.Usage[corev1.ResourceCPU]; cpu.MilliValue() != 2000 || n.Labels["zone"] != "a" {
			t.Errorf("node-a = %+v", n)
		}
	})

	t.Run("errors", func(t *testing.T) {
		for _, tc := range []struct {
			path  string
			code  int
			wants []string
		}{
			{"/namespaces/default/pods/db-1", 404, []string{"db-1", "no CPU and memory usage of pod default/db-1"}},
			{"/namespaces/default/pods/nope", 404, []string{`pods \"nope\" not found`}},
			{"/namespaces/other/pods/web-1", 404, []string{`pods \"web-1\" not found`}},
			{"/nodes/node-b", 404, []string{"node-b", "no CPU and memory usage"}},
			{"/nodes/node-x", 404, []string{`nodes \"node-x\" not found`}},
			{"/namespaces/default/pods?fieldSelector=" + url.QueryEscape("spec.nodeName=node-a"), 400, []string{"spec.nodeName", "metadata.name"}},
			{"/nodes?labelSelector=" + url.QueryEscape("a in ("), 400, nil},
		} {
			body := get(t, hpa, base+tc.path, tc.code, nil)
			for _, w := range tc.wants {
				if !strings.Contains(body, w) {
					t.Errorf("GET %s: %s lacks %q", tc.path, body, w)
				}
			}
		}
	})

	t.Run("table for kubectl get podmetrics", func(t *testing.T) {
		c := a.NewClient(a.SecurePort, testenv.HPAToken, nil)
		c.Header = http.Header{"Accept": {"application/json;as=Table;v=v1;g=meta.k8s.io"}}
		var tbl metav1.Table
		get(t, c, base+"/namespaces/default/pods", 200, &tbl)
		var cols []string
		for _, cd := range tbl.ColumnDefinitions {
			cols = append(cols, cd.Name)
		}
		var rows []string
		for _, r := range tbl.Rows {
			rows = append(rows, strings.TrimSpace(fmt.Sprintln(r.Cells...)))
		}
		if got := strings.Join(cols, ","); got != "Name,CPU,Memory,Window" {
			t.Errorf("columns = %s", got)
		}
		// web-1's row sums its two containers
		if got := strings.Join(rows, "|"); got != "web-1 300m 120Mi 1m0s|web-2 500m 200Mi 1m0s" {
			t.Errorf("rows = %s", got)
		}
		get(t, c, base+"/nodes", 200, &tbl)
		if len(tbl.Rows) != 1 || strings.TrimSpace(fmt.Sprintln(tbl.Rows[0].Cells...)) != "node-a 2 4Gi 1m0s" {
			t.Errorf("node rows = %+v", tbl.Rows)
		}
	})

	t.Run("openapi", func(t *testing.T) {
		mon := a.NewClient(a.SecurePort, testenv.MonitorToken, nil)
		body := get(t, mon, "/openapi/v3/apis/metrics.k8s.io/v1beta1", 200, nil)
		if !strings.Contains(body, "io.k8s.metrics.pkg.apis.metrics.v1beta1.PodMetrics") {
			t.Errorf("OpenAPI v3 of metrics.k8s.io lacks PodMetrics: %.300s", body)
		}
		body = get(t, mon, "/openapi/v2", 200, nil)
		for _, want := range []string{"io.k8s.metrics.pkg.apis.metrics.v1beta1.NodeMetrics", "io.k8s.metrics.pkg.apis.custom_metrics.v1beta2.MetricValue"} {
			if !strings.Contains(body, want) {
				t.Errorf("OpenAPI v2 lacks %s", want)
			}
		}
	})

	t.Run("authorization", func(t *testing.T) {
		get(t, a.NewClient(a.SecurePort, "", nil), base+"/namespaces/default/pods", 401, nil)
		body := get(t, a.NewClient(a.SecurePort, testenv.NobodyToken, nil), base+"/namespaces/default/pods", 403, nil)
		if !strings.Contains(body, "nobody") {
			t.Errorf("403 does not name the user: %s", body)
		}
	})

	if n := a.Fake.PodLists.Load() - podListsBefore; n != 0 {
		t.Errorf("the adapter LISTed pods %d times while answering", n)
	}
	if n := a.Fake.NodeLists.Load() - nodeListsBefore; n != 0 {
		t.Errorf("the adapter LISTed nodes %d times while answering", n)
	}
	if prom.queries.Load() == queriesBefore {
		t.Error("no PromQL query was sent: the values did not come from Prometheus")
	}
}
