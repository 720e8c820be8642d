package registry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	"k8s.io/metrics/pkg/apis/external_metrics"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/memory"
	"github.com/metricscale/metricscale/providers/naming"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func testMapper() apimeta.RESTMapper {
	m := apimeta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, apimeta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "Service"}, apimeta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, apimeta.RESTScopeRoot)
	m.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, apimeta.RESTScopeNamespace)
	return m
}

// testProvider is a scripted provider: it answers with a fixed value, or
// hangs, fails or panics, and records what it was asked.
type testProvider struct {
	name     string
	value    int64
	behavior string // "", "hang", "hang-ignoring-ctx", "fail", "panic", "notfound"
	custom   []providers.CustomMetricInfo
	external []providers.ExternalMetricInfo
	lastGR   atomic.Value
	calls    atomic.Int64
}

func (p *testProvider) Name() string { return p.name }

func (p *testProvider) act(ctx context.Context) error {
	p.calls.Add(1)
	switch p.behavior {
	case "hang":
		<-ctx.Done()
		return fmt.Errorf("backend call aborted: %w", ctx.Err())
	case "hang-ignoring-ctx":
		time.Sleep(2 * time.Second)
		return nil
	case "fail":
		return fmt.Errorf("connecting to backend 10.0.0.1:9090: %w", errors.New("connection refused"))
	case "panic":
		panic("boom")
	case "notfound":
		return providers.NewUnknownMetric(schema.GroupResource{}, "x")
	}
	return nil
}

func (p *testProvider) GetMetricByName(ctx context.Context, name types.NamespacedName, info provider.CustomMetricInfo, _ labels.Selector) (*custom_metrics.MetricValue, error) {
	p.lastGR.Store(info.GroupResource)
	if err := p.act(ctx); err != nil {
		return nil, err
	}
	mv := &custom_metrics.MetricValue{DescribedObject: custom_metrics.ObjectReference{Name: name.Name}}
	mv.Value = memory.Quantity(float64(p.value))
	return mv, nil
}

func (p *testProvider) GetMetricBySelector(ctx context.Context, _ string, _ labels.Selector, info provider.CustomMetricInfo, _ labels.Selector) (*custom_metrics.MetricValueList, error) {
	p.lastGR.Store(info.GroupResource)
	if err := p.act(ctx); err != nil {
		return nil, err
	}
	return &custom_metrics.MetricValueList{Items: []custom_metrics.MetricValue{{Value: memory.Quantity(float64(p.value))}}}, nil
}

func (p *testProvider) GetExternalMetric(ctx context.Context, _ string, _ labels.Selector, _ provider.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	if err := p.act(ctx); err != nil {
		return nil, err
	}
	return &external_metrics.ExternalMetricValueList{Items: []external_metrics.ExternalMetricValue{{Value: memory.Quantity(float64(p.value))}}}, nil
}

func (p *testProvider) ListAllMetrics() []provider.CustomMetricInfo           { return p.custom }
func (p *testProvider) ListAllExternalMetrics() []provider.ExternalMetricInfo { return p.external }

func newRegistry(t *testing.T, routes []Route, ps ...providers.Provider) *Registry {
	t.Helper()
	return newRegistryTimeout(t, 200*time.Millisecond, routes, ps...)
}

// newRegistryTimeout is newRegistry with the providers' query timeout.
func newRegistryTimeout(t *testing.T, timeout time.Duration, routes []Route, ps ...providers.Provider) *Registry {
	t.Helper()
	var ins []*Instance
	for _, p := range ps {
		ins = append(ins, &Instance{Provider: p, Timeout: timeout})
	}
	r, err := New(ins, routes, testResolver(), 3, clocktesting.NewFakeClock(t0))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func code(err error) int {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return int(st.Status().Code)
	}
	return -1
}

func TestRouting(t *testing.T) {
	t.Parallel()
	a := &testProvider{name: "a", value: 1}
	b := &testProvider{name: "b", value: 2}
	c := &testProvider{name: "c", value: 3}
	r := newRegistry(t, []Route{
		{Metric: "queue_*", Provider: "b"},
		{Metric: "lag", Provider: "c", Kind: KindExternal},
		{Metric: "*", Provider: "a"},
	}, a, b, c)
	ctx := context.Background()
	tests := []struct {
		name, metric string
		external     bool
		want         int64
	}{
		{"glob route", "queue_depth", true, 2},
		{"glob route, custom", "queue_depth", false, 2},
		{"kind-limited route", "lag", true, 3},
		{"kind-limited route does not take custom", "lag", false, 1},
		{"catch-all", "other", true, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got int64
			if tc.external {
				list, err := r.GetExternalMetric(ctx, "default", labels.Everything(), provider.ExternalMetricInfo{Metric: tc.metric})
				if err != nil {
					t.Fatal(err)
				}
				got = list.Items[0].Value.Value()
			} else {
				mv, err := r.GetMetricByName(ctx, types.NamespacedName{Namespace: "default", Name: "x"},
					provider.CustomMetricInfo{GroupResource: schema.GroupResource{Resource: "pods"}, Metric: tc.metric, Namespaced: true}, labels.Everything())
				if err != nil {
					t.Fatal(err)
				}
				got = mv.Value.Value()
			}
			if got != tc.want {
				t.Errorf("answered by provider with value %d, want %d", got, tc.want)
			}
		})
	}
}

