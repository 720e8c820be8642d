package memory

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/naming"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// testMapper knows a few core and apps resources, as a cluster would.
func testMapper() apimeta.RESTMapper {
	m := apimeta.NewDefaultRESTMapper(nil)
	add := func(group, kind string, scope apimeta.RESTScope) {
		m.Add(schema.GroupVersionKind{Group: group, Version: "v1", Kind: kind}, scope)
	}
	add("", "Pod", apimeta.RESTScopeNamespace)
	add("", "Service", apimeta.RESTScopeNamespace)
	add("", "Namespace", apimeta.RESTScopeRoot)
	add("", "Node", apimeta.RESTScopeRoot)
	add("apps", "Deployment", apimeta.RESTScopeNamespace)
	return m
}

// fakeObjects resolves selectors from a fixed table of object labels.
type fakeObjects struct {
	objs  map[string]map[string]labels.Set // "resource/ns" -> name -> labels
	calls int
	err   error
}

func (f *fakeObjects) ListNames(_ context.Context, gr schema.GroupResource, ns string, sel labels.Selector) ([]string, error) {
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	var out []string
	for name, l := range f.objs[gr.String()+"/"+ns] {
		if sel.Matches(l) {
			out = append(out, name)
		}
	}
	return out, nil
}

func newTestProvider(t *testing.T) (*Provider, *clocktesting.FakeClock, *fakeObjects) {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	objs := &fakeObjects{objs: map[string]map[string]labels.Set{
		"pods/default": {
			"web-1": {"app": "web"}, "web-2": {"app": "web"}, "web-3": {"app": "web"},
			"db-1": {"app": "db"},
		},
	}}
	p := New("mem", NewStore(clk, 10*time.Minute, 0), testResolver(), objs, clk, 2*time.Minute)
	return p, clk, objs
}

func push(t *testing.T, p *Provider, samples ...providers.Sample) {
	t.Helper()
	if err := p.Append(samples); err != nil {
		t.Fatalf("Append: %v", err)
	}
}

func smp(name string, v float64, lbls ...string) providers.Sample {
	m := map[string]string{}
	for i := 0; i+1 < len(lbls); i += 2 {
		m[lbls[i]] = lbls[i+1]
	}
	return providers.Sample{Name: name, Labels: m, Value: v}
}

func mustSel(t *testing.T, s string) labels.Selector {
	t.Helper()
	sel, err := labels.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

func wantErr(t *testing.T, err error, code int, reason providers.Reason, contains ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want a %d error, got none", code)
	}
	var pe *providers.Error
	if !errors.As(err, &pe) {
		t.Fatalf("want *providers.Error, got %T: %v", err, err)
	}
	if pe.Code() != code || pe.Reason != reason {
		t.Fatalf("want %d %s, got %d %s: %v", code, reason, pe.Code(), pe.Reason, err)
	}
	for _, c := range contains {
		if !strings.Contains(err.Error(), c) {
			t.Errorf("error %q does not mention %q", err, c)
		}
	}
}

var (
	podsGR     = schema.GroupResource{Resource: "pods"}
	servicesGR = schema.GroupResource{Resource: "services"}
	deployGR   = schema.GroupResource{Group: "apps", Resource: "deployments"}
	nodesGR    = schema.GroupResource{Resource: "nodes"}
)

