package ondemand

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/changefeed"
)

// The change feed of a polled backend. A backend read on demand does not
// know when a value changes, so while the change feed has subscribers the
// provider reads, in the background, every metric they read, once per
// interval, and publishes the series whose value changed: an autoscaler on
// a queue then reacts within about an interval instead of at its sync
// period. "The metrics they read" are those queried while the feed has a
// subscriber, for a lease renewed by each query (an autoscaler queries
// its metrics at least once per sync period): a metric nobody queries for
// a lease is no longer read, and none is read while the feed has no
// subscriber.
//
// The background read is the queries' read: it goes through the same
// Loader (one backend call per metric at a time, shared by queries that
// arrive meanwhile, and serving the queries of the cache TTL after it), and
// it reuses a reading a query made in the last half interval. The backend
// sees one read per interval per polled metric whatever the number of
// subscribers and queries (with a cacheTTL of at least the interval).
//
// A failed read publishes nothing (the next good one is compared with the
// last good one) and is counted; at most MaxPolled metrics of a provider
// are polled, a metric beyond it is served as before (read on query) and
// counted.
//
// With a sink that takes coverage (providers.CoverageSink, the adapter's
// hub), a polled metric is covered from the query that starts its poll
// until a read of it fails (again from the next good one) or its poll
// ends: its readers may then reuse what they read instead of reading at
// every sync.

// Defaults of Feed.
const (
	DefaultFeedPollInterval = time.Second
	DefaultFeedMaxPolled    = 1000
	// DefaultFeedLease is how long a query keeps its metric polled: longer
	// than the sync periods autoscalers use (15s by default), short enough
	// that a metric no autoscaler reads any more stops being polled soon.
	DefaultFeedLease = 2 * time.Minute
	// feedParallel bounds the reads of one poll in flight at a time.
	feedParallel = 16
	// maxChangedSeries: more changed series of one metric in one poll are
	// published as one "every series" change.
	maxChangedSeries = 64
)

// Feed says how a provider polls the metrics the change feed's subscribers
// read.
type Feed struct {
	// Interval between two reads of a polled metric; 0:
	// DefaultFeedPollInterval; negative: no polling.
	Interval time.Duration
	// MaxPolled bounds the metrics polled at once; 0: DefaultFeedMaxPolled.
	MaxPolled int
	// Lease is how long a query keeps its metric polled; 0:
	// DefaultFeedLease.
	Lease time.Duration
}

func (f Feed) withDefaults() Feed {
	if f.Interval == 0 {
		f.Interval = DefaultFeedPollInterval
	}
	if f.MaxPolled <= 0 {
		f.MaxPolled = DefaultFeedMaxPolled
	}
	if f.Lease <= 0 {
		f.Lease = DefaultFeedLease
	}
	return f
}

var (
	feedPolledMetrics = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "metricscale", Subsystem: "adapter", Name: "feed_polled_metrics",
		Help:           "Metrics a provider read on demand polls for the change feed's subscribers, by provider.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"provider"})
	feedPollCapReached = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "metricscale", Subsystem: "adapter", Name: "feed_poll_cap_reached_total",
		Help:           "Queries of a metric a provider did not start polling for the change feed because it polled feedMaxPolledMetrics already, by provider: that metric's autoscalers react at their sync period.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"provider"})
	feedPollReads = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "metricscale", Subsystem: "adapter", Name: "feed_poll_reads_total",
		Help:           "Reads of polled metrics for the change feed, by provider and result (ok, error); a read a query made within the interval serves the poll and counts as ok.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"provider", "result"})
	feedPollChanges = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "metricscale", Subsystem: "adapter", Name: "feed_poll_changes_total",
		Help:           "Changes of polled metrics published on the change feed, by provider.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"provider"})
)

func init() {
	legacyregistry.MustRegister(feedPolledMetrics, feedPollCapReached, feedPollReads, feedPollChanges)
}

