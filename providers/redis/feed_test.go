package redis

import (
	"context"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/metricscale/metricscale/providers"
)

// listeningHub is a change hub with one subscriber that records changes.
type listeningHub struct {
	mu  sync.Mutex
	got []providers.Change
}

func (h *listeningHub) Publish(c providers.Change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.got = append(h.got, c)
}

func (h *listeningHub) Subscribers() int { return 1 }

func (h *listeningHub) take() []providers.Change {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.got
	h.got = nil
	return out
}

// TestFeedPollReadsThroughTheBatch: two metrics of one batch (one cacheTTL)
// polled for the change feed cost one pipelined round trip per interval,
// though the batch's snapshot is cached for 2s: the poll asks the
// snapshot too for a reading no older than half the interval. An LPUSH
// is published within an interval.
func TestFeedPollReadsThroughTheBatch(t *testing.T) {
	t.Parallel()
	s, err := decodeOptions("options", []byte(`{"address": "127.0.0.1:6379", "cacheTTL": "2s", "metrics": [
		{"name": "redis_jobs", "type": "listLength", "key": "jobs"},
		{"name": "redis_mail", "type": "listLength", "key": "mail"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	fake := newFake(t)
	fake.lists["jobs"], fake.lists["mail"] = 3, 1
	hub := &listeningHub{}
	clk := clocktesting.NewFakeClock(time.Now())
	p, err := newProvider("redis-feed", s, fake, clk, hub)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"redis_jobs", "redis_mail"} {
		if _, err := values(t, p, "", m, ""); err != nil {
			t.Fatal(err)
		}
	}
	if n := fake.pipelines.Load(); n != 1 {
		t.Fatalf("%d round trips for the two first queries, want 1 (one batch)", n)
	}
	const ticks = 5
	for range ticks {
		clk.Step(time.Second)
		p.Poll(context.Background())
	}
	if n := fake.pipelines.Load(); n != 1+ticks {
		t.Errorf("%d round trips after %d polls of two metrics, want %d: one per interval", n, ticks, 1+ticks)
	}
	if got := hub.take(); len(got) != 0 {
		t.Errorf("published %v while nothing changed", got)
	}
	fake.mu.Lock()
	fake.lists["jobs"] = 50 // LPUSH of a burst
	fake.mu.Unlock()
	clk.Step(time.Second)
	p.Poll(context.Background())
	got := hub.take()
	if len(got) != 1 || got[0].Metric != "redis_jobs" || got[0].Labels["key"] != "jobs" {
		t.Errorf("after the LPUSH published %+v, want one change of redis_jobs{key=jobs}", got)
	}
}