func TestGetMetricByNameLabelMapping(t *testing.T) {
	t.Parallel()
	p, _, _ := newTestProvider(t)
	push(t, p,
		smp("rps", 10, "namespace", "default", "service", "web"),
		smp("rps", 5, "namespace", "default", "services", "api"), // plural label name
		smp("rps", 7, "namespace", "other", "service", "web"),
		smp("lag", 3, "namespace", "default", "deployment", "worker", "topic", "a"),
		smp("lag", 4, "namespace", "default", "deployment", "worker", "topic", "b"),
		smp("temp", 40, "node", "n1"),
		smp("inflight", 2, "namespace", "default", "pod", "web-1"),
		smp("inflight", 3, "namespace", "default", "pod", "web-2"),
	)
	tests := []struct {
		name   string
		gr     schema.GroupResource
		ns     string
		obj    string
		metric string
		msel   string
		want   int64 // milli
		kind   string
	}{
		{"service by singular label", servicesGR, "default", "web", "rps", "", 10000, "Service"},
		{"service by plural label", servicesGR, "default", "api", "rps", "", 5000, "Service"},
		{"namespace label scopes objects", servicesGR, "other", "web", "rps", "", 7000, "Service"},
		{"series of one object are summed", deployGR, "default", "worker", "lag", "", 7000, "Deployment"},
		{"metric selector picks series", deployGR, "default", "worker", "lag", "topic=b", 4000, "Deployment"},
		{"cluster-scoped object", nodesGR, "", "n1", "temp", "", 40000, "Node"},
		{"namespace metric sums its series", namespacesGR, "", "default", "inflight", "", 5000, "Namespace"},
		{"pod", podsGR, "default", "web-2", "inflight", "", 3000, "Pod"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			info := providers.CustomMetricInfo{GroupResource: tc.gr, Metric: tc.metric, Namespaced: tc.ns != ""}
			mv, err := p.GetMetricByName(context.Background(), types.NamespacedName{Namespace: tc.ns, Name: tc.obj}, info, mustSel(t, tc.msel))
			if err != nil {
				t.Fatalf("GetMetricByName: %v", err)
			}
			if got := mv.Value.MilliValue(); got != tc.want {
				t.Errorf("value = %dm, want %dm", got, tc.want)
			}
			if mv.DescribedObject.Kind != tc.kind || mv.DescribedObject.Name != tc.obj {
				t.Errorf("described object = %+v", mv.DescribedObject)
			}
			if !mv.Timestamp.Time.Equal(t0) {
				t.Errorf("timestamp = %v, want %v", mv.Timestamp, t0)
			}
			if tc.msel != "" && (mv.Metric.Selector == nil || mv.Metric.Selector.MatchLabels["topic"] != "b") {
				t.Errorf("metric selector not echoed: %+v", mv.Metric)
			}
		})
	}
}

func TestGetMetricByNameErrors(t *testing.T) {
	t.Parallel()
	p, clk, _ := newTestProvider(t)
	push(t, p, smp("rps", 10, "namespace", "default", "service", "web"))
	clk.Step(time.Minute)
	push(t, p, smp("fresh", 1, "namespace", "default", "service", "web"))
	old := smp("old", 1, "namespace", "default", "service", "web")
	old.Timestamp = t0.Add(-time.Hour)
	push(t, p, old)

	info := func(m string) providers.CustomMetricInfo {
		return providers.CustomMetricInfo{GroupResource: servicesGR, Metric: m, Namespaced: true}
	}
	ctx := context.Background()
	_, err := p.GetMetricByName(ctx, types.NamespacedName{Namespace: "default", Name: "web"}, info("nope"), labels.Everything())
	wantErr(t, err, 404, providers.ReasonUnknownMetric, "nope", "services")

	_, err = p.GetMetricByName(ctx, types.NamespacedName{Namespace: "default", Name: "db"}, info("rps"), labels.Everything())
	wantErr(t, err, 404, providers.ReasonNoValue, "rps", "default/db")

	_, err = p.GetMetricByName(ctx, types.NamespacedName{Namespace: "elsewhere", Name: "web"}, info("rps"), labels.Everything())
	wantErr(t, err, 404, providers.ReasonNoValue)

	_, err = p.GetMetricByName(ctx, types.NamespacedName{Namespace: "default", Name: "web"}, info("old"), labels.Everything())
	wantErr(t, err, 404, providers.ReasonStale, "stale", "old", "default/web")

	// rps was pushed a minute ago: fresh; 90 s later it is older than the 2 m max age
	if _, err := p.GetMetricByName(ctx, types.NamespacedName{Namespace: "default", Name: "web"}, info("rps"), labels.Everything()); err != nil {
		t.Fatalf("rps: %v", err)
	}
	clk.Step(90 * time.Second)
	_, err = p.GetMetricByName(ctx, types.NamespacedName{Namespace: "default", Name: "web"}, info("rps"), labels.Everything())
	wantErr(t, err, 404, providers.ReasonStale, "rps")
	if _, err := p.GetMetricByName(ctx, types.NamespacedName{Namespace: "default", Name: "web"}, info("fresh"), labels.Everything()); err != nil {
		t.Fatalf("fresh: %v", err)
	}
}