// feed is a provider's polling state; nil when it does not poll.
type feed struct {
	provider string
	sink     providers.ChangeSink
	audience providers.ChangeAudience // nil: assume someone listens
	coverage providers.CoverageSink   // nil: nothing is covered
	cfg      Feed
	clock    clock.PassiveClock

	mu     sync.Mutex
	polled map[string]*polledMetric // by metric name
	full   bool                     // the cap was reached (logged once until below it)
	ended  bool                     // the poll stopped for good (EndFeed)
}

// polledMetric is one polled metric.
type polledMetric struct {
	queried time.Time                // the last query: the lease runs from it
	series  map[string]*polledSeries // labels key -> the series in the last good reading
	gen     uint64                   // readings observed
	keys    seriesKeys
	maxAge  time.Duration // how long a reading of it answers queries
	covered bool          // told the coverage sink
}

// polledSeries is one series of the last good reading, updated in place:
// a reading that changes one series of a thousand allocates for that one.
type polledSeries struct {
	value  float64
	labels map[string]string
	gen    uint64 // the reading that last held it
}

func newFeed(provider string, sink providers.ChangeSink, cfg Feed, clk clock.PassiveClock) *feed {
	cfg = cfg.withDefaults()
	if sink == nil || cfg.Interval < 0 {
		return nil
	}
	f := &feed{provider: provider, sink: sink, cfg: cfg, clock: clk, polled: map[string]*polledMetric{}}
	f.audience, _ = sink.(providers.ChangeAudience)
	f.coverage, _ = sink.(providers.CoverageSink)
	return f
}

// cover tells the coverage sink that pm is covered (again); the caller
// holds f.mu, which orders the coverage's changes.
func (f *feed) cover(name string, pm *polledMetric) {
	if f.coverage == nil || pm.covered {
		return
	}
	pm.covered = true
	// A change is published within about an interval and a half (a poll
	// may reuse a reading half an interval old); a replica serves a
	// reading at most its cache TTL old.
	f.coverage.Cover(f, changefeed.KindExternal, name, f.cfg.Lease, max(pm.maxAge, f.cfg.Interval)+f.cfg.Interval/2)
}

// uncover tells the coverage sink that pm is no longer covered; the caller
// holds f.mu.
func (f *feed) uncover(name string, pm *polledMetric) {
	if f.coverage == nil || !pm.covered {
		return
	}
	pm.covered = false
	f.coverage.Uncover(f, changefeed.KindExternal, name)
}

// failed ends m's coverage after a failed read: a change may go unseen
// until a read succeeds.
func (f *feed) failed(m *Metric) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if pm := f.polled[m.Name]; pm != nil {
		f.uncover(m.Name, pm)
	}
}

// listened reports whether the feed has a subscriber.
func (f *feed) listened() bool { return f.audience == nil || f.audience.Subscribers() > 0 }

// queried renews m's lease after a query answered from r, starting one
// (with r as the reading its subscribers saw) if the cap allows.
func (f *feed) queried(m *Metric, r reading, ttl time.Duration) {
	if f == nil || !f.listened() {
		return
	}
	now := f.clock.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ended {
		return
	}
	if pm := f.polled[m.Name]; pm != nil {
		pm.queried = now
		return
	}
	if len(f.polled) >= f.cfg.MaxPolled {
		feedPollCapReached.WithLabelValues(f.provider).Inc()
		if !f.full {
			f.full = true
			klog.InfoS("Change feed: polling as many metrics as allowed; metrics queried beyond it are read on query only, and their autoscalers react at their sync period",
				"provider", f.provider, "feedMaxPolledMetrics", f.cfg.MaxPolled, "metric", m.Name)
		}
		return
	}
	pm := &polledMetric{queried: now, series: map[string]*polledSeries{}, maxAge: ttl}
	pm.update(m, r.series)
	f.polled[m.Name] = pm
	f.cover(m.Name, pm)
	feedPolledMetrics.WithLabelValues(f.provider).Set(float64(len(f.polled)))
}

