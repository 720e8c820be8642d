package ondemand

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/metricscale/metricscale/providers"
)

// hub is a fake change hub: it records what is published and says how
// many subscribers it has.
type hub struct {
	mu          sync.Mutex
	subscribers int
	got         []providers.Change
}

func (h *hub) Publish(c providers.Change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.got = append(h.got, c)
}

func (h *hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.subscribers
}

func (h *hub) setSubscribers(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.subscribers = n
}

// take returns the changes published since the last take, as
// "metric{labels}" sorted.
func (h *hub) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, c := range h.got {
		if c.All {
			out = append(out, c.Metric+"{*}")
			continue
		}
		out = append(out, fmt.Sprintf("%s{%s} ns=%q kind=%s", c.Metric, labels.Set(c.Labels), c.Namespace, c.Kind))
	}
	h.got = nil
	sort.Strings(out)
	return out
}

// backend is a counting fake backend: one queue depth per metric, and the
// reads each metric cost.
type backend struct {
	mu    sync.Mutex
	depth map[string]float64
	fail  map[string]bool
	reads map[string]int
}

func newBackend() *backend {
	return &backend{depth: map[string]float64{}, fail: map[string]bool{}, reads: map[string]int{}}
}

func (b *backend) set(metric string, v float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.depth[metric] = v
}

func (b *backend) failing(metric string, on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fail[metric] = on
}

func (b *backend) readsOf(metric string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reads[metric]
}

func (b *backend) metric(name string) Metric {
	return Metric{Name: name, Read: func(context.Context) ([]Series, error) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.reads[name]++
		if b.fail[name] {
			return nil, errors.New("broker down")
		}
		return []Series{{Labels: map[string]string{"queue": name, NamespaceLabel: "shop"}, Value: b.depth[name]}}, nil
	}}
}

var feedT0 = time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC)

func feedProvider(t *testing.T, b *backend, h *hub, ttl time.Duration, feed Feed, names ...string) (*Provider, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(feedT0)
	var ms []Metric
	for _, n := range names {
		ms = append(ms, b.metric(n))
	}
	// One provider name per test: the feed's metrics are labelled by it.
	p, err := New(t.Name(), ms, Options{Clock: clk, CacheTTL: ttl, Changes: h, Feed: feed})
	if err != nil {
		t.Fatal(err)
	}
	return p, clk
}

// query is an autoscaler's read of a metric.
func query(t *testing.T, p *Provider, metric string) {
	t.Helper()
	if _, err := p.GetExternalMetric(context.Background(), "shop", labels.Everything(), info(metric)); err != nil {
		t.Fatalf("query %s: %v", metric, err)
	}
}

func TestFeedOneReadPerIntervalWhateverTheReaders(t *testing.T) {
	t.Parallel()
	for _, subscribers := range []int{1, 50} {
		t.Run(fmt.Sprintf("%d subscribers", subscribers), func(t *testing.T) {
			t.Parallel()
			b, h := newBackend(), &hub{subscribers: subscribers}
			p, clk := feedProvider(t, b, h, 2*time.Second, Feed{}, "orders")
			query(t, p, "orders") // the first read; the metric is polled from now on
			if got := b.readsOf("orders"); got != 1 {
				t.Fatalf("%d reads after the first query, want 1", got)
			}
			const ticks = 10
			for range ticks {
				clk.Step(DefaultFeedPollInterval)
				// every subscriber reads the metric in the interval, some
				// several times: all served by the poll's reading
				for range subscribers {
					query(t, p, "orders")
				}
				p.Poll(context.Background())
				for range subscribers {
					query(t, p, "orders")
				}
			}
			if got, want := b.readsOf("orders"), 1+ticks; got != want {
				t.Errorf("%d backend reads over %d intervals with %d subscribers, want %d (one per interval)", got, ticks, subscribers, want)
			}
		})
	}
}

