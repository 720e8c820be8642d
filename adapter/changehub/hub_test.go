package changehub

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/changefeed"
)

func series(metric string, lbls ...string) providers.Change {
	m := map[string]string{}
	for i := 0; i+1 < len(lbls); i += 2 {
		m[lbls[i]] = lbls[i+1]
	}
	return providers.Change{Metric: metric, Namespace: m["namespace"], Labels: m}
}

// show renders events as short strings: "name{k=v,...}", "name{*}" for
// every series, "resync".
func show(events []changefeed.Event) []string {
	out := []string{}
	for _, e := range events {
		switch e.Type {
		case changefeed.TypeChange:
		case changefeed.TypeCovered:
			out = append(out, fmt.Sprintf("covered %s/%s lease=%ds maxAge=%dms", e.Kind, e.Name, e.LeaseSeconds, e.MaxAgeMillis))
			continue
		case changefeed.TypeUncovered:
			out = append(out, fmt.Sprintf("uncovered %s/%s", e.Kind, e.Name))
			continue
		default:
			out = append(out, e.Type)
			continue
		}
		if e.All {
			out = append(out, fmt.Sprintf("%s%s/%s{*}", e.Kind, e.Namespace, e.Name))
			continue
		}
		var kv []string
		for k, v := range e.Labels {
			kv = append(kv, k+"="+v)
		}
		sort.Strings(kv)
		out = append(out, fmt.Sprintf("%s%s/%s{%s}", e.Kind, e.Namespace, e.Name, strings.Join(kv, ",")))
	}
	return out
}

func ready(s *Subscription) bool {
	select {
	case <-s.Ready():
		return true
	default:
		return false
	}
}

func TestFanOutAndCoalescing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		opts    Options
		publish []providers.Change
		want    []string
	}{
		{
			name:    "one change",
			publish: []providers.Change{series("depth", "queue", "a")},
			want:    []string{"/depth{queue=a}"},
		},
		{
			name: "a burst of one series is one change",
			publish: []providers.Change{
				series("depth", "queue", "a"), series("depth", "queue", "a"), series("depth", "queue", "a"),
			},
			want: []string{"/depth{queue=a}"},
		},
		{
			name: "series and metrics stay apart, in order of arrival",
			publish: []providers.Change{
				series("depth", "queue", "b", "namespace", "shop"), series("lag", "topic", "t"),
				series("depth", "queue", "a"), series("depth", "queue", "b", "namespace", "shop"),
			},
			want: []string{"shop/depth{namespace=shop,queue=b}", "/lag{topic=t}", "/depth{queue=a}"},
		},
		{
			name: "kinds stay apart",
			publish: []providers.Change{
				{Kind: changefeed.KindExternal, Metric: "depth", Labels: map[string]string{"q": "a"}},
				{Kind: changefeed.KindCustom, Metric: "depth", Labels: map[string]string{"q": "a"}},
			},
			want: []string{"external/depth{q=a}", "custom/depth{q=a}"},
		},
		{
			name: "too many series of one metric become every series",
			opts: Options{MaxSeriesPerMetric: 2},
			publish: []providers.Change{
				series("depth", "queue", "a"), series("depth", "queue", "b"), series("lag", "topic", "t"),
				series("depth", "queue", "c"), series("depth", "queue", "d"),
			},
			want: []string{"/depth{*}", "/lag{topic=t}"},
		},
		{
			name:    "an all change absorbs the series",
			publish: []providers.Change{series("depth", "queue", "a"), {Metric: "depth", All: true}, series("depth", "queue", "b")},
			want:    []string{"/depth{*}"},
		},
		{
			name: "a slow subscriber gets a resync, not the changes",
			opts: Options{MaxPending: 3},
			publish: []providers.Change{
				series("a"), series("b"), series("c"), series("d"), series("e"),
			},
			want: []string{"resync"},
		},
		{
			name: "collapsed metrics count once against the limit",
			opts: Options{MaxPending: 3, MaxSeriesPerMetric: 2},
			publish: []providers.Change{
				series("depth", "q", "1"), series("depth", "q", "2"), series("depth", "q", "3"), series("depth", "q", "4"),
				series("lag", "t", "1"),
			},
			want: []string{"/depth{*}", "/lag{t=1}"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := New(tt.opts)
			subs := []*Subscription{h.Subscribe(), h.Subscribe()}
			for _, c := range tt.publish {
				h.Publish(c)
			}
			for i, s := range subs {
				if !ready(s) {
					t.Fatalf("subscriber %d: not signalled", i)
				}
				if got := show(s.Take()); strings.Join(got, " ") != strings.Join(tt.want, " ") {
					t.Errorf("subscriber %d got %q, want %q", i, got, tt.want)
				}
				if got := s.Take(); got != nil {
					t.Errorf("subscriber %d: a second Take returned %q", i, show(got))
				}
			}
		})
	}
}

