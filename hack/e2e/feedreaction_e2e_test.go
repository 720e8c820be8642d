//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Issue 29's reactions through the change feed at a 15s syncPeriod: a
// pushed metric flipped many times within one period (TestChangeFeedFlips)
// and a Redis list the adapter polls for the feed (TestRedisChangeFeed).
// Both hold the goal, p50 ≤ 1s and max ≤ 2s, and log every
// reaction: a change that waits for the object's next periodic reconcile
// shows as a reaction of up to 15s.

const feedSyncPeriod = 15 * time.Second

// replicasWatch records the Deployment's spec.replicas as it changes.
func replicasWatch(t *testing.T, ns, name string) *fieldWatcher {
	t.Helper()
	return watchField(t, schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, ns, name,
		func(u *unstructured.Unstructured) string {
			r, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
			return strconv.FormatInt(r, 10)
		})
}

// checkReactions logs the reactions and holds them to the goal.
func checkReactions(t *testing.T, what string, lat []time.Duration) {
	t.Helper()
	p50 := percentile(lat, 50)
	t.Logf("%s over %d changes at syncPeriod %s: p50 %s, max %s (all: %s)",
		what, len(lat), feedSyncPeriod, round(p50), round(slices.Max(lat)), roundAll(lat))
	if p50 > time.Second {
		t.Errorf("p50 %s, want ≤ 1s", round(p50))
	}
	for i, d := range lat {
		if d > 2*time.Second {
			t.Errorf("change %d took %s, want ≤ 2s: it waited for a periodic reconcile instead of the feed's", i, round(d))
		}
	}
}

// TestChangeFeedFlips is the measurement of a pushed metric: it
// flips between 20 and 5 fifty times (the issue flipped it ten times a
// run, and asks for at least 50 changes), about ten times per sync period
// (each flip a random 0–1.5s after the last one applied), so that flips
// land within the feed's minimum interval (1s) of one another and the
// object's periodic reconcile falls among them: what made one flip in ten
// wait for the next period in the runs (the periodic reconcile took
// the place of the one the feed had asked for at the end of its interval,
// and a flip after it was taken as covered; autoscaler/controller's
// TestChangeFeedChangeAfterAnEarlierReconcile).
func TestChangeFeedFlips(t *testing.T) {
	needAutoscaler(t)
	const (
		flips     = 50
		low, high = 5, 20 // 1 and 2 workers at 10 per worker
	)
	ns := cluster.CreateNamespace(t, "flips")
	queue := "flips-" + ns
	pushDepth(t, queue, low)
	cluster.CreateDeployment(t, KwokDeployment(ns, "workers", 1, "100m", "10m"))
	ma := newMA(ns, "workers", 1, 10, feedSyncPeriod, queueSpec(queue, "10"))
	ma.Spec.Behavior = immediateBehavior()
	createMA(t, ma)
	waitReplicas(t, ns, "workers", 1, 30*time.Second)
	replicas := replicasWatch(t, ns, "workers")
	var lat []time.Duration
	for i := range flips {
		depth, want := high, "2"
		if i%2 == 1 {
			depth, want = low, "1"
		}
		time.Sleep(rand.N(1500 * time.Millisecond))
		start := time.Now()
		pushDepth(t, queue, depth)
		at := replicas.waitFor(t, start, feedSyncPeriod+5*time.Second, "spec.replicas "+want, equals(want))
		lat = append(lat, at.Sub(start))
	}
	checkReactions(t, "push → spec.replicas", lat)
}