func TestFeedPublishesChanges(t *testing.T) {
	t.Parallel()
	b, h := newBackend(), &hub{subscribers: 1}
	b.set("orders", 3)
	p, clk := feedProvider(t, b, h, 2*time.Second, Feed{}, "orders", "mail")
	query(t, p, "orders")
	clk.Step(time.Second)
	p.Poll(context.Background())
	if got := h.take(); len(got) != 0 {
		t.Errorf("published %v while nothing changed", got)
	}
	b.set("orders", 40)
	b.set("mail", 7) // not polled: nobody queried it
	clk.Step(time.Second)
	p.Poll(context.Background())
	want := []string{`orders{namespace=shop,queue=orders} ns="shop" kind=external`}
	if got := h.take(); !reflect.DeepEqual(got, want) {
		t.Errorf("after a change, published %v, want %v", got, want)
	}
	if got := b.readsOf("mail"); got != 0 {
		t.Errorf("the unqueried metric was read %d times", got)
	}
	// A query that reads the change itself (the cache expired) publishes
	// it too: the poll and the queries share one reading.
	b.set("orders", 41)
	clk.Step(3 * time.Second)
	query(t, p, "orders")
	if got := h.take(); !reflect.DeepEqual(got, []string{`orders{namespace=shop,queue=orders} ns="shop" kind=external`}) {
		t.Errorf("a change read by a query published %v", got)
	}
}

func TestFeedStopsWithoutSubscribers(t *testing.T) {
	t.Parallel()
	b, h := newBackend(), &hub{subscribers: 2}
	p, clk := feedProvider(t, b, h, 2*time.Second, Feed{}, "orders")
	query(t, p, "orders")
	clk.Step(time.Second)
	p.Poll(context.Background())
	if got := b.readsOf("orders"); got != 2 {
		t.Fatalf("%d reads, want 2 (the query's and one poll)", got)
	}
	h.setSubscribers(0) // the last autoscaler left
	for range 5 {
		clk.Step(time.Second)
		p.Poll(context.Background())
	}
	if got := b.readsOf("orders"); got != 2 {
		t.Errorf("%d reads after the last subscriber left, want still 2", got)
	}
	if n := p.Polled(); n != 0 {
		t.Errorf("%d metrics polled without subscribers", n)
	}
	// Queries without subscribers start no polling either.
	clk.Step(3 * time.Second)
	query(t, p, "orders")
	clk.Step(time.Second)
	p.Poll(context.Background())
	if got := b.readsOf("orders"); got != 3 {
		t.Errorf("%d reads, want 3: the query's only", got)
	}
}

func TestFeedLeaseEnds(t *testing.T) {
	t.Parallel()
	b, h := newBackend(), &hub{subscribers: 1}
	p, clk := feedProvider(t, b, h, 2*time.Second, Feed{Lease: 5 * time.Second}, "orders")
	query(t, p, "orders")
	for range 5 {
		clk.Step(time.Second)
		p.Poll(context.Background())
	}
	if got := b.readsOf("orders"); got != 6 {
		t.Fatalf("%d reads within the lease, want 6", got)
	}
	for range 5 {
		clk.Step(time.Second)
		p.Poll(context.Background())
	}
	if got := b.readsOf("orders"); got != 6 {
		t.Errorf("%d reads after the lease of the last query ended, want still 6", got)
	}
}

func TestFeedCap(t *testing.T) {
	t.Parallel()
	b, h := newBackend(), &hub{subscribers: 1}
	p, clk := feedProvider(t, b, h, 2*time.Second, Feed{MaxPolled: 2}, "a", "b", "c")
	before := counterValue(t, feedPollCapReached.WithLabelValues(t.Name()))
	for _, m := range []string{"a", "b", "c"} {
		query(t, p, m)
	}
	if n := p.Polled(); n != 2 {
		t.Fatalf("%d metrics polled, want the cap, 2", n)
	}
	if got := counterValue(t, feedPollCapReached.WithLabelValues(t.Name())) - before; got != 1 {
		t.Errorf("feed_poll_cap_reached_total rose by %v, want 1", got)
	}
	if got := gaugeValue(t, feedPolledMetrics.WithLabelValues(t.Name())); got != 2 {
		t.Errorf("feed_polled_metrics = %v, want 2", got)
	}
	for range 3 {
		clk.Step(time.Second)
		p.Poll(context.Background())
	}
	if got := []int{b.readsOf("a"), b.readsOf("b"), b.readsOf("c")}; !reflect.DeepEqual(got, []int{4, 4, 1}) {
		t.Errorf("reads of a, b, c = %v, want [4 4 1]: the third is read on query only", got)
	}
}