func TestSubscriberLifecycle(t *testing.T) {
	t.Parallel()
	h := New(Options{})
	early := h.Subscribe()
	h.Publish(series("before"))
	late := h.Subscribe()
	h.Publish(series("after"))
	if got := show(early.Take()); strings.Join(got, " ") != "/before{} /after{}" {
		t.Errorf("early subscriber got %q", got)
	}
	if got := show(late.Take()); strings.Join(got, " ") != "/after{}" {
		t.Errorf("a subscriber hears only what follows its subscription, got %q", got)
	}
	if n := h.Subscribers(); n != 2 {
		t.Fatalf("%d subscribers, want 2", n)
	}
	early.Close()
	early.Close() // twice is harmless
	select {
	case <-early.Done():
	default:
		t.Error("Done not closed by Close")
	}
	h.Publish(series("closed"))
	if got := early.Take(); got != nil {
		t.Errorf("a closed subscription got %q", show(got))
	}
	if n := h.Subscribers(); n != 1 {
		t.Fatalf("%d subscribers after one closed, want 1", n)
	}
	h.Close()
	select {
	case <-late.Done():
	default:
		t.Error("the hub's Close did not end its subscriptions")
	}
	late.Close()
	after := h.Subscribe()
	select {
	case <-after.Done():
	default:
		t.Error("a subscription to a closed hub is not done")
	}
	after.Close()
	h.Publish(series("nobody"))
	if n := h.Subscribers(); n != 0 {
		t.Fatalf("%d subscribers after Close, want 0", n)
	}
}

func TestPublishNeverBlocks(t *testing.T) {
	t.Parallel()
	// Nobody reads the subscription: publishers go on, memory stays at the
	// limit, and the subscriber is told to resync.
	h := New(Options{MaxPending: 100})
	s := h.Subscribe()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 10000 {
				h.Publish(series(fmt.Sprintf("m%d", i), "w", fmt.Sprint(w)))
			}
		})
	}
	wg.Wait()
	s.mu.Lock()
	count, pending := s.count, len(s.pending)
	s.mu.Unlock()
	if count > 100 || pending > 100 {
		t.Errorf("pending grew past the limit: count %d, metrics %d", count, pending)
	}
	if got := show(s.Take()); strings.Join(got, " ") != "resync" {
		t.Errorf("got %q, want a resync", got)
	}
	if s.Overflows() == 0 {
		t.Error("no overflow counted")
	}
	// After the resync the subscriber hears changes again.
	h.Publish(series("m", "w", "x"))
	if got := show(s.Take()); strings.Join(got, " ") != "/m{w=x}" {
		t.Errorf("after the resync got %q", got)
	}
}

func TestHold(t *testing.T) {
	t.Parallel()
	h := New(Options{})
	s := h.Subscribe()
	h.Publish(series("free1"))
	releaseA := h.Hold()
	h.Publish(series("a"))
	releaseB := h.Hold()
	h.Publish(series("b"))
	if got := show(s.Take()); strings.Join(got, " ") != "/free1{}" {
		t.Fatalf("while held got %q, want only what came before the hold", got)
	}
	// B ends first: its change waits for A, begun before it.
	releaseB()
	if got := s.Take(); got != nil {
		t.Fatalf("after releasing the later hold got %q, want nothing yet", show(got))
	}
	releaseA()
	if got := show(s.Take()); strings.Join(got, " ") != "/a{} /b{}" {
		t.Fatalf("after releasing both got %q, want a then b", got)
	}
	releaseA() // twice is harmless
	h.Publish(series("free2"))
	if got := show(s.Take()); strings.Join(got, " ") != "/free2{}" {
		t.Fatalf("after the holds got %q", got)
	}

	// A released hold hands out what it covered even while a later hold
	// stays open.
	releaseC := h.Hold()
	h.Publish(series("c"))
	releaseD := h.Hold()
	h.Publish(series("d"))
	releaseC()
	if got := show(s.Take()); strings.Join(got, " ") != "/c{}" {
		t.Fatalf("after releasing the earlier hold got %q, want c", got)
	}
	releaseD()
	if got := show(s.Take()); strings.Join(got, " ") != "/d{}" {
		t.Fatalf("after releasing the later hold got %q, want d", got)
	}
}

