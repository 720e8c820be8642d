package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/metricscale/metricscale/adapter/internal/fakekube"
	"github.com/metricscale/metricscale/adapter/internal/testenv"
)

// TestAdapterInProcess runs the real adapter (AdapterBase, delegated
// authentication and authorization, request-header authentication, the
// registry, the memory provider, the push endpoint, the pod watch cache)
// against a fake kube-apiserver and queries it over TLS as the HPA would.
func TestAdapterInProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a, err := testenv.Start(ctx, t.TempDir(), "--max-age=1m", "--series-ttl=5m")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()

	// pods the Pods metric resolves through the watch cache
	a.Fake.SetPod("default", "web-1", map[string]string{"app": "web"})
	a.Fake.SetPod("default", "web-2", map[string]string{"app": "web"})
	a.Fake.SetPod("default", "db-1", map[string]string{"app": "db"})

	push := func(t *testing.T, contentType, body string, wantCode int) {
		t.Helper()
		code, msg, err := testenv.Push(ctx, a.PushURL, testenv.PushToken, contentType, []byte(body))
		if err != nil || code != wantCode {
			t.Fatalf("push: %d %q %v, want %d", code, msg, err, wantCode)
		}
	}
	old := time.Now().Add(-10 * time.Minute).UnixMilli()
	push(t, "text/plain; version=0.0.4", fmt.Sprintf(`# TYPE http_inflight gauge
http_inflight{namespace="default",pod="web-1",path="a"} 4
http_inflight{namespace="default",pod="web-1",path="b"} 1
http_inflight{namespace="default",pod="web-2",path="a"} 7
http_inflight{namespace="default",pod="db-1",path="a"} 100
requests_per_second{namespace="default",service="web"} 42.5
stale_metric{namespace="default",queue="old"} 3 %d
`, old), http.StatusNoContent)
	push(t, "application/json", `{"series":[
		{"name":"queue_depth","labels":{"namespace":"default","queue":"orders"},"value":12},
		{"name":"queue_depth","labels":{"namespace":"default","queue":"billing"},"value":5},
		{"name":"queue_depth","labels":{"namespace":"other","queue":"orders"},"value":99}]}`, http.StatusNoContent)

	hpa := a.NewClient(a.SecurePort, testenv.HPAToken, nil)

	getJSON := func(t *testing.T, c *testenv.Client, path string, wantCode int, out any) string {
		t.Helper()
		var code int
		var body []byte
		// the pod watch cache may trail the fake by a moment
		for i := 0; i < 50; i++ {
			code, body, err = c.Get(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			if code == wantCode {
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

	type metricValue struct {
		DescribedObject struct{ Kind, Name, Namespace string } `json:"describedObject"`
		Metric          struct{ Name string }                  `json:"metric"`
		MetricName      string                                 `json:"metricName"`
		MetricLabels    map[string]string                      `json:"metricLabels"`
		Value           string                                 `json:"value"`
	}
	type list struct {
		Kind  string        `json:"kind"`
		Items []metricValue `json:"items"`
	}

	t.Run("discovery", func(t *testing.T) {
		var rl struct {
			Resources []struct{ Name string } `json:"resources"`
		}
		for _, gv := range []string{"custom.metrics.k8s.io/v1beta2", "custom.metrics.k8s.io/v1beta1"} {
			// discovery is cached for a few seconds: poll for the pushed metrics
			var names []string
			for i := 0; i < 100; i++ {
				getJSON(t, hpa, "/apis/"+gv, 200, &rl)
				names = names[:0]
				for _, r := range rl.Resources {
					names = append(names, r.Name)
				}
				if strings.Contains(strings.Join(names, " "), "pods/http_inflight") {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			sort.Strings(names)
			for _, want := range []string{"pods/http_inflight", "services/requests_per_second", "namespaces/queue_depth"} {
				if !contains(names, want) {
					t.Errorf("%s discovery %v lacks %s", gv, names, want)
				}
			}
		}
		getJSON(t, hpa, "/apis/external.metrics.k8s.io/v1beta1", 200, &rl)
		var ext []string
		for _, r := range rl.Resources {
			ext = append(ext, r.Name)
		}
		for _, want := range []string{"queue_depth", "http_inflight", "stale_metric"} {
			if !contains(ext, want) {
				t.Errorf("external discovery %v lacks %s", ext, want)
			}
		}
	})

	t.Run("pods metric with selectors, from the watch cache", func(t *testing.T) {
		// pods are watched from the first Pods query, not at start
		listsBefore := a.Fake.PodLists.Load()
		if listsBefore != 0 {
			t.Errorf("the adapter LISTed pods %d times before any Pods query", listsBefore)
		}
		var l list
		for _, gv := range []string{"v1beta2", "v1beta1"} {
			getJSON(t, hpa, "/apis/custom.metrics.k8s.io/"+gv+"/namespaces/default/pods/*/http_inflight?labelSelector="+url.QueryEscape("app=web"), 200, &l)
			got := map[string]string{}
			for _, it := range l.Items {
				got[it.DescribedObject.Name] = it.Value
			}
			if fmt.Sprint(got) != "map[web-1:5 web-2:7]" {
				t.Errorf("%s: pods metric = %v, want web-1:5 web-2:7", gv, got)
			}
		}
		getJSON(t, hpa, "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/http_inflight?labelSelector=app%3Dweb&metricLabelSelector=path%3Da", 200, &l)
		got := map[string]string{}
		for _, it := range l.Items {
			got[it.DescribedObject.Name] = it.Value
		}
		if fmt.Sprint(got) != "map[web-1:4 web-2:7]" {
			t.Errorf("with metric selector path=a: %v", got)
		}
		if n := a.Fake.PodLists.Load() - listsBefore; n != 1 {
			t.Errorf("the adapter LISTed pods %d times while answering queries, want once (the watch's start)", n)
		}
		// a new pod shows up through the watch
		a.Fake.SetPod("default", "web-3", map[string]string{"app": "web"})
		push(t, "text/plain", `http_inflight{namespace="default",pod="web-3",path="a"} 2`, 204)
		for i := 0; i < 50; i++ {
			getJSON(t, hpa, "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/http_inflight?labelSelector=app%3Dweb", 200, &l)
			if len(l.Items) == 3 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if len(l.Items) != 3 {
			t.Errorf("after adding web-3: %d items", len(l.Items))
		}
	})

	t.Run("object metric", func(t *testing.T) {
		var l list
		getJSON(t, hpa, "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/services/web/requests_per_second", 200, &l)
		if len(l.Items) != 1 || l.Items[0].Value != "42500m" || l.Items[0].DescribedObject.Kind != "Service" {
			t.Errorf("object metric = %+v", l)
		}
		// namespace metric (the API's special path)
		getJSON(t, hpa, "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/metrics/queue_depth", 200, &l)
		if len(l.Items) != 1 || l.Items[0].Value != "17" {
			t.Errorf("namespace metric = %+v", l)
		}
	})

	t.Run("external metric with a label selector, unsummed", func(t *testing.T) {
		var l list
		getJSON(t, hpa, "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_depth?labelSelector=queue%3Dorders", 200, &l)
		if len(l.Items) != 1 || l.Items[0].Value != "12" || l.Items[0].MetricLabels["queue"] != "orders" {
			t.Errorf("external metric = %+v", l)
		}
		getJSON(t, hpa, "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_depth", 200, &l)
		if len(l.Items) != 2 {
			t.Errorf("external metric without selector: %d items, want 2 (namespace default only)", len(l.Items))
		}
	})

	t.Run("errors", func(t *testing.T) {
		body := getJSON(t, hpa, "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/no_such_metric", 404, nil)
		if !strings.Contains(body, "no_such_metric") {
			t.Errorf("404 does not name the metric: %s", body)
		}
		body = getJSON(t, hpa, "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/services/nope/requests_per_second", 404, nil)
		if !strings.Contains(body, "default/nope") {
			t.Errorf("404 does not name the object: %s", body)
		}
		body = getJSON(t, hpa, "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/stale_metric", 404, nil)
		if !strings.Contains(body, "stale") {
			t.Errorf("stale value: %s", body)
		}
		body = getJSON(t, hpa, "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/widgets/x/requests_per_second", 404, nil)
		if !strings.Contains(body, "widgets") {
			t.Errorf("unknown resource: %s", body)
		}
		body = getJSON(t, hpa, "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/http_inflight?labelSelector=app%3Dweb&metricLabelSelector=%3D%3D%3D", 400, nil)
		if !strings.Contains(body, "metricLabelSelector") {
			t.Errorf("bad metric selector: %s", body)
		}
		getJSON(t, hpa, "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_depth?labelSelector=a%20in%20(", 400, nil)
	})

	t.Run("no metrics.k8s.io without a resource route", func(t *testing.T) {
		getJSON(t, a.NewClient(a.SecurePort, testenv.MonitorToken, nil), "/apis/metrics.k8s.io/v1beta1", 404, nil)
		if n := a.Fake.NodeLists.Load(); n != 0 {
			t.Errorf("nodes listed %d times: they are watched only to serve metrics.k8s.io", n)
		}
	})

	t.Run("authentication and authorization", func(t *testing.T) {
		const path = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_depth"
		anon := a.NewClient(a.SecurePort, "", nil)
		getJSON(t, anon, path, 401, nil)
		getJSON(t, anon, "/apis/custom.metrics.k8s.io/v1beta2", 401, nil)
		getJSON(t, anon, "/metrics", 401, nil)
		getJSON(t, anon, "/healthz", 200, nil)
		getJSON(t, a.NewClient(a.SecurePort, "forged-token", nil), path, 401, nil)
		body := getJSON(t, a.NewClient(a.SecurePort, testenv.NobodyToken, nil), path, 403, nil)
		if !strings.Contains(body, "nobody") {
			t.Errorf("403 does not name the user: %s", body)
		}

		// request-header authentication, as the aggregator proxies
		viaProxy := a.NewClient(a.SecurePort, "", &a.FrontProxy)
		viaProxy.Header = http.Header{"X-Remote-User": {testenv.HPAUser}, "X-Remote-Group": {"system:serviceaccounts"}}
		getJSON(t, viaProxy, path, 200, nil)
		viaProxy.Header = http.Header{"X-Remote-User": {testenv.NobodyUser}}
		getJSON(t, viaProxy, path, 403, nil)
		// a client certificate from the right CA but not the allowed name
		intruder := a.NewClient(a.SecurePort, "", &a.OtherClient)
		intruder.Header = http.Header{"X-Remote-User": {testenv.HPAUser}}
		getJSON(t, intruder, path, 401, nil)

		// the push endpoint wants its own token
		if code, _, _ := testenv.Push(ctx, a.PushURL, testenv.HPAToken, "text/plain", []byte("x 1")); code != 401 {
			t.Errorf("push with an API token: %d, want 401", code)
		}
		if code, _, _ := testenv.Push(ctx, a.PushURL, "", "text/plain", []byte("x 1")); code != 401 {
			t.Errorf("anonymous push: %d, want 401", code)
		}
	})

	t.Run("one SubjectAccessReview for a reader of every metric", func(t *testing.T) {
		// A grant of every metric: one review answers the group-wide
		// question, cached for the reads of other metrics after it.
		getJSON(t, hpa, "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_depth", 200, nil)
		before := a.Fake.AccessReviews.Load()
		for i := range 5 {
			getJSON(t, hpa, fmt.Sprintf("/apis/external.metrics.k8s.io/v1beta1/namespaces/default/unknown_%d", i), 404, nil)
		}
		if n := a.Fake.AccessReviews.Load() - before; n != 0 {
			t.Errorf("reading 5 more metrics sent %d SubjectAccessReviews, want 0 (the group-wide answer is cached)", n)
		}
		// A grant of one metric: answered per metric, as before.
		a.Fake.AddToken("one-metric-token", fakekube.User{Name: "one-metric-reader"})
		a.Fake.Allow("one-metric-reader", "list", "external.metrics.k8s.io", "queue_depth")
		one := a.NewClient(a.SecurePort, "one-metric-token", nil)
		getJSON(t, one, "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_depth", 200, nil)
		body := getJSON(t, one, "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/requests_per_second", 403, nil)
		if !strings.Contains(body, "one-metric-reader") || !strings.Contains(body, "requests_per_second") {
			t.Errorf("403 does not name the user and the metric: %s", body)
		}
	})

	t.Run("own metrics", func(t *testing.T) {
		body := getJSON(t, a.NewClient(a.SecurePort, testenv.MonitorToken, nil), "/metrics", 200, nil)
		for _, want := range []string{
			`metricscale_adapter_requests_total{api="external",code="200",metric="queue_depth",provider="memory"}`,
			`metricscale_adapter_requests_total{api="external",code="404",metric="<unknown>",provider="memory"}`,
			`metricscale_adapter_request_duration_seconds_bucket{api="custom",metric="http_inflight",provider="memory"`,
			`metricscale_adapter_backend_errors_total{provider="memory",reason="stale"}`,
			`metricscale_adapter_cache_requests_total{cache="objects",result="hit"}`,
			`metricscale_adapter_series{provider="memory"} 10`,
			`metricscale_adapter_push_requests_total{code="401"}`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestGroupWideAuthorizationOff: --authorization-group-wide=false asks
// about every metric read on its own.
func TestGroupWideAuthorizationOff(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a, err := testenv.Start(ctx, t.TempDir(), "--authorization-group-wide=false")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	hpa := a.NewClient(a.SecurePort, testenv.HPAToken, nil)
	before := a.Fake.AccessReviews.Load()
	for i := range 3 {
		path := fmt.Sprintf("/apis/external.metrics.k8s.io/v1beta1/namespaces/default/unknown_%d", i)
		if code, body, err := hpa.Get(ctx, path); err != nil || code != http.StatusNotFound {
			t.Fatalf("GET %s: %d %s %v, want 404", path, code, body, err)
		}
	}
	if n := a.Fake.AccessReviews.Load() - before; n != 3 {
		t.Errorf("reading 3 metrics sent %d SubjectAccessReviews, want 3 (one each)", n)
	}
	for _, spec := range a.Fake.AccessReviewSpecs() {
		if ra := spec.ResourceAttributes; ra != nil && ra.Resource == "*" {
			t.Errorf("asked about resource * with --authorization-group-wide=false: %+v", ra)
		}
	}
}
