package providertest

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/metrics/pkg/apis/custom_metrics"

	"github.com/metricscale/metricscale/providers"
)

func podsInfo(metric string) providers.CustomMetricInfo {
	return providers.CustomMetricInfo{GroupResource: podsGR, Namespaced: true, Metric: metric}
}

func customProvider(t *testing.T, e *env) providers.CustomProvider {
	t.Helper()
	cp, ok := e.b.Provider.(providers.CustomProvider)
	if !ok {
		t.Fatalf("provider %T serves no custom metrics", e.b.Provider)
	}
	return cp
}

// byName asks for metric of pod ns/name.
func byName(cp providers.CustomProvider, ctx context.Context, ns, name, metric string, msel labels.Selector) (*custom_metrics.MetricValue, error) {
	return cp.GetMetricByName(ctx, types.NamespacedName{Namespace: ns, Name: name}, podsInfo(metric), msel)
}

// bySelector asks for metric of the pods in ns matching sel.
func bySelector(t *testing.T, cp providers.CustomProvider, ctx context.Context, ns, sel, metric string, msel labels.Selector) (*custom_metrics.MetricValueList, error) {
	t.Helper()
	return cp.GetMetricBySelector(ctx, ns, mustSelector(t, sel), podsInfo(metric), msel)
}

// values maps "ns/name" to the milli-value of each item.
func customValues(t *testing.T, what string, list *custom_metrics.MetricValueList) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, it := range list.Items {
		k := it.DescribedObject.Namespace + "/" + it.DescribedObject.Name
		if _, dup := out[k]; dup {
			t.Errorf("%s: %s listed twice", what, k)
		}
		out[k] = it.Value.MilliValue()
	}
	return out
}

func wantValue(t *testing.T, what string, mv *custom_metrics.MetricValue, err error, ns, name string, want float64) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	if mv == nil {
		t.Errorf("%s: no value and no error", what)
		return
	}
	if got := mv.Value.MilliValue(); got != int64(want*1000) {
		t.Errorf("%s: value %s, want %v", what, mv.Value.String(), want)
	}
	if o := mv.DescribedObject; o.Kind != "Pod" || o.Namespace != ns || o.Name != name {
		t.Errorf("%s: described object %+v, want Pod %s/%s", what, o, ns, name)
	}
}

func wantList(t *testing.T, what string, list *custom_metrics.MetricValueList, err error, want map[string]int64) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	if list == nil {
		t.Errorf("%s: no list and no error", what)
		return
	}
	if got, w := describe(customValues(t, what, list)), describe(want); got != w {
		t.Errorf("%s: got %s, want %s (milli-values)", what, got, w)
	}
	for _, it := range list.Items {
		if it.Value.MilliValue() == staleValue*1000 {
			t.Errorf("%s: served the stale value of %s/%s", what, it.DescribedObject.Namespace, it.DescribedObject.Name)
		}
	}
}