func TestFeedErrorsPublishNothing(t *testing.T) {
	t.Parallel()
	b, h := newBackend(), &hub{subscribers: 1}
	b.set("orders", 5)
	p, clk := feedProvider(t, b, h, 2*time.Second, Feed{}, "orders")
	query(t, p, "orders")
	errsBefore := counterValue(t, feedPollReads.WithLabelValues(t.Name(), "error"))
	b.failing("orders", true)
	for range 3 {
		clk.Step(time.Second)
		p.Poll(context.Background())
	}
	if got := h.take(); len(got) != 0 {
		t.Errorf("failed reads published %v", got)
	}
	if got := counterValue(t, feedPollReads.WithLabelValues(t.Name(), "error")) - errsBefore; got != 3 {
		t.Errorf("feed_poll_reads_total{result=error} rose by %v, want 3", got)
	}
	// Back with the value it had: no change (compared with the last good
	// reading, not with the failures).
	b.failing("orders", false)
	clk.Step(time.Second)
	p.Poll(context.Background())
	if got := h.take(); len(got) != 0 {
		t.Errorf("recovery to the same value published %v", got)
	}
	b.set("orders", 9)
	clk.Step(time.Second)
	p.Poll(context.Background())
	if got := h.take(); len(got) != 1 {
		t.Errorf("a change after the recovery published %v, want one change", got)
	}
}