// TestRedisChangeFeed: a MetricAutoscaler at syncPeriod 15s on a Redis list
// (the redis provider reads on demand, cacheTTL 2s): with the adapter
// polling the list for the change feed (feedPollInterval, default 1s), an
// LPUSH of a burst, or the list emptied, reaches the Deployment within
// about a poll interval, at any phase of the period. The adapter polls the
// list about once a second for all its readers, and the feed queued the
// object for each change.
func TestRedisChangeFeed(t *testing.T) {
	needAutoscaler(t)
	ctx := context.Background()
	b := queueBackendOf(t, "redis")
	const (
		trials = 50
		burst  = 50 // 5 workers at 10 per worker
	)
	ns := cluster.CreateNamespace(t, "redisfeed")
	b.drain(ctx, t)
	t.Cleanup(func() { b.drain(context.Background(), t) })
	cluster.CreateDeployment(t, KwokDeployment(ns, "workers", 1, "100m", "10m"))
	avg := resource.MustParse("10")
	ma := newMA(ns, "workers", 1, 10, feedSyncPeriod, autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: b.metric, Selector: &metav1.LabelSelector{MatchLabels: b.selector}},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &avg},
	}})
	ma.Spec.Behavior = immediateBehavior()
	createMA(t, ma)
	waitReplicas(t, ns, "workers", 1, 30*time.Second)
	replicas := replicasWatch(t, ns, "workers")
	adapter := adapterMetricsClient(t)
	adapterValue := func(name string, match map[string]string) float64 {
		v, _ := metricValue(adapterMetricsText(t, adapter), name, match)
		return v
	}
	// The Deployment starts at the MetricAutoscaler's size, so the wait above can
	// end before the autoscaler's first sync subscribed to the metric (a cold CI
	// run, its unit tests beside the suite, read 0 here): wait for the poll.
	Eventually(t, 30*time.Second, 250*time.Millisecond, "the adapter to poll "+b.metric+" for the autoscaler's subscription",
		func(context.Context) (bool, string, error) {
			polled := adapterValue("metricscale_adapter_feed_polled_metrics", map[string]string{"provider": "redis"})
			return polled >= 1, fmt.Sprintf("metricscale_adapter_feed_polled_metrics{provider=redis} = %v", polled), nil
		})
	readsBefore := adapterValue("metricscale_adapter_feed_poll_reads_total", map[string]string{"provider": "redis"})
	const kept = `metricscale_autoscaler_vouched_metric_reads_total{result="kept"}`
	keptBefore := autoscalerCounter(t, kept)
	began := time.Now()

	var lat []time.Duration
	for i := range trials {
		want := "5"
		if i%2 == 1 {
			want = "1"
		}
		// a random phase against the period and the polls
		time.Sleep(500*time.Millisecond + rand.N(1500*time.Millisecond))
		enqueued := autoscalerCounter(t, `metricscale_autoscaler_change_feed_enqueues_total{reason="change"}`)
		start := time.Now()
		if want == "5" {
			b.publish(ctx, t, burst) // RPUSH of the burst
		} else {
			b.drain(ctx, t)
		}
		at := replicas.waitFor(t, start, feedSyncPeriod+5*time.Second, "spec.replicas "+want, equals(want))
		lat = append(lat, at.Sub(start))
		if n := autoscalerCounter(t, `metricscale_autoscaler_change_feed_enqueues_total{reason="change"}`) - enqueued; n < 1 {
			t.Errorf("trial %d: the feed queued no reconcile for the change (scaled by the periodic reconcile)", i)
		}
	}
	elapsed := time.Since(began)
	reads := adapterValue("metricscale_adapter_feed_poll_reads_total", map[string]string{"provider": "redis"}) - readsBefore
	checkReactions(t, "Redis list changed → spec.replicas", lat)
	// The read each change queued was answered by the feed's own adapter
	// replica (its Metricscale-Replica header passed the aggregator), so
	// it was kept though it came within maxAge of the change: changes
	// 0.5-2 s apart leave no other read to keep.
	if n := autoscalerCounter(t, kept) - keptBefore; n < trials/2 {
		t.Errorf("%d of the reads %d changes queued were kept for reuse, want at least %d", n, trials, trials/2)
	} else {
		t.Logf("%d reads kept for reuse over %d changes", n, trials)
	}
	t.Logf("the adapter's poll of redis: %.0f reads in %s (%.2f/s; one metric polled, default feedPollInterval 1s)",
		reads, round(elapsed), reads/elapsed.Seconds())
	if perSecond := reads / elapsed.Seconds(); perSecond > 1.5 {
		t.Errorf("%.2f poll reads a second for one metric, want about one", perSecond)
	}

	// Quiet now: the adapter covers the polled list, so a periodic sync
	// reuses the value read at the one before instead of reading it again
	// (vouch.go)...
	const reused = `metricscale_autoscaler_vouched_metric_reads_total{result="reused"}`
	reusedBefore := autoscalerCounter(t, reused)
	Eventually(t, 2*feedSyncPeriod+10*time.Second, time.Second, "a periodic sync to reuse the value the change feed vouches for",
		func(context.Context) (bool, string, error) {
			n := autoscalerCounter(t, reused) - reusedBefore
			return n >= 1, fmt.Sprintf("%d reused", n), nil
		})
	// ...and a change still reaches the Deployment at once.
	start := time.Now()
	b.publish(ctx, t, burst)
	at := replicas.waitFor(t, start, feedSyncPeriod+5*time.Second, "spec.replicas 5", equals("5"))
	if d := at.Sub(start); d > 2*time.Second {
		t.Errorf("a change after the value was reused reached the Deployment in %s, want within 2s", d.Round(10*time.Millisecond))
	}
	t.Logf("after %d reused reads, a change reached the Deployment in %s", autoscalerCounter(t, reused)-reusedBefore, at.Sub(start).Round(10*time.Millisecond))
}
