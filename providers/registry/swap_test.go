package registry

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/metrics/pkg/apis/external_metrics"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/memory"
)

// gateProvider blocks each external query until release is closed, and
// says when a query has entered it.
type gateProvider struct {
	name    string
	value   int64
	entered chan struct{}
	release chan struct{}
}

func newGate(name string, value int64) *gateProvider {
	return &gateProvider{name: name, value: value, entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (p *gateProvider) Name() string { return p.name }

func (p *gateProvider) GetExternalMetric(context.Context, string, labels.Selector, provider.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	p.entered <- struct{}{}
	<-p.release
	return &external_metrics.ExternalMetricValueList{Items: []external_metrics.ExternalMetricValue{{Value: memory.Quantity(float64(p.value))}}}, nil
}

func (p *gateProvider) ListAllExternalMetrics() []provider.ExternalMetricInfo {
	return []provider.ExternalMetricInfo{{Metric: p.name + "_metric"}}
}

func externalValue(t *testing.T, r *Registry, metric string) int64 {
	t.Helper()
	list, err := r.GetExternalMetric(context.Background(), "default", labels.Everything(), provider.ExternalMetricInfo{Metric: metric})
	if err != nil {
		t.Fatalf("%s: %v", metric, err)
	}
	return list.Items[0].Value.Value()
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestSwapDrainsRetiredProvider: a query running on a provider that a swap
// removes finishes on it with its answer, new queries go to the new
// provider at once, and the old one is drained only once the query returned.
func TestSwapDrainsRetiredProvider(t *testing.T) {
	t.Parallel()
	old := newGate("old", 1)
	fresh := &testProvider{name: "fresh", value: 2}
	oldIn := &Instance{Provider: old, Timeout: time.Minute}
	r, err := New([]*Instance{oldIn}, []Route{{Metric: "*", Provider: "old"}}, testResolver(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	var got int64
	var qerr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		list, err := r.GetExternalMetric(context.Background(), "default", labels.Everything(), provider.ExternalMetricInfo{Metric: "m"})
		if err != nil {
			qerr = err
			return
		}
		got = list.Items[0].Value.Value()
	}()
	<-old.entered // the query is inside the old provider

	if oldIn.Drained() != nil {
		t.Fatal("Drained is set before the instance was retired")
	}
	retired, err := r.Swap([]*Instance{{Provider: fresh, Timeout: time.Second}}, []Route{{Metric: "*", Provider: "fresh"}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(retired) != 1 || retired[0] != oldIn {
		t.Fatalf("retired = %v, want the old instance", retired)
	}
	if closed(oldIn.Drained()) || oldIn.Inflight() != 1 {
		t.Fatalf("drained while a query runs on it (inflight %d)", oldIn.Inflight())
	}
	if v := externalValue(t, r, "m"); v != 2 {
		t.Errorf("after the swap a new query was answered %d, want 2 from the new provider", v)
	}
	if g := r.Generation(); g != 2 {
		t.Errorf("generation %d after one swap, want 2", g)
	}

	close(old.release)
	wg.Wait()
	if qerr != nil || got != 1 {
		t.Errorf("in-flight query: %d %v, want 1 from the old provider", got, qerr)
	}
	select {
	case <-oldIn.Drained():
	case <-time.After(10 * time.Second):
		t.Fatal("the retired instance never drained after its query returned")
	}
}

// TestSwapKeepsPassedInstances: an instance passed again, or remade with
// WithTimeout, is not retired; its provider's state stays; the discovery
// lists follow the new routes at once.
func TestSwapKeepsPassedInstances(t *testing.T) {
	t.Parallel()
	a := &testProvider{name: "a", value: 1, external: []providers.ExternalMetricInfo{{Metric: "a_one"}, {Metric: "shared"}}}
	b := &testProvider{name: "b", value: 2, external: []providers.ExternalMetricInfo{{Metric: "shared"}}}
	ai := &Instance{Provider: a, Timeout: time.Second}
	bi := &Instance{Provider: b, Timeout: time.Second}
	r, err := New([]*Instance{ai, bi}, []Route{{Metric: "a_*", Provider: "a"}, {Metric: "*", Provider: "b"}}, testResolver(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	disc := func() string {
		var names []string
		for _, m := range r.ListAllExternalMetrics() {
			names = append(names, m.Metric+"@"+r.Route(m.Metric, KindExternal).Provider.Name())
		}
		return strings.Join(names, " ")
	}
	if got := disc(); got != "a_one@a shared@b" {
		t.Fatalf("discovery before: %q", got)
	}
	ai2 := ai.WithTimeout(3 * time.Second)
	retired, err := r.Swap([]*Instance{ai2, bi}, []Route{{Metric: "*", Provider: "a"}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(retired) != 0 || ai.Drained() != nil || bi.Drained() != nil {
		t.Fatalf("retired %v; kept instances must not be retired", retired)
	}
	if got := disc(); got != "a_one@a shared@a" {
		t.Errorf("discovery after the swap: %q, want every metric under a", got)
	}
	if v := externalValue(t, r, "shared"); v != 1 {
		t.Errorf("shared answered %d, want 1 from a", v)
	}
	if in := r.Route("shared", KindExternal); in.Timeout != 3*time.Second {
		t.Errorf("timeout %s, want the new 3s", in.Timeout)
	}

	// dropping b retires it once; a stays
	retired, err = r.Swap([]*Instance{ai2}, []Route{{Metric: "*", Provider: "a"}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(retired) != 1 || retired[0] != bi || !closed(bi.Drained()) {
		t.Errorf("retired %v, want b, drained at once (idle)", retired)
	}
}

// TestSwapInvalidChangesNothing: a table New would refuse is refused by
// Swap, and the old one keeps serving.
func TestSwapInvalidChangesNothing(t *testing.T) {
	t.Parallel()
	a := &testProvider{name: "a", value: 1}
	r := newRegistry(t, []Route{{Metric: "*", Provider: "a"}}, a)
	tests := []struct {
		name   string
		ins    []*Instance
		routes []Route
		want   string
	}{
		{"no providers", nil, nil, "no providers"},
		{"unknown provider", []*Instance{{Provider: a, Timeout: time.Second}}, []Route{{Metric: "*", Provider: "nope"}}, `unknown provider "nope"`},
		{"bad timeout", []*Instance{{Provider: a}}, nil, "timeout must be positive"},
		{"resource route on a provider without resource metrics", []*Instance{{Provider: a, Timeout: time.Second}}, []Route{{Metric: "*", Provider: "a", Kind: KindResource}}, "serves no resource metrics"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := r.Swap(tc.ins, tc.routes, 0); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to say %q", err, tc.want)
			}
		})
	}
	if r.Generation() != 1 {
		t.Errorf("generation %d: a refused swap changed the table", r.Generation())
	}
	if v := externalValue(t, r, "m"); v != 1 {
		t.Errorf("answered %d after refused swaps, want 1", v)
	}
}

// TestSwapUnderLoad: queries racing swaps never fail and never reach a
// retired provider after it drained (run with -race).
func TestSwapUnderLoad(t *testing.T) {
	t.Parallel()
	type tracked struct {
		*testProvider
		in *Instance
	}
	mk := func(v int64) tracked {
		p := &testProvider{name: "p", value: v}
		return tracked{p, &Instance{Provider: p, Timeout: time.Second}}
	}
	first := mk(0)
	r, err := New([]*Instance{first.in}, []Route{{Metric: "*", Provider: "p"}}, testResolver(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !closed(stop) {
				if _, err := r.GetExternalMetric(context.Background(), "default", labels.Everything(), provider.ExternalMetricInfo{Metric: "m"}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var drainedCalls []int64
	for i := int64(1); i <= 200; i++ {
		next := mk(i)
		retired, err := r.Swap([]*Instance{next.in}, []Route{{Metric: "*", Provider: "p"}}, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range retired {
			<-in.Drained()
			drainedCalls = append(drainedCalls, in.Provider.(*testProvider).calls.Load())
			// after draining, no call may start on it
			defer func(p *testProvider, n int64) {
				if got := p.calls.Load(); got != n {
					t.Errorf("provider %d got %d calls after it drained (had %d)", p.value, got, n)
				}
			}(in.Provider.(*testProvider), drainedCalls[len(drainedCalls)-1])
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("query failed during swaps: %v", err)
	}
	if len(drainedCalls) != 200 {
		t.Errorf("%d providers retired, want 200", len(drainedCalls))
	}
}
