package prometheus

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/ondemand"
)

var (
	podsInfo  = providers.CustomMetricInfo{GroupResource: schema.GroupResource{Resource: "pods"}, Namespaced: true, Metric: "http_requests_per_second"}
	queueInfo = providers.ExternalMetricInfo{Metric: "queue_messages_ready"}
)

func code(err error) int {
	var pe *providers.Error
	if errors.As(err, &pe) {
		return pe.Code()
	}
	return 0
}

func TestDiscovery(t *testing.T) {
	t.Parallel()
	f := newFakeProm(t)
	f.addTestSeries()
	mapper := testMapper()
	p, err := NewFromOptions("prom", mustOptions(t, f.srv.URL), providers.Deps{Mapper: mapper})
	if err != nil {
		t.Fatal(err)
	}
	// never blocks and is empty before the first relist
	if got := p.ListAllMetrics(); len(got) != 0 {
		t.Fatalf("before relist: %v", got)
	}
	if err := p.Ready(context.Background()); err == nil {
		t.Fatal("ready before the first relist")
	}
	if err := p.Relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	var custom []string
	for _, i := range p.ListAllMetrics() {
		custom = append(custom, fmt.Sprintf("%s/%s/%v", i.GroupResource, i.Metric, i.Namespaced))
	}
	want := "namespaces/http_requests_per_second/false pods/http_requests_per_second/true namespaces/queue_length/false services/queue_length/true"
	if got := strings.Join(custom, " "); got != want {
		t.Errorf("custom metrics\n got %s\nwant %s", got, want)
	}
	var external []string
	for _, i := range p.ListAllExternalMetrics() {
		external = append(external, i.Metric)
	}
	if got := strings.Join(external, " "); got != "global_lag queue_messages_ready" {
		t.Errorf("external metrics: %s", got)
	}
	if n := p.SeriesCount(); n != 4 {
		t.Errorf("series count = %d, want 4", n)
	}
	if n := f.relists.Load(); n != 4 {
		t.Errorf("series calls = %d, want one per distinct seriesQuery (4)", n)
	}
}

func mustOptions(t testing.TB, url string) Options {
	cfg, err := ParseAdapterConfig([]byte(testRules))
	if err != nil {
		t.Fatal(err)
	}
	return Options{URL: url, Config: cfg}
}