func runCustom(t *testing.T, h *Harness) {
	ctx := context.Background()
	every := labels.Everything()

	t.Run("values", func(t *testing.T) {
		t.Parallel()
		cp := customProvider(t, h.build(t, false))
		mv, err := byName(cp, ctx, "a", "p1", customRequests, every)
		wantValue(t, "a/p1", mv, err, "a", "p1", 1)
		list, err := bySelector(t, cp, ctx, "a", "app=web", customRequests, every)
		wantList(t, "pods app=web in a", list, err, map[string]int64{"a/p1": 1000, "a/p2": 2000, "a/only-a": 3000})
	})

	t.Run("unknown metric is 404", func(t *testing.T) {
		t.Parallel()
		cp := customProvider(t, h.build(t, false))
		mv, err := byName(cp, ctx, "a", "p1", unknownMetric, every)
		wantNotFound(t, "by name", mv != nil, err, unknownMetric)
		list, err := bySelector(t, cp, ctx, "a", "app=web", unknownMetric, every)
		wantNotFound(t, "by selector", list != nil, err, unknownMetric)
	})

	t.Run("unknown object is 404", func(t *testing.T) {
		t.Parallel()
		cp := customProvider(t, h.build(t, false))
		mv, err := byName(cp, ctx, "a", "ghost", customRequests, every)
		wantNotFound(t, "pod a/ghost", mv != nil, err, customRequests)
		list, err := bySelector(t, cp, ctx, "a", "app=none", customRequests, every)
		wantNotFound(t, "selector matching no pod", list != nil, err, customRequests)
		list, err = bySelector(t, cp, ctx, "a", "app=idle", customRequests, every)
		wantNotFound(t, "selector matching pods without a value", list != nil, err, customRequests)
	})

	t.Run("namespace isolation", func(t *testing.T) {
		t.Parallel()
		cp := customProvider(t, h.build(t, false))
		mv, err := byName(cp, ctx, "b", "p1", customRequests, every)
		wantValue(t, "b/p1", mv, err, "b", "p1", 10)
		mv, err = byName(cp, ctx, "b", "only-a", customRequests, every)
		wantNotFound(t, "b/only-a (its value is a/only-a's)", mv != nil, err, customRequests)
		list, err := bySelector(t, cp, ctx, "b", "app=web", customRequests, every)
		wantList(t, "pods app=web in b", list, err, map[string]int64{"b/p1": 10000})
		list, err = bySelector(t, cp, ctx, "c", "", customRequests, every)
		wantNotFound(t, "pods in c", list != nil, err, customRequests)
	})

	t.Run("metric selector", func(t *testing.T) {
		t.Parallel()
		cp := customProvider(t, h.build(t, false))
		mv, err := byName(cp, ctx, "a", "p1", customRequests, mustSelector(t, "code=200"))
		wantValue(t, "a/p1 code=200", mv, err, "a", "p1", 1)
		mv, err = byName(cp, ctx, "a", "p1", customRequests, mustSelector(t, "code=500"))
		wantNotFound(t, "a/p1 code=500", mv != nil, err, customRequests)
		for sel, want := range map[string]map[string]int64{
			"code=200":         {"a/p1": 1000, "a/only-a": 3000},
			"code!=200":        {"a/p2": 2000},
			"code in (500)":    {"a/p2": 2000},
			"code notin (500)": {"a/p1": 1000, "a/only-a": 3000},
			"code":             {"a/p1": 1000, "a/p2": 2000, "a/only-a": 3000},
		} {
			list, err := bySelector(t, cp, ctx, "a", "app=web", customRequests, mustSelector(t, sel))
			wantList(t, "pods app=web in a, metric selector "+sel, list, err, want)
		}
		list, err := bySelector(t, cp, ctx, "a", "app=web", customRequests, mustSelector(t, "!code"))
		wantNotFound(t, "metric selector !code", list != nil, err, customRequests)

		for sel, want := range map[string]map[string]int64{
			"code>300": {"a/p2": 2000},
			"code<300": {"a/p1": 1000, "a/only-a": 3000},
		} {
			msel := mustSelector(t, sel)
			list, err := bySelector(t, cp, ctx, "a", "app=web", customRequests, msel)
			mv, nerr := byName(cp, ctx, "a", "p2", customRequests, msel)
			switch h.GtLt {
			case GtLtReject:
				wantBadRequest(t, "by selector, metric selector "+sel, list != nil, err)
				wantBadRequest(t, "by name, metric selector "+sel, mv != nil, nerr)
			case GtLtFilter:
				wantList(t, "metric selector "+sel, list, err, want)
				if sel == "code>300" {
					wantValue(t, "a/p2 "+sel, mv, nerr, "a", "p2", 2)
				} else {
					wantNotFound(t, "a/p2 "+sel, mv != nil, nerr, customRequests)
				}
			}
		}
	})

	t.Run("stale", func(t *testing.T) {
		t.Parallel()
		cp := customProvider(t, h.build(t, false))
		mv, err := byName(cp, ctx, "a", "p1", customStale, every)
		wantStale(t, h, "a/p1, only an old value", mv != nil, err, customStale)
		list, err := bySelector(t, cp, ctx, "a", "app=web", customStale, every)
		wantStale(t, h, "pods app=web, only old values", list != nil, err, customStale)
		mv, err = byName(cp, ctx, "a", "p2", customMixed, every)
		wantStale(t, h, "a/p2, old value", mv != nil, err, customMixed)
		list, err = bySelector(t, cp, ctx, "a", "app=web", customMixed, every)
		wantList(t, "pods app=web, one fresh one old", list, err, map[string]int64{"a/p1": 1000})
	})

	t.Run("done context", func(t *testing.T) {
		t.Parallel()
		for _, hang := range []bool{false, true} {
			t.Run(map[bool]string{false: "backend answers", true: "backend hangs"}[hang], func(t *testing.T) {
				t.Parallel()
				e := h.build(t, false)
				cp := customProvider(t, e)
				if hang {
					e.hang(t)
				}
				for name, mk := range doneContexts() {
					if name == "times out" && !hang {
						continue // a healthy backend may answer within the timeout
					}
					func() {
						ctx, cancel := mk()
						defer cancel()
						var mv *custom_metrics.MetricValue
						var err error
						took := timed(func() { mv, err = byName(cp, ctx, "a", "p1", customRequests, every) })
						wantFailedPromptly(t, "by name, "+name, mv != nil, err, took)
					}()
					func() {
						ctx, cancel := mk()
						defer cancel()
						var list *custom_metrics.MetricValueList
						var err error
						took := timed(func() { list, err = bySelector(t, cp, ctx, "a", "app=web", customRequests, every) })
						wantFailedPromptly(t, "by selector, "+name, list != nil, err, took)
					}()
				}
			})
		}
	})

	t.Run("discovery", func(t *testing.T) {
		t.Parallel()
		e := h.build(t, false)
		cp := customProvider(t, e)
		if e.b.Hang != nil {
			e.hang(t)
		}
		var list []providers.CustomMetricInfo
		if took := timed(func() { list = cp.ListAllMetrics() }); took > 100*time.Millisecond {
			t.Errorf("ListAllMetrics took %s, want under 100ms", took)
		}
		found := false
		for _, m := range list {
			if m.GroupResource == podsGR && m.Metric == customRequests {
				found = true
				if !m.Namespaced {
					t.Errorf("%s of pods listed as not namespaced", m.Metric)
				}
			}
		}
		if !found {
			t.Errorf("ListAllMetrics does not list %s of pods: %v", customRequests, list)
		}
	})
}
