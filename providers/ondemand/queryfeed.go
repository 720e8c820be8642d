package ondemand

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
	"k8s.io/metrics/pkg/apis/external_metrics"
	"k8s.io/utils/clock"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/changefeed"
)

// QueryFeed is the change feed of a provider whose External metrics are
// answered per query (a Prometheus query, another adapter's API) rather
// than from a fixed set of readings: it polls the queries themselves. While
// the change feed has subscribers, an External query that succeeded is
// kept, for a lease renewed by each such query, and asked again every
// interval through the provider's own read; the series whose value
// changed, appeared or went away are published. It is bounded as Feed is
// (MaxPolled queries per provider, the same metrics), and a poll reads
// under WithMaxAge(interval/2), so that a provider's result cache serves a
// query's recent answer but does not hide a change for its whole TTL.
type QueryFeed struct {
	provider string
	sink     providers.ChangeSink
	audience providers.ChangeAudience // nil: assume someone listens
	cfg      Feed
	clock    clock.PassiveClock
	read     ExternalRead

	mu     sync.Mutex
	polled map[queryKey]*polledQuery
	full   bool
}

// ExternalRead answers an External query; the provider's GetExternalMetric.
type ExternalRead func(ctx context.Context, namespace string, sel labels.Selector, info providers.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error)

// queryKey names a polled query: what a subscriber's autoscaler asks.
type queryKey struct {
	metric, namespace, selector string
}

type polledQuery struct {
	sel     labels.Selector
	queried time.Time
	last    map[string]resource.Quantity // series (labels key) -> value of the last good answer
	labels  map[string]map[string]string
}

// pollKey marks the context of a poll's own read, which must not renew the
// lease it runs under.
type pollKey struct{}

// NewQueryFeed returns the feed of provider, reading with read; nil (no
// polling) when sink is nil or cfg turns polling off.
func NewQueryFeed(provider string, sink providers.ChangeSink, cfg Feed, clk clock.PassiveClock, read ExternalRead) *QueryFeed {
	cfg = cfg.withDefaults()
	if sink == nil || cfg.Interval < 0 {
		return nil
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	f := &QueryFeed{provider: provider, sink: sink, cfg: cfg, clock: clk, read: read, polled: map[queryKey]*polledQuery{}}
	f.audience, _ = sink.(providers.ChangeAudience)
	return f
}

func (f *QueryFeed) listened() bool { return f.audience == nil || f.audience.Subscribers() > 0 }

func keyOf(namespace string, sel labels.Selector, metric string) queryKey {
	k := queryKey{metric: metric, namespace: namespace}
	if sel != nil {
		k.selector = sel.String()
	}
	return k
}

// Queried records a query answered with list: it renews the query's lease,
// or starts polling it (list being what its subscribers saw) if the cap
// allows. A nil feed, a poll's own read and a failed query (nil list) do
// nothing.
func (f *QueryFeed) Queried(ctx context.Context, namespace string, sel labels.Selector, metric string, list *external_metrics.ExternalMetricValueList) {
	if f == nil || list == nil || ctx.Value(pollKey{}) != nil || !f.listened() {
		return
	}
	k := keyOf(namespace, sel, metric)
	now := f.clock.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if pq := f.polled[k]; pq != nil {
		pq.queried = now
		return
	}
	if len(f.polled) >= f.cfg.MaxPolled {
		feedPollCapReached.WithLabelValues(f.provider).Inc()
		if !f.full {
			f.full = true
			klog.InfoS("Change feed: polling as many queries as allowed; queries beyond it are answered on query only, and their autoscalers react at their sync period",
				"provider", f.provider, "feedMaxPolledMetrics", f.cfg.MaxPolled, "metric", metric)
		}
		return
	}
	if sel == nil {
		sel = labels.Everything()
	}
	pq := &polledQuery{sel: sel, queried: now}
	pq.last, pq.labels = itemSnapshot(list.Items)
	f.polled[k] = pq
	feedPolledMetrics.WithLabelValues(f.provider).Set(float64(len(f.polled)))
}

func itemSnapshot(items []external_metrics.ExternalMetricValue) (map[string]resource.Quantity, map[string]map[string]string) {
	values := make(map[string]resource.Quantity, len(items))
	lbls := make(map[string]map[string]string, len(items))
	for _, it := range items {
		k := providers.LabelsKey(it.MetricLabels)
		values[k], lbls[k] = it.Value, it.MetricLabels
	}
	return values, lbls
}

// due returns the queries to read now, dropping those whose lease ended,
// or every one when the feed has no subscriber.
func (f *QueryFeed) due() map[queryKey]labels.Selector {
	now := f.clock.Now()
	listened := f.listened()
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[queryKey]labels.Selector, len(f.polled))
	for k, pq := range f.polled {
		if !listened || now.Sub(pq.queried) > f.cfg.Lease {
			delete(f.polled, k)
			continue
		}
		out[k] = pq.sel
	}
	if len(f.polled) < f.cfg.MaxPolled {
		f.full = false
	}
	feedPolledMetrics.WithLabelValues(f.provider).Set(float64(len(f.polled)))
	return out
}