func TestCustomMetricByName(t *testing.T) {
	t.Parallel()
	f := newFakeProm(t)
	f.addTestSeries()
	f.answer = func(q string) ([]sample, error) {
		switch q {
		case `sum(rate(http_requests_total{namespace="default",pod="web-1"}[2m])) by (pod)`:
			return []sample{{map[string]string{"pod": "web-1"}, "1.2345"}}, nil
		case `sum(rate(http_requests_total{code="200",namespace="default",pod="web-1"}[2m])) by (pod)`:
			return []sample{{map[string]string{"pod": "web-1"}, "0.5"}}, nil
		case `sum(queue_length{namespace="default"}) by (namespace)`:
			return []sample{{map[string]string{"namespace": "default"}, "7"}}, nil
		}
		return nil, nil
	}
	p := newTestProvider(t, f, "", nil)
	ctx := context.Background()

	mv, err := p.GetMetricByName(ctx, types.NamespacedName{Namespace: "default", Name: "web-1"}, podsInfo, labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	// truncated to milli-units, as prometheus-adapter does
	if mv.Value.MilliValue() != 1234 || mv.DescribedObject.Kind != "Pod" || mv.DescribedObject.Namespace != "default" {
		t.Errorf("value %+v", mv)
	}
	if mv.Timestamp.Unix() != 1767225600 {
		t.Errorf("timestamp %v", mv.Timestamp)
	}

	mv, err = p.GetMetricByName(ctx, types.NamespacedName{Namespace: "default", Name: "web-1"}, podsInfo, mustSelector(t, "code=200"))
	if err != nil {
		t.Fatal(err)
	}
	if mv.Value.MilliValue() != 500 || mv.Metric.Selector == nil {
		t.Errorf("with selector: %+v", mv)
	}

	nsInfo := providers.CustomMetricInfo{GroupResource: schema.GroupResource{Resource: "namespaces"}, Metric: "queue_length"}
	mv, err = p.GetMetricByName(ctx, types.NamespacedName{Name: "default"}, nsInfo, labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	if mv.Value.Value() != 7 || mv.DescribedObject.Namespace != "" {
		t.Errorf("namespace metric %+v", mv)
	}

	_, err = p.GetMetricByName(ctx, types.NamespacedName{Namespace: "default", Name: "web-2"}, podsInfo, labels.Everything())
	if code(err) != http.StatusNotFound || !strings.Contains(err.Error(), "http_requests_per_second") {
		t.Errorf("no value: %v", err)
	}
	unknown := podsInfo
	unknown.Metric = "nope"
	_, err = p.GetMetricByName(ctx, types.NamespacedName{Namespace: "default", Name: "web-1"}, unknown, labels.Everything())
	if code(err) != http.StatusNotFound || providers.ReasonOf(err) != providers.ReasonUnknownMetric {
		t.Errorf("unknown metric: %v", err)
	}
}

func TestCustomMetricBySelector(t *testing.T) {
	t.Parallel()
	f := newFakeProm(t)
	f.addTestSeries()
	f.answer = func(q string) ([]sample, error) {
		if q != `sum(rate(http_requests_total{namespace="default",pod=~"web-0|web-1|web-2"}[2m])) by (pod)` {
			return nil, fmt.Errorf("unexpected query %s", q)
		}
		return []sample{
			{map[string]string{"pod": "web-0"}, "1"},
			{map[string]string{"pod": "web-2"}, "-0.5"},
			{map[string]string{"pod": "gone"}, "9"},
		}, nil
	}
	objs := podLister(3)
	p := newTestProvider(t, f, "", objs)
	list, err := p.GetMetricBySelector(context.Background(), "default", mustSelector(t, "app=web"), podsInfo, labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range list.Items {
		got = append(got, it.DescribedObject.Name+"="+it.Value.String())
	}
	// a pod without a value is left out; a negative value is served as in
	// prometheus-adapter (NaN is refused: TestValuesChecked)
	if strings.Join(got, " ") != "web-0=1 web-2=-500m" {
		t.Errorf("items %v", got)
	}
	if objs.calls.Load() != 1 {
		t.Errorf("object lister calls = %d", objs.calls.Load())
	}
	_, err = p.GetMetricBySelector(context.Background(), "default", mustSelector(t, "app=none"), podsInfo, labels.Everything())
	if code(err) != http.StatusNotFound {
		t.Errorf("no objects: %v", err)
	}
}

func TestExternalMetric(t *testing.T) {
	t.Parallel()
	f := newFakeProm(t)
	f.addTestSeries()
	f.answer = func(q string) ([]sample, error) {
		switch q {
		case `sum(queue_messages_ready{queue="jobs",namespace="default"}) by (queue)`:
			return []sample{{map[string]string{"queue": "jobs"}, "240"}}, nil
		case `sum(queue_messages_ready{namespace="default"}) by (queue)`:
			return []sample{{map[string]string{"queue": "jobs"}, "240"}, {map[string]string{"queue": "mail"}, "3.5"}}, nil
		case `max(global_lag{})`:
			return []sample{{map[string]string{}, "12"}}, nil
		}
		return nil, nil
	}
	p := newTestProvider(t, f, "", nil)
	ctx := context.Background()
	list, err := p.GetExternalMetric(ctx, "default", mustSelector(t, "queue=jobs"), queueInfo)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Value.Value() != 240 || list.Items[0].MetricLabels["queue"] != "jobs" {
		t.Errorf("items %+v", list.Items)
	}
	list, err = p.GetExternalMetric(ctx, "default", labels.Everything(), queueInfo)
	if err != nil || len(list.Items) != 2 || list.Items[1].Value.MilliValue() != 3500 {
		t.Errorf("unsummed items %+v, %v", list, err)
	}
	// namespaced: false ignores the request's namespace
	list, err = p.GetExternalMetric(ctx, "other", labels.Everything(), providers.ExternalMetricInfo{Metric: "global_lag"})
	if err != nil || len(list.Items) != 1 {
		t.Errorf("global_lag: %+v, %v", list, err)
	}
	_, err = p.GetExternalMetric(ctx, "empty", labels.Everything(), queueInfo)
	if code(err) != http.StatusNotFound || !strings.Contains(err.Error(), "queue_messages_ready") {
		t.Errorf("empty result: %v", err)
	}
	_, err = p.GetExternalMetric(ctx, "default", labels.Everything(), providers.ExternalMetricInfo{Metric: "nope"})
	if providers.ReasonOf(err) != providers.ReasonUnknownMetric {
		t.Errorf("unknown: %v", err)
	}
}

func TestSelectorErrorsAre400(t *testing.T) {
	t.Parallel()
	f := newFakeProm(t)
	f.addTestSeries()
	f.answer = func(string) ([]sample, error) { return nil, nil }
	p := newTestProvider(t, f, "", nil)
	for _, s := range []string{"a>1", "a<2"} {
		_, err := p.GetExternalMetric(context.Background(), "default", mustSelector(t, s), queueInfo)
		if code(err) != http.StatusBadRequest {
			t.Errorf("%s: %v", s, err)
		}
		_, err = p.GetMetricByName(context.Background(), types.NamespacedName{Namespace: "default", Name: "web-1"}, podsInfo, mustSelector(t, s))
		if code(err) != http.StatusBadRequest {
			t.Errorf("%s: %v", s, err)
		}
	}
	if f.queries.Load() != 0 {
		t.Errorf("%d queries sent for refused selectors", f.queries.Load())
	}
}

func TestPromQLErrorPassthrough(t *testing.T) {
	t.Parallel()
	f := newFakeProm(t)
	f.addTestSeries()
	f.answer = func(string) ([]sample, error) {
		return nil, &promError{code: http.StatusBadRequest, errorType: "bad_data", msg: `1:5: parse error: unexpected "}"`}
	}
	p := newTestProvider(t, f, "", nil)
	_, err := p.GetExternalMetric(context.Background(), "default", labels.Everything(), queueInfo)
	if code(err) != http.StatusServiceUnavailable || !strings.Contains(err.Error(), `parse error: unexpected "}"`) || !strings.Contains(err.Error(), `"prom"`) {
		t.Errorf("PromQL error: %v", err)
	}
}

func TestTimeoutIs503WithinTheTimeout(t *testing.T) {
	t.Parallel()
	f := newFakeProm(t)
	f.addTestSeries()
	f.delay = 5 * time.Second
	f.answer = func(string) ([]sample, error) { return nil, nil }
	p := newTestProvider(t, f, "", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.GetExternalMetric(ctx, "default", labels.Everything(), queueInfo)
	if d := time.Since(start); d > time.Second {
		t.Errorf("took %s", d)
	}
	if code(err) != http.StatusServiceUnavailable || !strings.Contains(err.Error(), "prom") {
		t.Errorf("timeout: %v", err)
	}

	// the provider's own queryTimeout, without a caller deadline
	p = newTestProvider(t, f, `"queryTimeout":"150ms"`, nil)
	start = time.Now()
	_, err = p.GetExternalMetric(context.Background(), "default", labels.Everything(), queueInfo)
	if d := time.Since(start); d > time.Second || code(err) != http.StatusServiceUnavailable {
		t.Errorf("queryTimeout: %s, %v", d, err)
	}
}

func TestPrometheusUnreachable(t *testing.T) {
	t.Parallel()
	f := newFakeProm(t)
	f.addTestSeries()
	f.answer = func(string) ([]sample, error) { return nil, nil }
	p := newTestProvider(t, f, "", nil)
	f.srv.Close()
	_, err := p.GetExternalMetric(context.Background(), "default", labels.Everything(), queueInfo)
	if code(err) != http.StatusServiceUnavailable {
		t.Errorf("unreachable: %v", err)
	}
	// a failed relist keeps serving the last list
	if err := p.Relist(context.Background()); err == nil {
		t.Error("relist against a closed server succeeded")
	}
	if len(p.ListAllExternalMetrics()) != 2 {
		t.Errorf("lost the list: %v", p.ListAllExternalMetrics())
	}
}

func TestCoalescing(t *testing.T) {
	t.Parallel()
	f := newFakeProm(t)
	f.addTestSeries()
	f.delay = 100 * time.Millisecond
	f.answer = func(string) ([]sample, error) {
		return []sample{{map[string]string{"queue": "jobs"}, "1"}}, nil
	}
	p := newTestProvider(t, f, "", nil)
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := p.GetExternalMetric(context.Background(), "default", labels.Everything(), queueInfo)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := f.queries.Load(); got != 1 {
		t.Errorf("%d concurrent identical queries made %d PromQL calls, want 1", n, got)
	}
}

func TestQueryCache(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		extra string
		want  int64
	}{
		{"", 3},
		{`"queryCacheTTL":"1m"`, 1},
	} {
		f := newFakeProm(t)
		f.addTestSeries()
		f.answer = func(string) ([]sample, error) {
			return []sample{{map[string]string{"queue": "jobs"}, "1"}}, nil
		}
		p := newTestProvider(t, f, tc.extra, nil)
		for range 3 {
			if _, err := p.GetExternalMetric(context.Background(), "default", labels.Everything(), queueInfo); err != nil {
				t.Fatal(err)
			}
		}
		if got := f.queries.Load(); got != tc.want {
			t.Errorf("options {%s}: %d PromQL calls for 3 queries, want %d", tc.extra, got, tc.want)
		}
	}
}

// TestQueryCacheMaxAge: a read under ondemand.WithMaxAge (the change
// feed's poll) takes a cached answer only if younger than that bound.
func TestQueryCacheMaxAge(t *testing.T) {
	t.Parallel()
	f := newFakeProm(t)
	f.addTestSeries()
	f.answer = func(string) ([]sample, error) {
		return []sample{{map[string]string{"queue": "jobs"}, "1"}}, nil
	}
	p := newTestProvider(t, f, `"queryCacheTTL":"1m"`, nil)
	for _, step := range []struct {
		name string
		ctx  context.Context
		want int64
	}{
		{"first query", context.Background(), 1},
		{"a bound longer than the TTL", ondemand.WithMaxAge(context.Background(), time.Hour), 1},
		{"a bound the cached answer is older than", ondemand.WithMaxAge(context.Background(), 0), 2},
		{"a query after it: the poll's answer, cached", context.Background(), 2},
	} {
		if _, err := p.GetExternalMetric(step.ctx, "default", labels.Everything(), queueInfo); err != nil {
			t.Fatal(err)
		}
		if got := f.queries.Load(); got != step.want {
			t.Errorf("%s: %d PromQL calls in all, want %d", step.name, got, step.want)
		}
	}
}

func TestVerb(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		extra string
		pods  int
		want  string
	}{
		{"", 3, http.MethodGet},
		{"", 3000, http.MethodPost}, // prometheus-adapter#668
		{`"verb":"POST"`, 3, http.MethodPost},
		{`"verb":"GET"`, 3, http.MethodGet},
	} {
		f := newFakeProm(t)
		f.addTestSeries()
		f.answer = func(string) ([]sample, error) {
			return []sample{{map[string]string{"pod": "web-0"}, "1"}}, nil
		}
		p := newTestProvider(t, f, tc.extra, podLister(tc.pods))
		if _, err := p.GetMetricBySelector(context.Background(), "default", mustSelector(t, "app=web"), podsInfo, labels.Everything()); err != nil {
			t.Fatal(err)
		}
		req, q := f.lastRequest()
		if req.Method != tc.want {
			t.Errorf("{%s} %d pods: %s, want %s", tc.extra, tc.pods, req.Method, tc.want)
		}
		if strings.Count(q, "web-") != tc.pods {
			t.Errorf("{%s}: query lost names: %d bytes", tc.extra, len(q))
		}
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(token, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pw, []byte("hunter2"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		extra      string
		header     string
		wantHeader string
	}{
		{fmt.Sprintf(`"bearerTokenFile":%q`, token), "Authorization", "Bearer s3cret"},
		{fmt.Sprintf(`"username":"admin","passwordFile":%q`, pw), "Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:hunter2"))},
		{`"headers":{"X-Scope-OrgID":"tenant-a"}`, "X-Scope-OrgID", "tenant-a"},
		// a credential header comes from a file holding its whole value
		{fmt.Sprintf(`"headers":{"Authorization":{"file":%q}}`, token), "Authorization", "s3cret"},
	} {
		f := newFakeProm(t)
		f.addTestSeries()
		f.answer = func(string) ([]sample, error) { return []sample{{map[string]string{}, "1"}}, nil }
		p := newTestProvider(t, f, tc.extra, nil)
		if _, err := p.GetExternalMetric(context.Background(), "default", labels.Everything(), queueInfo); err != nil {
			t.Fatal(err)
		}
		req, _ := f.lastRequest()
		if got := req.Header.Get(tc.header); got != tc.wantHeader {
			t.Errorf("{%s}: %s = %q, want %q", tc.extra, tc.header, got, tc.wantHeader)
		}
	}
}

func TestValidateNamesTheField(t *testing.T) {
	t.Parallel()
	tests := []struct {
		opts string
		want string
	}{
		{`{}`, "providers[0].options.url: required"},
		{`{"url":"localhost:9090","rules":[{"seriesQuery":"x","metricsQuery":"q"}]}`, "providers[0].options.url: must be an http or https URL"},
		{`{"url":"http://p","verb":"PUT","rules":[{"seriesQuery":"x","metricsQuery":"q"}]}`, "providers[0].options.verb: must be GET or POST"},
		{`{"url":"http://p","relistInterval":"5m","maxAge":"1m","rules":[{"seriesQuery":"x","metricsQuery":"q"}]}`, "providers[0].options.maxAge: must not be less than relistInterval"},
		{`{"url":"http://p"}`, "providers[0].options.rules: no rules"},
		{`{"url":"http://p","rules":[{"seriesQuery":"x","metricsQuery":"q"},{"seriesQuery":"x","metricsQuery":"q"},{"seriesQuery":"x","metricsQuery":"<<.Nope>>"}]}`,
			"providers[0].options.rules[2].metricsQuery: template: "},
		{`{"url":"http://p","rulez":[]}`, `unknown field "rulez"`},
		{`{"url":"http://p","certFile":"c","rules":[{"seriesQuery":"x","metricsQuery":"q"}]}`, "providers[0].options.certFile: certFile and keyFile go together"},
		// issue 27: an inline credential is refused, headers included
		{`{"url":"http://p","headers":{"Authorization":"Bearer abc"},"rules":[{"seriesQuery":"x","metricsQuery":"q"}]}`,
			"providers[0].options.headers.Authorization: carries a credential: an inline value is refused"},
		{`{"url":"http://u:pw@p","rules":[{"seriesQuery":"x","metricsQuery":"q"}]}`, "providers[0].options.url: must not hold credentials"},
		{`{"url":"http://p","bearerTokenFile":"` + os.DevNull + `","rules":[{"seriesQuery":"x","metricsQuery":"q"}]}`,
			"providers[0].options.bearerTokenFile: " + os.DevNull + " is a device, not a regular file"},
	}
	for _, tc := range tests {
		err := Factory{}.Validate("providers[0].options", []byte(tc.opts))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant containing %q", tc.opts, err, tc.want)
		}
		if err != nil && (strings.Contains(err.Error(), "abc") || strings.Contains(err.Error(), ":pw@")) {
			t.Errorf("%s: the error %v quotes the credential", tc.opts, err)
		}
	}
	if err := (Factory{}).Validate("o", testOptions(t, "http://p:9090", "")); err != nil {
		t.Errorf("valid options: %v", err)
	}
}

func TestResourceMetrics(t *testing.T) {
	t.Parallel()
	f := newFakeProm(t)
	f.addTestSeries()
	f.answer = func(q string) ([]sample, error) {
		switch q {
		case `sum(rate(container_cpu_usage_seconds_total{namespace="default",pod=~"a|b",container!=""}[3m])) by (pod,container)`:
			return []sample{
				{map[string]string{"pod": "a", "container": "app"}, "0.25"},
				{map[string]string{"pod": "a", "container": "sidecar"}, "-1"},
				{map[string]string{"pod": "b", "container": "app"}, "1"},
			}, nil
		case `sum(container_memory_working_set_bytes{namespace="default",pod=~"a|b",container!=""}) by (pod,container)`:
			return []sample{{map[string]string{"pod": "a", "container": "app"}, "1048576"}}, nil
		case `sum(rate(container_cpu_usage_seconds_total{namespace="kube-system",pod="c",container!=""}[3m])) by (pod,container)`,
			`sum(container_memory_working_set_bytes{namespace="kube-system",pod="c",container!=""}) by (pod,container)`:
			return []sample{{map[string]string{"pod": "c", "container": "dns"}, "2"}}, nil
		case `sum(rate(node_cpu_seconds_total{node=~"n1|n2",mode!="idle"}[3m])) by (node)`:
			return []sample{{map[string]string{"node": "n1"}, "3.5"}, {map[string]string{"node": "n2"}, "1"}}, nil
		case `sum(node_memory_MemTotal_bytes{node=~"n1|n2"} - node_memory_MemAvailable_bytes{node=~"n1|n2"}) by (node)`:
			return []sample{{map[string]string{"node": "n1"}, "2147483648"}}, nil
		}
		return nil, fmt.Errorf("unexpected query %s", q)
	}
	p := newTestProvider(t, f, "", nil)
	pods, err := p.GetPodMetrics(context.Background(), []types.NamespacedName{
		{Namespace: "default", Name: "a"}, {Namespace: "default", Name: "b"}, {Namespace: "kube-system", Name: "c"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, pu := range pods {
		for _, c := range pu.Containers {
			got = append(got, fmt.Sprintf("%s/%s:%s/%s", pu.Pod, c.Name, c.CPU.String(), c.Memory.String()))
		}
		if pu.Window != 3*time.Minute || pu.Timestamp.Unix() != 1767225600 {
			t.Errorf("%s: window %s timestamp %s", pu.Pod, pu.Window, pu.Timestamp)
		}
	}
	// b has no memory: left out; a's sidecar has no memory: 0; -1 CPU is 0
	want := "default/a/app:250m/1Mi default/a/sidecar:0/0 kube-system/c/dns:2/2"
	if strings.Join(got, " ") != want {
		t.Errorf("pods\n got %s\nwant %s", strings.Join(got, " "), want)
	}

	nodes, err := p.GetNodeMetrics(context.Background(), []string{"n2", "n1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 1 || nodes[0].Node != "n1" || nodes[0].CPU.String() != "3500m" || nodes[0].Memory.String() != "2Gi" {
		t.Errorf("nodes %+v", nodes)
	}
}

func TestDropIn(t *testing.T) {
	t.Parallel()
	if !IsAdapterConfig([]byte(testRules)) {
		t.Error("rules file not recognised")
	}
	for _, s := range []string{"providers: []\nrules: []", "discovery: {}", "::"} {
		if IsAdapterConfig([]byte(s)) {
			t.Errorf("%q taken for a rules file", s)
		}
	}
	o, err := OptionsFromAdapterConfig([]byte(testRules), AdapterFlags{
		PrometheusURL: "http://prometheus:9090", Headers: []string{"X-A=b=c"}, Verb: "POST",
		MetricsRelistInterval: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	if o.URL != "http://prometheus:9090" || o.Headers["X-A"].Value != "b=c" || o.RelistInterval.Duration != time.Minute || o.MaxAge != nil || len(o.Rules) != 2 {
		t.Errorf("options %+v", o)
	}
	if _, err := OptionsFromAdapterConfig([]byte("rules:\n- seriesQuery: x\n  unknown: 1\n"), AdapterFlags{}); err == nil {
		t.Error("unknown key accepted (prometheus-adapter parses strictly)")
	}
	if _, err := OptionsFromAdapterConfig([]byte(testRules), AdapterFlags{MetricsRelistInterval: time.Hour, MetricsMaxAge: time.Minute}); err == nil {
		t.Error("max age below the relist interval accepted")
	}
}

func TestWarnings(t *testing.T) {
	t.Parallel()
	w := Warnings("providers[0].options", []byte(`{"url":"http://p","externalRules":[{"seriesQuery":"x","metricsQuery":"<<.Series>>"}]}`))
	if len(w) != 1 || !strings.Contains(w[0], "providers[0].options.externalRules[0].resources") || !strings.Contains(w[0], "#282") {
		t.Errorf("warnings %v", w)
	}
}