func TestPartlyStaleObjectIsStale(t *testing.T) {
	t.Parallel()
	p, clk, _ := newTestProvider(t)
	push(t, p, smp("lag", 1, "namespace", "default", "deployment", "w", "topic", "a"))
	clk.Step(3 * time.Minute)
	push(t, p, smp("lag", 2, "namespace", "default", "deployment", "w", "topic", "b"))
	_, err := p.GetMetricByName(context.Background(), types.NamespacedName{Namespace: "default", Name: "w"},
		providers.CustomMetricInfo{GroupResource: deployGR, Metric: "lag", Namespaced: true}, labels.Everything())
	wantErr(t, err, 404, providers.ReasonStale)
}

func TestGetMetricBySelectorPods(t *testing.T) {
	t.Parallel()
	p, clk, objs := newTestProvider(t)
	push(t, p,
		smp("inflight", 1, "namespace", "default", "pod", "web-1", "path", "a"),
		smp("inflight", 2, "namespace", "default", "pod", "web-1", "path", "b"),
		smp("inflight", 5, "namespace", "default", "pod", "web-2", "path", "a"),
		smp("inflight", 9, "namespace", "default", "pod", "db-1", "path", "a"),
		smp("inflight", 9, "namespace", "other", "pod", "web-3", "path", "a"),  // same name, other namespace
		smp("inflight", 9, "namespace", "default", "pod", "gone", "path", "a"), // no such pod
	)
	info := providers.CustomMetricInfo{GroupResource: podsGR, Metric: "inflight", Namespaced: true}
	ctx := context.Background()
	values := func(t *testing.T, msel string) map[string]int64 {
		t.Helper()
		list, err := p.GetMetricBySelector(ctx, "default", mustSel(t, "app=web"), info, mustSel(t, msel))
		if err != nil {
			t.Fatalf("GetMetricBySelector: %v", err)
		}
		got := map[string]int64{}
		for _, it := range list.Items {
			got[it.DescribedObject.Name] = it.Value.MilliValue()
		}
		return got
	}
	if got := values(t, ""); fmt.Sprint(got) != fmt.Sprint(map[string]int64{"web-1": 3000, "web-2": 5000}) {
		t.Errorf("values = %v", got)
	}
	if got := values(t, "path=a"); fmt.Sprint(got) != fmt.Sprint(map[string]int64{"web-1": 1000, "web-2": 5000}) {
		t.Errorf("values with metric selector = %v", got)
	}
	if objs.calls != 2 {
		t.Errorf("object lister calls = %d, want 2", objs.calls)
	}

	// web-2 goes stale: it is left out, web-1 still answers
	clk.Step(3 * time.Minute)
	push(t, p, smp("inflight", 4, "namespace", "default", "pod", "web-1", "path", "a"), smp("inflight", 4, "namespace", "default", "pod", "web-1", "path", "b"))
	if got := values(t, ""); fmt.Sprint(got) != fmt.Sprint(map[string]int64{"web-1": 8000}) {
		t.Errorf("values after web-2 went stale = %v", got)
	}
	// all stale: 404 stale
	clk.Step(3 * time.Minute)
	_, err := p.GetMetricBySelector(ctx, "default", mustSel(t, "app=web"), info, labels.Everything())
	wantErr(t, err, 404, providers.ReasonStale, "stale", "pods")

	// no pod matches
	_, err = p.GetMetricBySelector(ctx, "default", mustSel(t, "app=none"), info, labels.Everything())
	wantErr(t, err, 404, providers.ReasonNoValue, "no such objects")

	// the lister fails: its error goes through
	objs.err = providers.NewBackendError("objects", errors.New("watch cache not filled"))
	_, err = p.GetMetricBySelector(ctx, "default", mustSel(t, "app=web"), info, labels.Everything())
	wantErr(t, err, 503, providers.ReasonBackend, "watch cache not filled")
}