// Polled is the number of queries the feed polls.
func (f *QueryFeed) Polled() int {
	if f == nil {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.polled)
}

// Poll asks every polled query once and publishes what changed; Run calls
// it every interval, tests directly.
func (f *QueryFeed) Poll(ctx context.Context) {
	if f == nil {
		return
	}
	due := f.due()
	if len(due) == 0 {
		return
	}
	ctx = context.WithValue(WithMaxAge(ctx, f.cfg.Interval/2), pollKey{}, true)
	sem := make(chan struct{}, feedParallel)
	var wg sync.WaitGroup
	for k, sel := range due {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			rctx, cancel := context.WithTimeout(ctx, max(f.cfg.Interval, time.Second))
			defer cancel()
			list, err := f.read(rctx, k.namespace, sel, providers.ExternalMetricInfo{Metric: k.metric})
			if err != nil {
				feedPollReads.WithLabelValues(f.provider, "error").Inc()
				klog.V(4).InfoS("Change feed poll failed", "provider", f.provider, "metric", k.metric, "namespace", k.namespace, "selector", k.selector, "err", err)
				return
			}
			feedPollReads.WithLabelValues(f.provider, "ok").Inc()
			f.observe(k, list.Items)
		})
	}
	wg.Wait()
}

// observe compares a good answer of k with the last and publishes the
// series that changed. A series whose labels do not show the query's
// selector is published as "every series of the metric in the namespace",
// since a subscriber matches changes on those labels.
func (f *QueryFeed) observe(k queryKey, items []external_metrics.ExternalMetricValue) {
	f.mu.Lock()
	pq := f.polled[k]
	if pq == nil {
		f.mu.Unlock()
		return
	}
	cur, lbls := itemSnapshot(items)
	var changed []map[string]string
	for key, v := range cur {
		if old, ok := pq.last[key]; !ok || old.Cmp(v) != 0 {
			changed = append(changed, lbls[key])
		}
	}
	for key := range pq.last {
		if _, ok := cur[key]; !ok {
			changed = append(changed, pq.labels[key])
		}
	}
	pq.last, pq.labels = cur, lbls
	sel := pq.sel
	f.mu.Unlock()
	if len(changed) == 0 {
		return
	}
	feedPollChanges.WithLabelValues(f.provider).Add(float64(len(changed)))
	all := len(changed) > maxChangedSeries
	for _, l := range changed {
		if !sel.Matches(labels.Set(l)) {
			all = true
		}
	}
	if all {
		f.sink.Publish(providers.Change{Kind: changefeed.KindExternal, Metric: k.metric, Namespace: k.namespace, All: true})
		return
	}
	for _, l := range changed {
		f.sink.Publish(providers.Change{Kind: changefeed.KindExternal, Metric: k.metric, Namespace: k.namespace, Labels: l})
	}
}

// Run polls every interval until ctx is done.
func (f *QueryFeed) Run(ctx context.Context) {
	if f == nil {
		return
	}
	defer feedPolledMetrics.DeleteLabelValues(f.provider)
	every(ctx, f.clock, f.cfg.Interval, f.Poll)
}
