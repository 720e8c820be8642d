package providertest

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/metrics/pkg/apis/external_metrics"

	"github.com/metricscale/metricscale/providers"
)

func externalProvider(t *testing.T, e *env) providers.ExternalProvider {
	t.Helper()
	ep, ok := e.b.Provider.(providers.ExternalProvider)
	if !ok {
		t.Fatalf("provider %T serves no external metrics", e.b.Provider)
	}
	return ep
}

func external(ep providers.ExternalProvider, ctx context.Context, ns, metric string, msel labels.Selector) (*external_metrics.ExternalMetricValueList, error) {
	return ep.GetExternalMetric(ctx, ns, msel, providers.ExternalMetricInfo{Metric: metric})
}

// wantSeries checks the items are the series want (queue label to
// milli-value), unsummed, each with its labels.
func wantSeries(t *testing.T, what string, list *external_metrics.ExternalMetricValueList, err error, metric string, want map[string]int64) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	if list == nil {
		t.Errorf("%s: no list and no error", what)
		return
	}
	got := map[string]int64{}
	for _, it := range list.Items {
		q := it.MetricLabels["queue"]
		if _, dup := got[q]; dup {
			t.Errorf("%s: series queue=%q listed twice", what, q)
		}
		got[q] = it.Value.MilliValue()
		if it.MetricName != metric {
			t.Errorf("%s: item named %q, want %q", what, it.MetricName, metric)
		}
		if it.Value.MilliValue() == staleValue*1000 {
			t.Errorf("%s: served the stale value of series %v", what, it.MetricLabels)
		}
	}
	if g, w := describe(got), describe(want); g != w {
		t.Errorf("%s: got %s, want %s (queue=milli-value)", what, g, w)
	}
}

func runExternal(t *testing.T, h *Harness) {
	ctx := context.Background()
	every := labels.Everything()

	t.Run("values", func(t *testing.T) {
		t.Parallel()
		ep := externalProvider(t, h.build(t, false))
		list, err := external(ep, ctx, "a", externalQueue, every)
		wantSeries(t, "namespace a", list, err, externalQueue, map[string]int64{"q1": 1000, "q2": 2000})
	})

	t.Run("unknown metric is 404", func(t *testing.T) {
		t.Parallel()
		ep := externalProvider(t, h.build(t, false))
		list, err := external(ep, ctx, "a", unknownExt, every)
		wantNotFound(t, "unknown metric", list != nil, err, unknownExt)
	})

	t.Run("namespace isolation", func(t *testing.T) {
		t.Parallel()
		ep := externalProvider(t, h.build(t, false))
		list, err := external(ep, ctx, "b", externalQueue, every)
		wantSeries(t, "namespace b", list, err, externalQueue, map[string]int64{"q1": 5000})
		list, err = external(ep, ctx, "c", externalQueue, every)
		wantNotFound(t, "namespace c, no series", list != nil, err, externalQueue)
		list, err = external(ep, ctx, "b", externalQueue, mustSelector(t, "queue=q2"))
		wantNotFound(t, "namespace b, queue=q2 (only in a)", list != nil, err, externalQueue)
	})

	t.Run("metric selector", func(t *testing.T) {
		t.Parallel()
		ep := externalProvider(t, h.build(t, false))
		for sel, want := range map[string]map[string]int64{
			"queue=q1":             {"q1": 1000},
			"queue==q1":            {"q1": 1000},
			"queue!=q1":            {"q2": 2000},
			"queue in (q1,q2)":     {"q1": 1000, "q2": 2000},
			"queue notin (q1)":     {"q2": 2000},
			"shard":                {"q1": 1000, "q2": 2000},
			"queue=q1,shard=1":     {"q1": 1000},
			"queue in (q2,absent)": {"q2": 2000},
		} {
			list, err := external(ep, ctx, "a", externalQueue, mustSelector(t, sel))
			wantSeries(t, "selector "+sel, list, err, externalQueue, want)
		}
		for _, sel := range []string{"queue=nope", "!shard", "queue=q1,shard=2"} {
			list, err := external(ep, ctx, "a", externalQueue, mustSelector(t, sel))
			wantNotFound(t, "selector "+sel, list != nil, err, externalQueue)
		}
		for sel, want := range map[string]map[string]int64{
			"shard>1": {"q2": 2000},
			"shard<2": {"q1": 1000},
		} {
			list, err := external(ep, ctx, "a", externalQueue, mustSelector(t, sel))
			switch h.GtLt {
			case GtLtReject:
				wantBadRequest(t, "selector "+sel, list != nil, err)
			case GtLtFilter:
				wantSeries(t, "selector "+sel, list, err, externalQueue, want)
			}
		}
	})

	t.Run("stale", func(t *testing.T) {
		t.Parallel()
		ep := externalProvider(t, h.build(t, false))
		list, err := external(ep, ctx, "a", externalStale, every)
		wantStale(t, h, "only an old series", list != nil, err, externalStale)
		// one fresh series and one old: the old value is never served; a
		// provider may refuse the whole answer (the HPA would sum the rest)
		list, err = external(ep, ctx, "a", externalMixed, every)
		if err != nil {
			wantStale(t, h, "one fresh series, one old", list != nil, err, externalMixed)
		} else {
			wantSeries(t, "one fresh series, one old", list, err, externalMixed, map[string]int64{"q1": 1000})
		}
		list, err = external(ep, ctx, "a", externalMixed, mustSelector(t, "queue=q1"))
		wantSeries(t, "the fresh series alone", list, err, externalMixed, map[string]int64{"q1": 1000})
	})

	t.Run("done context", func(t *testing.T) {
		t.Parallel()
		for _, hang := range []bool{false, true} {
			t.Run(map[bool]string{false: "backend answers", true: "backend hangs"}[hang], func(t *testing.T) {
				t.Parallel()
				e := h.build(t, false)
				ep := externalProvider(t, e)
				if hang {
					e.hang(t)
				}
				for name, mk := range doneContexts() {
					if name == "times out" && !hang {
						continue
					}
					func() {
						ctx, cancel := mk()
						defer cancel()
						var list *external_metrics.ExternalMetricValueList
						var err error
						took := timed(func() { list, err = external(ep, ctx, "a", externalQueue, every) })
						wantFailedPromptly(t, name, list != nil, err, took)
					}()
				}
			})
		}
	})

	t.Run("discovery", func(t *testing.T) {
		t.Parallel()
		e := h.build(t, false)
		ep := externalProvider(t, e)
		if e.b.Hang != nil {
			e.hang(t)
		}
		var list []providers.ExternalMetricInfo
		if took := timed(func() { list = ep.ListAllExternalMetrics() }); took > 100*time.Millisecond {
			t.Errorf("ListAllExternalMetrics took %s, want under 100ms", took)
		}
		found := false
		for _, m := range list {
			found = found || m.Metric == externalQueue
		}
		if !found {
			t.Errorf("ListAllExternalMetrics does not list %s: %v", externalQueue, list)
		}
	})
}