func TestGetExternalMetric(t *testing.T) {
	t.Parallel()
	p, clk, _ := newTestProvider(t)
	push(t, p,
		smp("queue_depth", 12.5, "namespace", "default", "queue", "orders"),
		smp("queue_depth", 3, "namespace", "default", "queue", "billing"),
		smp("queue_depth", 100, "namespace", "other", "queue", "orders"),
		smp("queue_depth", 7, "queue", "global"), // unscoped: every namespace
	)
	ctx := context.Background()
	get := func(t *testing.T, ns, sel string) []string {
		t.Helper()
		list, err := p.GetExternalMetric(ctx, ns, mustSel(t, sel), providers.ExternalMetricInfo{Metric: "queue_depth"})
		if err != nil {
			t.Fatalf("GetExternalMetric(%s, %q): %v", ns, sel, err)
		}
		var out []string
		for _, it := range list.Items {
			out = append(out, it.MetricLabels["queue"]+"="+it.Value.String())
		}
		sort.Strings(out)
		return out
	}
	tests := []struct {
		ns, sel string
		want    string
	}{
		{"default", "", "[billing=3 global=7 orders=12500m]"}, // unsummed
		{"default", "queue=orders", "[orders=12500m]"},
		{"default", "queue in (orders,billing)", "[billing=3 orders=12500m]"},
		{"default", "queue!=orders", "[billing=3 global=7]"},
		{"other", "", "[global=7 orders=100]"},
		{"third", "", "[global=7]"},
	}
	for _, tc := range tests {
		if got := fmt.Sprint(get(t, tc.ns, tc.sel)); got != tc.want {
			t.Errorf("ns %s selector %q: got %s, want %s", tc.ns, tc.sel, got, tc.want)
		}
	}

	_, err := p.GetExternalMetric(ctx, "default", mustSel(t, "queue=nope"), providers.ExternalMetricInfo{Metric: "queue_depth"})
	wantErr(t, err, 404, providers.ReasonNoValue, "queue_depth", "queue=nope")
	_, err = p.GetExternalMetric(ctx, "default", labels.Everything(), providers.ExternalMetricInfo{Metric: "missing"})
	wantErr(t, err, 404, providers.ReasonUnknownMetric, "missing")

	// one matching series stale: the whole answer is refused, never a partial sum
	clk.Step(90 * time.Second)
	push(t, p, smp("queue_depth", 13, "namespace", "default", "queue", "orders"))
	clk.Step(60 * time.Second)
	if got := fmt.Sprint(get(t, "default", "queue=orders")); got != "[orders=13]" {
		t.Errorf("fresh series: %s", got)
	}
	_, err = p.GetExternalMetric(ctx, "default", labels.Everything(), providers.ExternalMetricInfo{Metric: "queue_depth"})
	wantErr(t, err, 404, providers.ReasonStale, "stale", "queue_depth")
}

func TestTTLExpiry(t *testing.T) {
	t.Parallel()
	p, clk, _ := newTestProvider(t)
	push(t, p, smp("a", 1, "x", "1"), smp("a", 2, "x", "2"), smp("b", 1))
	clk.Step(6 * time.Minute)
	push(t, p, smp("a", 3, "x", "2"))
	clk.Step(5 * time.Minute) // x=1 and b were pushed 11 minutes ago: past the 10 m TTL
	// before Expire runs, expired series are already invisible
	_, err := p.GetExternalMetric(context.Background(), "default", mustSel(t, "x=1"), providers.ExternalMetricInfo{Metric: "a"})
	wantErr(t, err, 404, providers.ReasonNoValue)
	if n := p.Store().Expire(); n != 2 {
		t.Errorf("expired %d series, want 2", n)
	}
	if n := p.SeriesCount(); n != 1 {
		t.Errorf("series left = %d, want 1", n)
	}
	_, err = p.GetExternalMetric(context.Background(), "default", labels.Everything(), providers.ExternalMetricInfo{Metric: "b"})
	wantErr(t, err, 404, providers.ReasonUnknownMetric)
	ext := p.ListAllExternalMetrics()
	if len(ext) != 1 || ext[0].Metric != "a" {
		t.Errorf("external discovery after expiry = %v", ext)
	}
}

func TestOutOfOrderAndFutureSamples(t *testing.T) {
	t.Parallel()
	p, _, _ := newTestProvider(t)
	s := smp("a", 5)
	push(t, p, s)
	older := smp("a", 1)
	older.Timestamp = t0.Add(-time.Second)
	push(t, p, older)
	list, err := p.GetExternalMetric(context.Background(), "ns", labels.Everything(), providers.ExternalMetricInfo{Metric: "a"})
	if err != nil || list.Items[0].Value.Value() != 5 {
		t.Fatalf("an older sample replaced a newer one: %v %v", list, err)
	}
	future := smp("a", 1)
	future.Timestamp = t0.Add(time.Hour)
	if err := p.Append([]providers.Sample{smp("b", 1), future}); err == nil || !strings.Contains(err.Error(), "future") {
		t.Fatalf("future sample: err = %v", err)
	}
	if p.SeriesCount() != 1 {
		t.Errorf("a refused push stored something: %d series", p.SeriesCount())
	}
}