func TestFeedDisabled(t *testing.T) {
	t.Parallel()
	b, h := newBackend(), &hub{subscribers: 1}
	p, clk := feedProvider(t, b, h, 2*time.Second, Feed{Interval: -1}, "orders")
	query(t, p, "orders")
	for range 3 {
		clk.Step(time.Second)
		p.Poll(context.Background())
	}
	if got := b.readsOf("orders"); got != 1 {
		t.Errorf("%d reads with polling off, want the query's only", got)
	}
	// Without a hub (the adapter's --change-feed=false) neither.
	noHub, err := New("queues", []Metric{b.metric("orders")}, Options{Clock: clk, CacheTTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	query(t, noHub, "orders")
	clk.Step(time.Second)
	noHub.Poll(context.Background())
	if got := b.readsOf("orders"); got != 2 {
		t.Errorf("%d reads without a hub, want 2 (two queries)", got)
	}
}

func TestLoaderMaxAge(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(feedT0)
	l := NewLoader[int](10*time.Second, 0, clk)
	loads := 0
	load := func(context.Context) (int, error) { loads++; return loads, nil }
	get := func(ctx context.Context) int {
		t.Helper()
		v, err := l.Get(ctx, "k", load)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	get(context.Background())
	clk.Step(400 * time.Millisecond)
	if v := get(WithMaxAge(context.Background(), 500*time.Millisecond)); v != 1 {
		t.Errorf("a reading 400ms old under a 500ms bound: got load %d, want the cached 1", v)
	}
	clk.Step(200 * time.Millisecond)
	if v := get(WithMaxAge(context.Background(), 500*time.Millisecond)); v != 2 {
		t.Errorf("a reading 600ms old under a 500ms bound: got load %d, want a new one, 2", v)
	}
	if v := get(context.Background()); v != 2 {
		t.Errorf("a query within the TTL got load %d, want the poll's, 2", v)
	}
}

func counterValue(t *testing.T, c metrics.CounterMetric) float64 {
	t.Helper()
	v, err := testutil.GetCounterMetricValue(c)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func gaugeValue(t *testing.T, g metrics.GaugeMetric) float64 {
	t.Helper()
	v, err := testutil.GetGaugeMetricValue(g)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestFeedRefresh: Refresh (the redis keyspace feed's read of a notified
// metric) reads at once though a reading is cached, publishes the change,
// and its reading serves the queries the change triggers; Watched drops a
// metric whose lease ended.
func TestFeedRefresh(t *testing.T) {
	t.Parallel()
	b, h := newBackend(), &hub{subscribers: 1}
	b.set("orders", 3)
	p, clk := feedProvider(t, b, h, 10*time.Second, Feed{}, "orders", "mail")
	query(t, p, "orders")
	if got := p.Watched(); !reflect.DeepEqual(got, []string{"orders"}) {
		t.Fatalf("watched %v, want [orders]", got)
	}
	b.set("orders", 40)
	p.Refresh(context.Background(), []string{"orders", "mail", "unknown"})
	want := []string{`orders{namespace=shop,queue=orders} ns="shop" kind=external`}
	if got := h.take(); !reflect.DeepEqual(got, want) {
		t.Errorf("after Refresh published %v, want %v (mail is not watched)", got, want)
	}
	reads := b.readsOf("orders")
	list, err := p.GetExternalMetric(context.Background(), "shop", labels.Everything(), info("orders"))
	if err != nil {
		t.Fatal(err)
	}
	if v := list.Items[0].Value.Value(); v != 40 {
		t.Errorf("a query after Refresh got %d, want the refreshed 40", v)
	}
	if got := b.readsOf("orders"); got != reads {
		t.Errorf("the query read the backend (%d reads, was %d): Refresh's reading should serve it", got, reads)
	}
	clk.Step(DefaultFeedLease + time.Second)
	if got := p.Watched(); len(got) != 0 {
		t.Errorf("watched %v after the lease ended, want none", got)
	}
}

// BenchmarkObserveOneChanged: a reading of a polled metric of 1,000 series
// in which one changed (a keyspace notification's read, as in the KEDA
// benchmark); it fails unless exactly that one is published.
func BenchmarkObserveOneChanged(b *testing.B) {
	const n = 1000
	m := &Metric{Name: "depth", Labels: map[string]string{"db": "0"}}
	series := make([]Series, n)
	for i := range series {
		series[i] = Series{Labels: map[string]string{"key": fmt.Sprintf("list-%d", i)}, Value: 5}
	}
	pm := &polledMetric{series: map[string]*polledSeries{}}
	pm.update(m, series)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		series[i%n].Value++
		if changed := pm.update(m, series); len(changed) != 1 || changed[0]["key"] != series[i%n].Labels["key"] {
			b.Fatalf("changed %v", changed)
		}
	}
}

// coverHub is a fake change hub that also takes coverage.
type coverHub struct {
	hub
	covers []string
}

func (h *coverHub) Cover(_ any, kind, metric string, lease, maxAge time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.covers = append(h.covers, fmt.Sprintf("cover %s %s lease=%s maxAge=%s", kind, metric, lease, maxAge))
}

func (h *coverHub) Uncover(_ any, kind, metric string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.covers = append(h.covers, fmt.Sprintf("uncover %s %s", kind, metric))
}

// takeCovers returns the coverage told since the last call.
func (h *coverHub) takeCovers() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.covers
	h.covers = nil
	return out
}

func TestFeedCoverage(t *testing.T) {
	t.Parallel()
	b, h := newBackend(), &coverHub{hub: hub{subscribers: 1}}
	b.set("orders", 3)
	clk := clocktesting.NewFakeClock(feedT0)
	p, err := New(t.Name()+"-covered", []Metric{b.metric("orders")}, Options{Clock: clk, CacheTTL: 2 * time.Second, Changes: h, Feed: Feed{Lease: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	step := func(what string, d time.Duration, do func(), want ...string) {
		t.Helper()
		clk.Step(d)
		do()
		if got := h.takeCovers(); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: coverage told %q, want %q", what, got, want)
		}
	}
	poll := func() { p.Poll(context.Background()) }
	covered := "cover external orders lease=1m0s maxAge=2.5s" // the TTL and half an interval
	step("the query that starts the poll", 0, func() { query(t, p, "orders") }, covered)
	step("a poll, nothing changed", time.Second, poll)
	step("another query", time.Second, func() { query(t, p, "orders") })
	b.failing("orders", true)
	step("a failed poll", 3*time.Second, poll, "uncover external orders")
	step("a second failed poll", 3*time.Second, poll)
	b.failing("orders", false)
	b.set("orders", 9)
	h.take()
	step("the next good poll", 3*time.Second, poll, covered)
	if got := h.take(); len(got) != 1 {
		t.Errorf("the good poll after the failures published %v, want the change", got)
	}
	b.failing("orders", true)
	step("a failed query", 3*time.Second, func() {
		if _, err := p.GetExternalMetric(context.Background(), "shop", labels.Everything(), info("orders")); err == nil {
			t.Error("a query of a failing backend got no error")
		}
	}, "uncover external orders")
	b.failing("orders", false)
	step("a good query", 3*time.Second, func() { query(t, p, "orders") }, covered)
	step("the lease ends", time.Minute+time.Second, poll, "uncover external orders")
	step("queried again", time.Second, func() { query(t, p, "orders") }, covered)
	// A retired provider uncovers what it polled, and a late query starts
	// no poll: nothing would announce its changes.
	step("the provider's feed ends", 0, p.EndFeed, "uncover external orders")
	step("a query after the end", time.Second, func() { query(t, p, "orders") })
	if n := p.Polled(); n != 0 {
		t.Errorf("%d metrics polled after the feed ended", n)
	}
	// A provider whose sink takes no coverage tells none and still polls.
	b.set("orders", 10)
	plain, pclk := feedProvider(t, b, &hub{subscribers: 1}, 2*time.Second, Feed{}, "orders")
	query(t, plain, "orders")
	pclk.Step(time.Second)
	plain.Poll(context.Background())
	if got := plain.Polled(); got != 1 {
		t.Errorf("without coverage, %d metrics polled, want 1", got)
	}
}
