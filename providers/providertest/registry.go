package providertest

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/registry"
)

// registryTimeout is the instance timeout of the suite's registries.
const registryTimeout = 300 * time.Millisecond

func (e *env) registry(t *testing.T) *registry.Registry {
	t.Helper()
	name := e.b.Provider.Name()
	r, err := registry.New([]*registry.Instance{{Provider: e.b.Provider, Timeout: registryTimeout}},
		[]registry.Route{{Metric: "*", Provider: name}}, e.deps.Resources, 0, e.deps.Clock)
	if err != nil {
		t.Fatalf("registry over the provider: %v", err)
	}
	return r
}

func runRegistry(t *testing.T, h *Harness) {
	for _, tc := range []struct {
		name        string
		empty, hang bool
	}{
		{"discovery with data", false, false},
		{"discovery with no data", true, false},
		{"discovery while the backend hangs", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := h.build(t, tc.empty)
			r := e.registry(t)
			if tc.hang {
				e.hang(t)
			}
			if took := timed(func() {
				if l := r.ListAllMetrics(); len(l) == 0 {
					t.Error("custom metrics discovery is empty")
				}
				if l := r.ListAllExternalMetrics(); len(l) == 0 {
					t.Error("external metrics discovery is empty")
				}
			}); took > 100*time.Millisecond {
				t.Errorf("discovery took %s, want under 100ms", took)
			}
			if tc.empty {
				return
			}
			if h.Custom {
				found := false
				for _, m := range r.ListAllMetrics() {
					found = found || m.GroupResource == podsGR && m.Metric == customRequests
				}
				if !found {
					t.Errorf("the registry does not list %s of pods", customRequests)
				}
			}
			if h.External {
				found := false
				for _, m := range r.ListAllExternalMetrics() {
					found = found || m.Metric == externalQueue
				}
				if !found {
					t.Errorf("the registry does not list %s", externalQueue)
				}
			}
		})
	}

	t.Run("queries", func(t *testing.T) {
		t.Parallel()
		r := h.build(t, false).registry(t)
		ctx := context.Background()
		if h.Custom {
			// the registry normalizes "pod" to "pods"
			info := providers.CustomMetricInfo{GroupResource: podsGR, Metric: customRequests}
			info.GroupResource.Resource = "pod"
			mv, err := r.GetMetricByName(ctx, types.NamespacedName{Namespace: "a", Name: "p1"}, info, labels.Everything())
			wantValue(t, "a/p1 through the registry", mv, err, "a", "p1", 1)
			info.Metric = unknownMetric
			mv, err = r.GetMetricByName(ctx, types.NamespacedName{Namespace: "a", Name: "p1"}, info, labels.Everything())
			wantNotFound(t, "unknown metric through the registry", mv != nil, err, unknownMetric)
		}
		if h.External {
			list, err := r.GetExternalMetric(ctx, "a", labels.Everything(), providers.ExternalMetricInfo{Metric: externalQueue})
			wantSeries(t, "namespace a through the registry", list, err, externalQueue, map[string]int64{"q1": 1000, "q2": 2000})
			list, err = r.GetExternalMetric(ctx, "a", labels.Everything(), providers.ExternalMetricInfo{Metric: externalStale})
			wantStale(t, h, "old series through the registry", list != nil, err, externalStale)
		}
	})

	t.Run("queries while the backend hangs", func(t *testing.T) {
		t.Parallel()
		e := h.build(t, false)
		r := e.registry(t)
		e.hang(t)
		ctx := context.Background()
		if h.Custom {
			info := providers.CustomMetricInfo{GroupResource: podsGR, Metric: customRequests}
			var err error
			var served bool
			took := timed(func() {
				mv, gerr := r.GetMetricByName(ctx, types.NamespacedName{Namespace: "a", Name: "p1"}, info, labels.Everything())
				served, err = mv != nil, gerr
			})
			wantFailedPromptly(t, "custom metric", served, err, took)
		}
		if h.External {
			var err error
			var served bool
			took := timed(func() {
				list, gerr := r.GetExternalMetric(ctx, "a", labels.Everything(), providers.ExternalMetricInfo{Metric: externalQueue})
				served, err = list != nil, gerr
			})
			wantFailedPromptly(t, "external metric", served, err, took)
		}
	})
}