func TestSeriesLimit(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(t0)
	p := New("mem", NewStore(clk, time.Hour, 2), testResolver(), nil, clk, time.Minute)
	push(t, p, smp("a", 1, "i", "1"), smp("a", 1, "i", "2"))
	push(t, p, smp("a", 2, "i", "1")) // an update needs no room
	err := p.Append([]providers.Sample{smp("a", 1, "i", "3")})
	if !errors.Is(err, ErrStoreFull) {
		t.Fatalf("err = %v, want ErrStoreFull", err)
	}
}

func TestDiscovery(t *testing.T) {
	t.Parallel()
	p, _, _ := newTestProvider(t)
	push(t, p,
		smp("rps", 1, "namespace", "default", "service", "web"),
		smp("inflight", 1, "namespace", "default", "pod", "web-1", "queue", "x"),
		smp("temp", 1, "node", "n1"),
		smp("orphan", 1, "pod", "p"), // a pod label without namespace names no pod
		smp("queue_depth", 1, "queue", "orders"),
	)
	var got []string
	for _, m := range p.ListAllMetrics() {
		got = append(got, m.String())
	}
	sort.Strings(got)
	want := []string{"namespaces/inflight", "namespaces/rps", "nodes/temp", "pods/inflight(namespaced)", "services/rps(namespaced)"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("custom discovery:\n got %v\nwant %v", got, want)
	}
	var ext []string
	for _, m := range p.ListAllExternalMetrics() {
		ext = append(ext, m.Metric)
	}
	if fmt.Sprint(ext) != "[inflight orphan queue_depth rps temp]" {
		t.Errorf("external discovery = %v", ext)
	}
}

func TestQuantity(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0"}, {1, "1"}, {12.5, "12500m"}, {-3.25, "-3250m"}, {0.0004, "0"}, {0.0006, "1m"},
		{1e20, "9223372036854775807m"}, {9e15, "9P"},
	}
	for _, tc := range tests {
		q := Quantity(tc.in)
		if got := q.String(); got != tc.want {
			t.Errorf("Quantity(%v) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestFactoryOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		raw     string
		wantErr string
	}{
		{``, ""},
		{`{"seriesTTL":"5m","maxAge":"30s","maxSeries":10}`, ""},
		{`{"seriesTTL":"-5m"}`, "providers[0].options.seriesTTL"},
		{`{"maxAge":"0s"}`, "providers[0].options.maxAge"},
		{`{"maxSeries":-1}`, "providers[0].options.maxSeries"},
		{`{"bogus":1}`, `unknown field "bogus"`},
		{`{"maxBytes":1048576,"maxExternalItems":100}`, ""},
		{`{"maxBytes":-1}`, "providers[0].options.maxBytes"},
		{`{"maxExternalItems":-1}`, "providers[0].options.maxExternalItems"},
	}
	for _, tc := range tests {
		err := Factory{}.Validate("providers[0].options", []byte(tc.raw))
		if tc.wantErr == "" && err != nil {
			t.Errorf("%s: unexpected error %v", tc.raw, err)
		}
		if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: error %v, want one containing %q", tc.raw, err, tc.wantErr)
		}
	}
	prov, err := Factory{SeriesTTL: time.Hour, MaxAge: time.Hour}.New("m", []byte(`{"maxAge":"30s"}`), providers.Deps{Mapper: testMapper()})
	if err != nil {
		t.Fatal(err)
	}
	if mp := prov.(*Provider); mp.maxAge != 30*time.Second || mp.store.ttl != time.Hour {
		t.Errorf("options not applied: maxAge %s ttl %s", mp.maxAge, mp.store.ttl)
	}
}

func testResolver() *naming.Resolver { return naming.NewResolver(testMapper(), nil) }