// observe compares a good reading of m with the last one and publishes the
// series that changed, appeared or went away; m unpolled: nothing.
func (f *feed) observe(m *Metric, series []Series) {
	if f == nil {
		return
	}
	f.mu.Lock()
	pm := f.polled[m.Name]
	if pm == nil {
		f.mu.Unlock()
		return
	}
	changed := pm.update(m, series)
	// Published before the coverage: a reader trusts only what it reads
	// after hearing both.
	f.publish(m, changed)
	f.cover(m.Name, pm)
	f.mu.Unlock()
}

// publish publishes the changed series of m.
func (f *feed) publish(m *Metric, changed []map[string]string) {
	if len(changed) == 0 {
		return
	}
	feedPollChanges.WithLabelValues(f.provider).Add(float64(len(changed)))
	if len(changed) > maxChangedSeries {
		f.sink.Publish(providers.Change{Kind: changefeed.KindExternal, Metric: m.Name, All: true})
		return
	}
	for _, l := range changed {
		f.sink.Publish(providers.Change{Kind: changefeed.KindExternal, Metric: m.Name, Namespace: l[NamespaceLabel], Labels: l})
	}
}

// same compares two readings of a series (NaN equals NaN: both fail).
func same(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }

// update puts a good reading of m into pm and returns the served labels of
// the series that changed, appeared or went away.
func (pm *polledMetric) update(m *Metric, series []Series) []map[string]string {
	pm.gen++
	var changed []map[string]string
	for i := range series {
		s := &series[i]
		key := pm.keys.of(m, s)
		ps, ok := pm.series[string(key)] // no allocation for a lookup
		switch {
		case !ok:
			ps = &polledSeries{value: s.Value, labels: m.seriesLabels(*s)}
			pm.series[string(key)] = ps
			changed = append(changed, ps.labels)
		case !same(ps.value, s.Value):
			ps.value = s.Value
			changed = append(changed, ps.labels)
		}
		ps.gen = pm.gen
	}
	for k, ps := range pm.series {
		if ps.gen != pm.gen {
			changed = append(changed, ps.labels)
			delete(pm.series, k)
		}
	}
	return changed
}

// seriesKeys makes the labels key (providers.LabelsKey) of a series'
// served labels without making them, in buffers reused from one series to
// the next.
type seriesKeys struct {
	names []string
	buf   []byte
}

func (sk *seriesKeys) of(m *Metric, s *Series) []byte {
	view := seriesView{m: m, s: s}
	sk.names = view.names(sk.names[:0])
	slices.Sort(sk.names)
	sk.buf = sk.buf[:0]
	for _, k := range sk.names {
		v, _ := view.Lookup(k)
		sk.buf = append(sk.buf, k...)
		sk.buf = append(sk.buf, 0xff)
		sk.buf = append(sk.buf, v...)
		sk.buf = append(sk.buf, 0xfe)
	}
	return sk.buf
}

// due returns the metrics to read now, dropping those whose lease ended,
// or every one when the feed has no subscriber.
func (f *feed) due() []string {
	now := f.clock.Now()
	listened := f.listened()
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for name, pm := range f.polled {
		if !listened || now.Sub(pm.queried) > f.cfg.Lease {
			f.uncover(name, pm)
			delete(f.polled, name)
			continue
		}
		out = append(out, name)
	}
	if len(f.polled) < f.cfg.MaxPolled {
		f.full = false
	}
	feedPolledMetrics.WithLabelValues(f.provider).Set(float64(len(f.polled)))
	return out
}

// Polled is the number of metrics the provider polls for the change feed.
func (p *Provider) Polled() int {
	if p.feed == nil {
		return 0
	}
	p.feed.mu.Lock()
	defer p.feed.mu.Unlock()
	return len(p.feed.polled)
}