func TestHoldOverflowResyncs(t *testing.T) {
	t.Parallel()
	h := New(Options{MaxPending: 2})
	s := h.Subscribe()
	release := h.Hold()
	for i := range 5 {
		h.Publish(series("m", "i", fmt.Sprint(i)))
	}
	if got := s.Take(); got != nil {
		t.Fatalf("while held got %q", show(got))
	}
	release()
	if got := show(s.Take()); got[0] != "resync" {
		t.Fatalf("after an overflowing hold got %q, want a resync first", got)
	}
}

func TestCoverage(t *testing.T) {
	t.Parallel()
	h := New(Options{MaxPending: 3})
	const (
		queue = "covered external/queue lease=120s maxAge=1500ms"
		lag   = "covered external/lag lease=60s maxAge=2000ms"
	)
	h.Cover("p", changefeed.KindExternal, "queue", 2*time.Minute, 1500*time.Millisecond)
	early := h.Subscribe()
	if !ready(early) {
		t.Fatal("a new subscriber is not told what is covered")
	}
	if got, want := show(early.Take()), []string{queue}; !reflect.DeepEqual(got, want) {
		t.Errorf("a new subscriber got %q, want %q", got, want)
	}
	h.Cover("p", changefeed.KindExternal, "queue", 2*time.Minute, 1500*time.Millisecond)
	if got := early.Take(); len(got) > 0 {
		t.Errorf("the same coverage again was told: %q", show(got))
	}
	h.Cover("p", changefeed.KindExternal, "lag", time.Minute, 2*time.Second)
	h.Publish(series("queue", "q", "a"))
	if got, want := show(early.Take()), []string{"/queue{q=a}", lag}; !reflect.DeepEqual(got, want) {
		t.Errorf("after a coverage and a change, got %q, want %q", got, want)
	}
	// The end of a coverage comes with a change of every series; a
	// coverage that ends and begins again before the subscriber reads is
	// told as it stands, after that change.
	h.Uncover("p", changefeed.KindExternal, "lag")
	h.Uncover("p", changefeed.KindExternal, "queue")
	h.Cover("p", changefeed.KindExternal, "queue", 2*time.Minute, 1500*time.Millisecond)
	want := []string{"external/lag{*}", "external/queue{*}", "uncovered external/lag", queue}
	if got := show(early.Take()); !reflect.DeepEqual(got, want) {
		t.Errorf("after two ends and a new beginning, got %q, want %q", got, want)
	}
	h.Uncover("p", changefeed.KindExternal, "lag")
	if got := early.Take(); len(got) > 0 {
		t.Errorf("the end of a coverage that had ended was told: %q", show(got))
	}
	// A subscriber that falls behind gets a resync, then what is covered
	// then: the resync made it forget it.
	for i := range 5 {
		h.Publish(series("orders", "i", fmt.Sprint(i)))
	}
	h.Cover("p", changefeed.KindExternal, "lag", time.Minute, 2*time.Second)
	got := show(early.Take())
	sort.Strings(got[1:])
	if want := []string{"resync", lag, queue}; !reflect.DeepEqual(got, want) {
		t.Errorf("after an overflow, got %q, want %q", got, want)
	}
	// Two owners (a provider and the one replacing it): covered while one
	// covers, the shortest lease and largest age of both; an owner's end
	// is a change of every series.
	h.Cover("new", changefeed.KindExternal, "queue", time.Minute, 3*time.Second)
	if got, want := show(early.Take()), []string{"covered external/queue lease=60s maxAge=3000ms"}; !reflect.DeepEqual(got, want) {
		t.Errorf("a second owner's coverage: got %q, want %q", got, want)
	}
	h.Uncover("p", changefeed.KindExternal, "queue")
	if got, want := show(early.Take()), []string{"external/queue{*}"}; !reflect.DeepEqual(got, want) {
		t.Errorf("one of two owners ended (the other's coverage is the same): got %q, want %q", got, want)
	}
	h.Uncover("new", changefeed.KindExternal, "queue")
	if got, want := show(early.Take()), []string{"external/queue{*}", "uncovered external/queue"}; !reflect.DeepEqual(got, want) {
		t.Errorf("the last owner ended: got %q, want %q", got, want)
	}
	h.Close()
	h.Cover("p", changefeed.KindExternal, "other", time.Minute, time.Second)
	if got := early.Take(); len(got) > 0 {
		t.Errorf("a closed hub told %q", show(got))
	}
}
