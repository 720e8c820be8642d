package apiservice

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/naming"
	"github.com/metricscale/metricscale/providers/providertest"
)

// TestRemoteFeed: with the change feed on (a hub with a subscriber), the
// External query an autoscaler made is asked of the remote adapter (a real
// custom-metrics-apiserver) again every feedPollInterval (1s), and each
// change of the remote's value is published for the queried series; the
// remote sees about one request per interval. It logs the remote's change
// → change on the feed.
func TestRemoteFeed(t *testing.T) {
	t.Parallel()
	mapper := providertest.Mapper()
	deps := providers.Deps{Mapper: mapper, Resources: naming.NewResolver(mapper, nil)}
	r := newRemote(t, deps, time.Hour)
	push := func(v float64) {
		t.Helper()
		s := providers.Sample{Name: "queue_depth", Labels: map[string]string{"namespace": "shop", "queue": "jobs"}, Value: v, Timestamp: time.Now()}
		if err := r.mem.Append([]providers.Sample{s}); err != nil {
			t.Fatal(err)
		}
	}
	push(5)
	hub := providertest.NewTimedHub()
	deps.Changes = hub
	pp, err := Factory{}.New("federated-feed", r.options(nil), deps)
	if err != nil {
		t.Fatal(err)
	}
	p := pp.(*Provider)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	go p.Run(ctx)
	sel := labels.SelectorFromSet(labels.Set{"queue": "jobs"})
	info := providers.ExternalMetricInfo{Metric: "queue_depth"}
	if _, err := p.GetExternalMetric(ctx, "shop", sel, info); err != nil {
		t.Fatal(err)
	}

	before, began := r.calls.Load(), time.Now()
	const trials = 8
	var lat []time.Duration
	for i := range trials {
		time.Sleep(rand.N(1500 * time.Millisecond))
		hub.Drain()
		start := time.Now()
		push(float64(10 + i))
		select {
		case c := <-hub.C:
			if c.Metric != info.Metric || c.Namespace != "shop" || c.All || c.Labels["queue"] != "jobs" {
				t.Fatalf("trial %d: published %+v, want queue_depth{queue=jobs} in shop", i, c.Change)
			}
			lat = append(lat, c.At.Sub(start))
		case <-time.After(30 * time.Second):
			t.Fatalf("trial %d: the change was not published", i)
		}
	}
	elapsed := time.Since(began)
	calls := r.calls.Load() - before
	slices.Sort(lat)
	t.Logf("remote's value changed → change on the feed over %d trials (feedPollInterval 1s): p50 %s, max %s; %d requests to the remote in %s (%.2f/s)",
		trials, lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond), calls, elapsed.Round(time.Millisecond), float64(calls)/elapsed.Seconds())
	// One request per interval (the poll's), the tick in flight, and
	// discovery refreshes (1m: at most one here).
	if limit := int64(elapsed/time.Second) + 3; calls > limit {
		t.Errorf("%d requests to the remote in %s, want at most one per interval (%d)", calls, elapsed.Round(time.Millisecond), limit)
	}
}