// Poll reads every polled metric once (a reading younger than half the
// interval serves), publishing what changed, and returns when done. Run
// calls it every interval; tests call it directly.
func (p *Provider) Poll(ctx context.Context) {
	f := p.feed
	if f == nil {
		return
	}
	names := f.due()
	if len(names) == 0 {
		return
	}
	ctx = WithMaxAge(ctx, f.cfg.Interval/2)
	sem := make(chan struct{}, feedParallel)
	var wg sync.WaitGroup
	for _, name := range names {
		m := p.metrics[name]
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			rctx, cancel := context.WithTimeout(ctx, max(f.cfg.Interval, time.Second))
			defer cancel()
			// observe runs in the load itself, for queries' loads too.
			if _, err := p.read(rctx, m); err != nil {
				feedPollReads.WithLabelValues(p.name, "error").Inc()
				klog.V(4).InfoS("Change feed poll failed", "provider", p.name, "metric", name, "err", err)
				return
			}
			feedPollReads.WithLabelValues(p.name, "ok").Inc()
		})
	}
	wg.Wait()
}

// Watched returns the metrics the change feed's subscribers read now,
// dropping those whose lease ended (all of them while the feed has no
// subscriber): for a provider that learns of their changes its own way
// (a provider's own change notifications, such as keyspace events) and runs that instead of
// Run. Nil when the provider has no feed.
func (p *Provider) Watched() []string {
	if p.feed == nil {
		return nil
	}
	return p.feed.due()
}

// Refresh reads the named metrics now with their Read, not through the
// cache (a load in progress is not joined: it may have begun before the
// change the caller knows of). A good reading replaces the cached one, so
// that the queries a published change triggers see it, and its changes
// are published as a poll's are. Unknown or unwatched names are read and
// cached but publish nothing.
func (p *Provider) Refresh(ctx context.Context, names []string) {
	sem := make(chan struct{}, feedParallel)
	var wg sync.WaitGroup
	for _, name := range names {
		m := p.metrics[name]
		if m == nil {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			p.calls.Add(1)
			s, err := m.Read(ctx)
			p.record(err)
			if err != nil {
				if p.feed != nil {
					feedPollReads.WithLabelValues(p.name, "error").Inc()
					p.feed.failed(m)
				}
				klog.V(4).InfoS("Change feed refresh failed", "provider", p.name, "metric", name, "err", err)
				return
			}
			p.readings.Put(name, newReading(s, p.clock.Now()), p.ttlOf(m))
			if p.feed != nil {
				feedPollReads.WithLabelValues(p.name, "ok").Inc()
				p.feed.observe(m, s)
			}
		})
	}
	wg.Wait()
}

// Run implements providers.Runner: it polls every interval while the
// provider has a feed, then ends the feed (EndFeed).
func (p *Provider) Run(ctx context.Context) {
	f := p.feed
	if f == nil {
		return
	}
	defer feedPolledMetrics.DeleteLabelValues(p.name)
	defer p.EndFeed()
	every(ctx, p.clock, f.cfg.Interval, p.Poll)
}

// EndFeed stops polling for good (the provider is retired or the adapter
// stops): what it covered is uncovered, since nothing announces its
// changes any more, and no query starts a poll again. A provider that runs
// its own feed instead of Run calls it when that ends.
func (p *Provider) EndFeed() {
	f := p.feed
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ended = true
	for name, pm := range f.polled {
		f.uncover(name, pm)
		delete(f.polled, name)
	}
}

// every calls fn every interval of clk (a fake clock's ticker in tests)
// until ctx is done.
func every(ctx context.Context, clk clock.PassiveClock, interval time.Duration, fn func(context.Context)) {
	var tick <-chan time.Time
	if c, ok := clk.(clock.WithTicker); ok {
		t := c.NewTicker(interval)
		defer t.Stop()
		tick = t.C()
	} else {
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			fn(ctx)
		}
	}
}
