package controller

import (
	"context"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/metricscale/metricscale/autoscaler/metricsource"
	"github.com/metricscale/metricscale/providers/changefeed"
)

// Values the change feed vouches for. While the adapter covers an External
// metric (changefeed's covered: it announces every change of its series,
// a polled backend's metric while its reads succeed), a value an object
// read of it stays good until the feed announces a change of a series the
// object selects. The object's later reconciles reuse it instead of
// reading the metric again: a reconcile at the sync period whose metric
// did not change costs no read through the aggregator.
//
// A value is reused only when all of these hold, else the metric is read
// as without the feed:
//   - the feed is live: connected and heard from within a heartbeat and a
//     half (a dead connection may hide changes);
//   - the metric is covered, and was since before the read began;
//   - no change the object's selectors match came since the read began,
//     and the read began after the last one and after the coverage began:
//     at least the coverage's maxAge after them (another adapter replica
//     may serve a reading that old), or at once if the feed's own replica
//     answered the read (it answers a query that reaches it after it
//     announced a change with the changed value or a newer one), so that
//     the read a change queues is kept;
//   - this autoscaler read the metric (for any object) within half the
//     coverage's lease: any query of a metric renews the adapter's poll of
//     it, so one read a metric every half lease keeps it polled, not one
//     an object.
//
// A failed read is never kept: it is read again at the next reconcile.
// A resync or a reconnection forgets every value and every coverage.

var vouchedReads = metrics.NewCounterVec(&metrics.CounterOpts{
	Namespace:      "metricscale",
	Subsystem:      "autoscaler",
	Name:           "vouched_metric_reads_total",
	Help:           "External metric reads of reconciles with the change feed, by result: reused (a value the feed vouches for, not read again), kept (read, and kept for reuse), read (read, not kept: the metric is not covered, or changed lately), failed.",
	StabilityLevel: metrics.ALPHA,
}, []string{"result"})

func init() {
	legacyregistry.MustRegister(vouchedReads)
}

// stamp is a point in the feed's events: the sequence number of the last
// one, and when.
type stamp struct {
	seq uint64
	at  time.Time
}

// nextLocked stamps a new event; the caller holds f.mu.
func (f *ChangeFeed) nextLocked() stamp {
	f.seq++
	return stamp{seq: f.seq, at: f.c.clock.Now()}
}

// settled reports whether a read begun at s is after the event e and at
// least maxAge later (a replica may serve a reading that old).
func (s stamp) settled(e stamp, maxAge time.Duration) bool {
	return s.seq >= e.seq && !s.at.Before(e.at.Add(maxAge))
}

// coverMark is a covered metric: when its coverage began, and what it says.
type coverMark struct {
	stamp
	lease, maxAge time.Duration
}

// vouchedValue is a value kept for reuse, and when its read began.
type vouchedValue struct {
	values []int64
	ts     time.Time
	start  stamp
}

// VouchFor makes the feed vouch for values while live reports the
// connection live (feedclient.Client.Live); replica names the adapter
// process serving the feed (feedclient.Client.Replica). The controller's
// reconciles then reuse them.
func (f *ChangeFeed) VouchFor(live func() bool, replica func() string) {
	f.mu.Lock()
	f.live, f.replica = live, replica
	f.mu.Unlock()
	f.c.vouch.Store(f)
}

// Covered implements feedclient.Handler: a metric's coverage begins or
// ends.
func (f *ChangeFeed) Covered(ev *changefeed.Event) {
	if !ev.MatchesKind(changefeed.KindExternal) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if ev.Type != changefeed.TypeCovered {
		delete(f.covered, ev.Name)
		return
	}
	f.covered[ev.Name] = coverMark{stamp: f.nextLocked(),
		lease: time.Duration(ev.LeaseSeconds) * time.Second, maxAge: time.Duration(ev.MaxAgeMillis) * time.Millisecond}
}

// changedLocked marks key's values stale; the caller holds f.mu.
func (f *ChangeFeed) changedLocked(key string) {
	f.marks[key] = f.nextLocked()
	delete(f.values, key)
}

// forgetAllLocked forgets every coverage and value; the caller holds f.mu.
func (f *ChangeFeed) forgetAllLocked() {
	f.seq++
	clear(f.readAt)
	clear(f.covered)
	clear(f.values)
	clear(f.marks)
}

