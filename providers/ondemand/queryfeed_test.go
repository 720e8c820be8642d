package ondemand

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/metrics/pkg/apis/external_metrics"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/metricscale/metricscale/providers"
)

// answers is a fake per-query backend: the items of each namespace, and
// the reads it served.
type answers struct {
	mu    sync.Mutex
	items map[string][]external_metrics.ExternalMetricValue // by namespace
	fail  bool
	reads int
}

func (a *answers) set(ns string, depths map[string]string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var items []external_metrics.ExternalMetricValue
	for queue, v := range depths {
		items = append(items, external_metrics.ExternalMetricValue{MetricName: "depth", MetricLabels: map[string]string{"queue": queue}, Value: resource.MustParse(v)})
	}
	a.items[ns] = items
}

func (a *answers) read(_ context.Context, ns string, sel labels.Selector, _ providers.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reads++
	if a.fail {
		return nil, errors.New("backend down")
	}
	out := &external_metrics.ExternalMetricValueList{}
	for _, it := range a.items[ns] {
		if sel.Matches(labels.Set(it.MetricLabels)) {
			out.Items = append(out.Items, it)
		}
	}
	return out, nil
}

func (a *answers) readCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.reads
}

func newQueryFeed(t *testing.T, cfg Feed) (*QueryFeed, *answers, *hub, *clocktesting.FakeClock) {
	t.Helper()
	a := &answers{items: map[string][]external_metrics.ExternalMetricValue{}}
	h := &hub{subscribers: 1}
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	return NewQueryFeed("prom", h, cfg, clk, a.read), a, h, clk
}

// ask asks the feed's backend as a provider's GetExternalMetric does and
// records it in the feed.
func ask(t *testing.T, f *QueryFeed, a *answers, ns, sel string) {
	t.Helper()
	s, err := labels.Parse(sel)
	if err != nil {
		t.Fatal(err)
	}
	list, err := a.read(context.Background(), ns, s, providers.ExternalMetricInfo{Metric: "depth"})
	if err != nil {
		t.Fatal(err)
	}
	f.Queried(context.Background(), ns, s, "depth", list)
}

// TestQueryFeed: a queried query is polled; a change, a new series and a
// gone series are published once each, with the query's namespace; an
// unchanged answer publishes nothing; a failed read publishes nothing and
// the next good one is compared with the last good one.
func TestQueryFeed(t *testing.T) {
	t.Parallel()
	f, a, h, _ := newQueryFeed(t, Feed{})
	a.set("shop", map[string]string{"orders": "5", "mails": "1"})
	ask(t, f, a, "shop", "")
	if f.Polled() != 1 {
		t.Fatalf("polled %d queries, want 1", f.Polled())
	}
	steps := []struct {
		name   string
		depths map[string]string
		fail   bool
		want   []string
	}{
		{"unchanged", map[string]string{"orders": "5", "mails": "1"}, false, nil},
		{"one changed", map[string]string{"orders": "7", "mails": "1"}, false, []string{`depth{queue=orders} ns="shop" kind=external`}},
		{"same value, other notation", map[string]string{"orders": "7000m", "mails": "1"}, false, nil},
		{"one gone, one new", map[string]string{"orders": "7", "invoices": "2"}, false, []string{`depth{queue=invoices} ns="shop" kind=external`, `depth{queue=mails} ns="shop" kind=external`}},
		{"backend down", nil, true, nil},
		{"back with a change made meanwhile", map[string]string{"orders": "9", "invoices": "2"}, false, []string{`depth{queue=orders} ns="shop" kind=external`}},
	}
	for _, s := range steps {
		a.mu.Lock()
		a.fail = s.fail
		a.mu.Unlock()
		if s.depths != nil {
			a.set("shop", s.depths)
		}
		f.Poll(context.Background())
		if got := h.take(); !reflect.DeepEqual(got, s.want) {
			t.Errorf("%s: published %q, want %q", s.name, got, s.want)
		}
	}
}