func TestNoRouteIs404(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, []Route{{Metric: "known_*", Provider: "a"}}, &testProvider{name: "a"})
	_, err := r.GetExternalMetric(context.Background(), "default", labels.Everything(), provider.ExternalMetricInfo{Metric: "unrouted"})
	if code(err) != 404 || !strings.Contains(err.Error(), "unrouted") {
		t.Errorf("err = %v (code %d), want a 404 naming the metric", err, code(err))
	}
}

func TestResourceNormalization(t *testing.T) {
	t.Parallel()
	a := &testProvider{name: "a"}
	r := newRegistry(t, []Route{{Metric: "*", Provider: "a"}}, a)
	tests := []struct {
		in   schema.GroupResource
		want schema.GroupResource
		code int
	}{
		{schema.GroupResource{Resource: "pods"}, schema.GroupResource{Resource: "pods"}, 0},
		{schema.GroupResource{Resource: "pod"}, schema.GroupResource{Resource: "pods"}, 0},
		{schema.GroupResource{Resource: "deployment"}, schema.GroupResource{Group: "apps", Resource: "deployments"}, 0},
		{schema.GroupResource{Group: "apps", Resource: "deployments"}, schema.GroupResource{Group: "apps", Resource: "deployments"}, 0},
		{schema.GroupResource{Resource: "widgets"}, schema.GroupResource{}, 404},
	}
	for _, tc := range tests {
		_, err := r.GetMetricByName(context.Background(), types.NamespacedName{Namespace: "d", Name: "x"},
			provider.CustomMetricInfo{GroupResource: tc.in, Metric: "m", Namespaced: true}, labels.Everything())
		if tc.code != 0 {
			if code(err) != tc.code || !strings.Contains(err.Error(), tc.in.String()) {
				t.Errorf("%s: err %v, want %d naming the resource", tc.in, err, tc.code)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if got := a.lastGR.Load().(schema.GroupResource); got != tc.want {
			t.Errorf("%s normalized to %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestBackendFailuresAreFast503s(t *testing.T) {
	t.Parallel()
	// The providers that answer get a timeout they cannot reach even on a
	// starved machine (CI runs the unit tests beside the e2e suite); those that
	// hang get 200ms, and without it a call would not return (hang) or would
	// return the provider's value after 2 s (hang-ignoring-ctx).
	tests := []struct {
		behavior string
		timeout  time.Duration
		code     int
		contains string
	}{
		{"fail", time.Minute, 503, "connection refused"},
		{"hang", 200 * time.Millisecond, 503, "did not answer in time"},
		{"hang-ignoring-ctx", 200 * time.Millisecond, 503, "did not answer in time"},
		{"panic", time.Minute, 503, "panicked"},
		{"notfound", time.Minute, 404, "x"},
	}
	for _, tc := range tests {
		t.Run(tc.behavior, func(t *testing.T) {
			t.Parallel()
			p := &testProvider{name: "prom", behavior: tc.behavior}
			r := newRegistryTimeout(t, tc.timeout, []Route{{Metric: "*", Provider: "prom"}}, p)
			done := make(chan error, 1)
			go func() {
				_, err := r.GetExternalMetric(context.Background(), "default", labels.Everything(), provider.ExternalMetricInfo{Metric: "q"})
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(2 * time.Minute):
				t.Fatalf("no answer after 2 minutes: the %s timeout was not enforced", tc.timeout)
			}
			if code(err) != tc.code || !strings.Contains(err.Error(), tc.contains) {
				t.Fatalf("err = %v (code %d), want %d containing %q", err, code(err), tc.code, tc.contains)
			}
			if tc.code == 503 && !strings.Contains(err.Error(), `"prom"`) {
				t.Errorf("a backend error must name the provider: %v", err)
			}
		})
	}
}

func TestDiscoveryMergesBoundsAndIsNeverEmpty(t *testing.T) {
	t.Parallel()
	pods := schema.GroupResource{Resource: "pods"}
	a := &testProvider{name: "a",
		custom:   []providers.CustomMetricInfo{{GroupResource: pods, Namespaced: true, Metric: "rps"}, {GroupResource: pods, Namespaced: true, Metric: "queue_x"}},
		external: []providers.ExternalMetricInfo{{Metric: "rps"}, {Metric: "queue_x"}, {Metric: "z1"}, {Metric: "z2"}, {Metric: "z3"}},
	}
	b := &testProvider{name: "b",
		external: []providers.ExternalMetricInfo{{Metric: "queue_x"}, {Metric: "queue_y"}},
	}
	r := newRegistry(t, []Route{{Metric: "queue_*", Provider: "b"}, {Metric: "*", Provider: "a"}}, a, b)
	var custom []string
	for _, m := range r.ListAllMetrics() {
		custom = append(custom, m.String())
	}
	// queue_x is routed to b, so a's queue_x is not listed
	if fmt.Sprint(custom) != "[pods/rps(namespaced)]" {
		t.Errorf("custom discovery = %v", custom)
	}
	var ext []string
	for _, m := range r.ListAllExternalMetrics() {
		ext = append(ext, m.Metric)
	}
	// bounded to maxMetrics = 3, sorted, each metric under its routed provider
	if fmt.Sprint(ext) != "[queue_x queue_y rps]" {
		t.Errorf("external discovery = %v", ext)
	}

	empty := newRegistry(t, []Route{{Metric: "*", Provider: "e"}}, &testProvider{name: "e"})
	if l := empty.ListAllMetrics(); len(l) != 1 || l[0].Metric != PlaceholderCustomMetric {
		t.Errorf("empty custom discovery = %v, want the placeholder", l)
	}
	if l := empty.ListAllExternalMetrics(); len(l) != 1 || l[0].Metric != PlaceholderExternalMetric {
		t.Errorf("empty external discovery = %v, want the placeholder", l)
	}
}

func TestAppendRoutesToMemoryProviders(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(t0)
	m1 := memory.New("m1", memory.NewStore(clk, time.Hour, 0), testResolver(), nil, clk, time.Hour)
	m2 := memory.New("m2", memory.NewStore(clk, time.Hour, 0), testResolver(), nil, clk, time.Hour)
	ext := &testProvider{name: "prom"}
	r := newRegistry(t, []Route{
		{Metric: "queue_*", Provider: "m2"},
		{Metric: "split", Provider: "m1", Kind: KindCustom},
		{Metric: "split", Provider: "m2", Kind: KindExternal},
		{Metric: "prom_*", Provider: "prom"},
		{Metric: "*", Provider: "m1"},
	}, m1, m2, ext)

	if err := r.Append([]providers.Sample{
		{Name: "queue_depth", Labels: map[string]string{"queue": "a"}, Value: 5},
		{Name: "rps", Value: 1},
		{Name: "split", Value: 2},
	}); err != nil {
		t.Fatal(err)
	}
	if m1.SeriesCount() != 2 || m2.SeriesCount() != 2 {
		t.Errorf("m1 has %d series (want rps, split), m2 %d (want queue_depth, split)", m1.SeriesCount(), m2.SeriesCount())
	}
	list, err := r.GetExternalMetric(context.Background(), "default", labels.Everything(), provider.ExternalMetricInfo{Metric: "queue_depth"})
	if err != nil || list.Items[0].Value.Value() != 5 {
		t.Fatalf("queue_depth through the registry: %v %v", list, err)
	}

	// a push touching a provider that takes no pushes is refused whole
	err = r.Append([]providers.Sample{{Name: "new_one", Value: 1}, {Name: "prom_x", Value: 1}})
	if err == nil || !strings.Contains(err.Error(), `"prom"`) || !strings.Contains(err.Error(), "prom_x") {
		t.Fatalf("err = %v", err)
	}
	if m1.SeriesCount() != 2 {
		t.Errorf("a refused push stored something in m1")
	}

	noCatchAll := newRegistry(t, []Route{{Metric: "a", Provider: "m"}}, memory.New("m", memory.NewStore(clk, time.Hour, 0), testResolver(), nil, clk, time.Hour))
	if err := noCatchAll.Append([]providers.Sample{{Name: "b", Value: 1}}); err == nil || !strings.Contains(err.Error(), `no route serves metric "b"`) {
		t.Errorf("unrouted push: err = %v", err)
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	a := &Instance{Provider: &testProvider{name: "a"}, Timeout: time.Second}
	tests := []struct {
		name   string
		ins    []*Instance
		routes []Route
		want   string
	}{
		{"no providers", nil, nil, "no providers"},
		{"unknown provider", []*Instance{a}, []Route{{Metric: "*", Provider: "b"}}, `routes[0]: unknown provider "b"`},
		{"bad glob", []*Instance{a}, []Route{{Metric: "[", Provider: "a"}}, "routes[0]: pattern"},
		{"bad kind", []*Instance{a}, []Route{{Metric: "*", Provider: "a", Kind: "both"}}, `unknown kind "both"`},
		{"duplicate", []*Instance{a, a}, nil, "duplicate provider"},
		{"no timeout", []*Instance{{Provider: &testProvider{name: "z"}}}, nil, "timeout"},
	}
	for _, tc := range tests {
		if _, err := New(tc.ins, tc.routes, testResolver(), 10, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
}

func testResolver() *naming.Resolver { return naming.NewResolver(testMapper(), nil) }

// A push that a later provider refuses must leave the earlier ones
// untouched: before the check-then-append protocol, m1 kept its series.
func TestAppendIsAtomicAcrossProviders(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(t0)
	m1 := memory.New("m1", memory.NewStore(clk, time.Hour, 0), testResolver(), nil, clk, time.Hour)
	full := memory.New("full", memory.NewStore(clk, time.Hour, 1), testResolver(), nil, clk, time.Hour)
	r := newRegistry(t, []Route{
		{Metric: "*", Provider: "m1", Kind: KindCustom},
		{Metric: "*", Provider: "full", Kind: KindExternal},
	}, m1, full)

	err := r.Append([]providers.Sample{{Name: "a", Value: 1}, {Name: "b", Value: 2}})
	if !errors.Is(err, providers.ErrStoreFull) {
		t.Fatalf("err = %v, want the second provider's ErrStoreFull", err)
	}
	if n := m1.SeriesCount(); n != 0 {
		t.Errorf("m1 stored %d series of a push the second provider refused", n)
	}
	if err := r.Append([]providers.Sample{{Name: "a", Value: 1}}); err != nil {
		t.Fatalf("a push that fits: %v", err)
	}
	if m1.SeriesCount() != 1 || full.SeriesCount() != 1 {
		t.Errorf("after a fitting push: m1 %d, full %d series, want 1 and 1", m1.SeriesCount(), full.SeriesCount())
	}
}

// externalOnly serves external metrics and nothing else, as a queue backend.
type externalOnly struct{ testProvider }

func (p *externalOnly) Name() string { return p.name }
func (p *externalOnly) GetExternalMetric(ctx context.Context, ns string, sel labels.Selector, info provider.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	return p.testProvider.GetExternalMetric(ctx, ns, sel, info)
}
func (p *externalOnly) ListAllExternalMetrics() []provider.ExternalMetricInfo { return p.external }

func TestKindNotServed(t *testing.T) {
	t.Parallel()
	q := &externalOnly{testProvider{name: "queues", value: 7, external: []providers.ExternalMetricInfo{{Metric: "depth"}}}}
	var _ providers.ExternalProvider = q
	r, err := New([]*Instance{{Provider: struct {
		providers.ExternalProvider
	}{q}, Timeout: time.Second}}, []Route{{Metric: "*", Provider: "queues"}}, testResolver(), 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.GetExternalMetric(context.Background(), "default", labels.Everything(), provider.ExternalMetricInfo{Metric: "depth"}); err != nil {
		t.Fatalf("external: %v", err)
	}
	_, err = r.GetMetricByName(context.Background(), types.NamespacedName{Namespace: "default", Name: "p"}, provider.CustomMetricInfo{GroupResource: schema.GroupResource{Resource: "pods"}, Metric: "depth"}, labels.Everything())
	if code := statusCode(err); code != 404 || !strings.Contains(err.Error(), `provider "queues", which serves no custom metrics`) {
		t.Errorf("custom query of an external-only provider: code %d, err %v", code, err)
	}
	if l := r.ListAllMetrics(); len(l) != 1 || l[0].Metric != PlaceholderCustomMetric {
		t.Errorf("custom discovery = %v, want only the placeholder", l)
	}
	if _, err := New([]*Instance{{Provider: struct{ providers.ExternalProvider }{q}, Timeout: time.Second}},
		[]Route{{Metric: "*", Provider: "queues", Kind: KindCustom}}, testResolver(), 10, nil); err == nil || !strings.Contains(err.Error(), "serves no custom metrics") {
		t.Errorf("a custom route to an external-only provider: err = %v", err)
	}
	if _, err := New([]*Instance{{Provider: struct{ providers.ExternalProvider }{q}, Timeout: time.Second}},
		[]Route{{Metric: "*", Provider: "queues", Kind: KindResource}}, testResolver(), 10, nil); err == nil || !strings.Contains(err.Error(), "serves no resource metrics") {
		t.Errorf("a resource route to an external-only provider: err = %v", err)
	}
}