// forgetLocked forgets what is kept of key; the caller holds f.mu.
func (f *ChangeFeed) forgetLocked(key string) {
	delete(f.values, key)
	delete(f.marks, key)
}

// vouched returns the value key keeps for read, if it is good now.
func (f *ChangeFeed) vouched(key, metric, read string) ([]int64, time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.values[key][read]
	if !ok {
		return nil, time.Time{}, false
	}
	// A change of key's series deleted its values (changedLocked).
	cov, covered := f.covered[metric]
	if !covered || v.start.seq < cov.seq || f.c.clock.Since(f.readAt[metric]) >= cov.lease/2 {
		delete(f.values[key], read)
		return nil, time.Time{}, false
	}
	// Silent for a while: perhaps dead. Read, but keep the value: if the
	// connection lives, its events are late, not lost; if it is dead, the
	// next one resyncs.
	if f.live == nil || !f.live() {
		return nil, time.Time{}, false
	}
	return slices.Clone(v.values), v.ts, true
}

// begin is where the feed stands before a read, and the replica serving
// it ("" if unknown).
func (f *ChangeFeed) begin() (stamp, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	replica := ""
	if f.replica != nil {
		replica = f.replica()
	}
	return stamp{seq: f.seq, at: f.c.clock.Now()}, replica
}

// keep keeps a value read from start, if nothing since says it may be
// stale; feedReplica is begin's replica, servedBy the one that answered
// the read. It reports whether it did. Kept or not, the good read renewed
// the adapter's poll of the metric (readAt).
func (f *ChangeFeed) keep(key, metric, read string, start stamp, feedReplica, servedBy string, values []int64, ts time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if start.at.After(f.readAt[metric]) {
		f.readAt[metric] = start.at
	}
	cov, covered := f.covered[metric]
	settle := cov.maxAge
	if feedReplica != "" && servedBy == feedReplica {
		settle = 0
	}
	if !covered || !start.settled(cov.stamp, settle) || !start.settled(f.marks[key], settle) || f.byKey[key] == nil {
		if kept := f.values[key]; kept != nil {
			delete(kept, read)
		}
		return false
	}
	kept := f.values[key]
	if kept == nil {
		kept = map[string]vouchedValue{}
		f.values[key] = kept
	}
	kept[read] = vouchedValue{values: slices.Clone(values), ts: ts, start: start}
	return true
}

// drop forgets what key keeps for read (its read failed).
func (f *ChangeFeed) drop(key, read string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if kept := f.values[key]; kept != nil {
		delete(kept, read)
	}
}

// vouchedSource is an object's metric source that reuses the External
// values the feed vouches for.
type vouchedSource struct {
	metricsource.Source
	feed *ChangeFeed
	key  string // the object's queue key
}

// metricSource is the source of the reconcile of key.
func (c *Controller) metricSource(key string) metricsource.Source {
	if f := c.vouch.Load(); f != nil {
		return vouchedSource{Source: c.clients.Metrics, feed: f, key: key}
	}
	return c.clients.Metrics
}

func (v vouchedSource) ExternalMetric(ctx context.Context, metricName, namespace string, selector labels.Selector) ([]int64, time.Time, error) {
	// The namespace is the object's: the key says it.
	read := metricName
	if selector != nil {
		read += "\x00" + selector.String()
	}
	if values, ts, ok := v.feed.vouched(v.key, metricName, read); ok {
		vouchedReads.WithLabelValues("reused").Inc()
		return values, ts, nil
	}
	start, feedReplica := v.feed.begin()
	var servedBy string
	values, ts, err := v.Source.ExternalMetric(metricsource.WithServedBy(ctx, &servedBy), metricName, namespace, selector)
	switch {
	case err != nil:
		v.feed.drop(v.key, read)
		vouchedReads.WithLabelValues("failed").Inc()
	case v.feed.keep(v.key, metricName, read, start, feedReplica, servedBy, values, ts):
		vouchedReads.WithLabelValues("kept").Inc()
	default:
		vouchedReads.WithLabelValues("read").Inc()
	}
	return values, ts, err
}