// TestQueryFeedSelector: a query with a selector is polled with it; a
// change in a series whose labels do not show the selector (an aggregated
// answer) is published for every series of the metric in the namespace.
func TestQueryFeedSelector(t *testing.T) {
	t.Parallel()
	f, a, h, _ := newQueryFeed(t, Feed{})
	a.set("shop", map[string]string{"orders": "5", "mails": "1"})
	ask(t, f, a, "shop", "queue=orders")
	a.set("shop", map[string]string{"orders": "5", "mails": "3"})
	f.Poll(context.Background())
	if got := h.take(); got != nil {
		t.Errorf("a change outside the selector published %q", got)
	}
	a.set("shop", map[string]string{"orders": "6", "mails": "3"})
	f.Poll(context.Background())
	if got, want := h.take(), []string{`depth{queue=orders} ns="shop" kind=external`}; !reflect.DeepEqual(got, want) {
		t.Errorf("published %q, want %q", got, want)
	}

	// An aggregated answer: one series without labels, whatever the selector.
	agg := &hub{subscribers: 1}
	value := "4"
	read := func(context.Context, string, labels.Selector, providers.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
		return &external_metrics.ExternalMetricValueList{Items: []external_metrics.ExternalMetricValue{{MetricName: "depth", Value: resource.MustParse(value)}}}, nil
	}
	f2 := NewQueryFeed("prom", agg, Feed{}, clocktesting.NewFakeClock(time.Unix(0, 0)), read)
	sel := labels.SelectorFromSet(labels.Set{"team": "a"})
	list, _ := read(context.Background(), "shop", sel, providers.ExternalMetricInfo{Metric: "depth"})
	f2.Queried(context.Background(), "shop", sel, "depth", list)
	value = "8"
	f2.Poll(context.Background())
	if got, want := agg.take(), []string{"depth{*}"}; !reflect.DeepEqual(got, want) {
		t.Errorf("aggregated answer: published %q, want %q", got, want)
	}
}

// TestQueryFeedBounds: nothing is polled without subscribers; a query
// stops being polled when its lease ends; at most MaxPolled queries are
// polled, one read per interval each whatever the number of queries; a
// poll's own read does not renew a lease.
func TestQueryFeedBounds(t *testing.T) {
	t.Parallel()
	f, a, h, clk := newQueryFeed(t, Feed{MaxPolled: 2, Lease: time.Minute})
	for _, ns := range []string{"a", "b", "c"} {
		a.set(ns, map[string]string{"q": "1"})
	}
	ask(t, f, a, "a", "")
	ask(t, f, a, "a", "")
	ask(t, f, a, "b", "")
	ask(t, f, a, "c", "")
	if f.Polled() != 2 {
		t.Fatalf("polled %d queries, want the cap, 2", f.Polled())
	}
	before := a.readCount()
	f.Poll(context.Background())
	if got := a.readCount() - before; got != 2 {
		t.Errorf("a poll read %d times, want 2 (one per polled query)", got)
	}

	// The poll's reads do not renew the leases; a query does.
	clk.Step(40 * time.Second)
	ask(t, f, a, "a", "")
	clk.Step(40 * time.Second)
	f.Poll(context.Background())
	if f.Polled() != 1 {
		t.Errorf("after b's lease ended: polled %d, want 1 (a's, renewed by a query)", f.Polled())
	}

	h.setSubscribers(0)
	f.Poll(context.Background())
	if f.Polled() != 0 {
		t.Errorf("without subscribers: polled %d, want 0", f.Polled())
	}
	ask(t, f, a, "a", "")
	if f.Polled() != 0 {
		t.Errorf("a query without subscribers started a poll")
	}

	if NewQueryFeed("prom", nil, Feed{}, clk, a.read) != nil || NewQueryFeed("prom", h, Feed{Interval: -1}, clk, a.read) != nil {
		t.Error("a feed without a sink or with polling off is not nil")
	}
	var off *QueryFeed
	off.Queried(context.Background(), "a", nil, "depth", &external_metrics.ExternalMetricValueList{})
	off.Poll(context.Background())
	if off.Polled() != 0 {
		t.Error("a nil feed polls")
	}
}