// TestQuantitySaturates: no served value may have a milli-value that wraps
// an int64 in the HPA (Quantity.MilliValue).
func TestQuantitySaturates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   float64
		want int64
	}{
		{9.3e15, math.MaxInt64},
		{1e300, math.MaxInt64},
		{-9.3e15, -math.MaxInt64},
		{-1e308, -math.MaxInt64},
		{math.Inf(1), math.MaxInt64},
		{math.Inf(-1), -math.MaxInt64},
		{9e15, 9e18},
		{-9e15, -9e18},
	}
	for _, tc := range tests {
		q := Quantity(tc.in)
		if got := q.MilliValue(); got != tc.want {
			t.Errorf("Quantity(%g).MilliValue() = %d (%s), want %d", tc.in, got, q.String(), tc.want)
		}
	}
}

// TestSumSaturates: the sum of several series of one object saturates
// instead of wrapping; a value beyond the range is refused at Append.
func TestSumSaturates(t *testing.T) {
	t.Parallel()
	p, _, _ := newTestProvider(t)
	push(t, p,
		smp("big", -9e15, "namespace", "default", "pod", "web-1", "shard", "a"),
		smp("big", -9e15, "namespace", "default", "pod", "web-1", "shard", "b"),
	)
	mv, err := p.GetMetricByName(context.Background(), types.NamespacedName{Namespace: "default", Name: "web-1"},
		providers.CustomMetricInfo{GroupResource: podsGR, Namespaced: true, Metric: "big"}, labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	if got := mv.Value.MilliValue(); got != -math.MaxInt64 {
		t.Errorf("sum of two -9e15 = %s (milli %d), want -%d milli", mv.Value.String(), got, int64(math.MaxInt64))
	}
	err = p.Append([]providers.Sample{smp("big", 1e300, "namespace", "default", "pod", "web-2")})
	if err == nil || !strings.Contains(err.Error(), "big") || !strings.Contains(err.Error(), "milli-value") {
		t.Errorf("Append(1e300) = %v, want an error naming the series and the range", err)
	}
}

// TestTimestampOutOfRange: a timestamp UnixNano cannot represent wrapped
// around (1615 became 2200) and was stored.
func TestTimestampOutOfRange(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ts   time.Time
	}{
		{"1615", time.Date(1615, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"1677", time.Date(1677, 9, 21, 0, 0, 0, 0, time.UTC)},
		{"1969", time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, _, _ := newTestProvider(t)
			s := smp("a", 1, "queue", "x")
			s.Timestamp = tc.ts
			err := p.Append([]providers.Sample{s})
			if err == nil || !strings.Contains(err.Error(), "out of range") || !strings.Contains(err.Error(), `a{queue="x"}`) {
				t.Errorf("Append(timestamp %s) = %v, want an out-of-range error naming the series", tc.ts, err)
			}
			if p.SeriesCount() != 0 {
				t.Errorf("stored %d series", p.SeriesCount())
			}
		})
	}
}

// TestMaxExternalItems: an external answer holds at most maxExternalItems
// series; a query matching more is refused (400, narrow the selector)
// instead of building an unbounded list.
func TestMaxExternalItems(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(t0)
	prov, err := Factory{}.New("m", []byte(`{"maxExternalItems":3}`), providers.Deps{Resources: testResolver(), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	p := prov.(*Provider)
	push(t, p, smp("q", 1, "queue", "a"), smp("q", 2, "queue", "b"), smp("q", 3, "queue", "c"), smp("q", 4, "queue", "d"))
	ctx := context.Background()
	_, err = p.GetExternalMetric(ctx, "ns", labels.Everything(), providers.ExternalMetricInfo{Metric: "q"})
	wantErr(t, err, 400, providers.ReasonTooManyItems, "q", "more than 3", "narrow the selector")
	list, err := p.GetExternalMetric(ctx, "ns", mustSel(t, "queue in (a,b,c)"), providers.ExternalMetricInfo{Metric: "q"})
	if err != nil || len(list.Items) != 3 {
		t.Errorf("3 series at a cap of 3: %v %v", list, err)
	}
	d, err := Factory{}.New("d", nil, providers.Deps{Resources: testResolver(), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if dp := d.(*Provider); dp.maxExternalItems != DefaultMaxExternalItems || dp.store.maxBytes != DefaultMaxBytes {
		t.Errorf("defaults not applied: maxExternalItems %d maxBytes %d", dp.maxExternalItems, dp.store.maxBytes)
	}
}

var namespacesGR = schema.GroupResource{Resource: "namespaces"}
