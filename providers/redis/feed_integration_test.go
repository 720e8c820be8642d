package redis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/providertest"
)

// TestRealServerFeed: with the change feed on (a hub with a subscriber),
// the provider polls the list an autoscaler queried, on a real
// redis-server, at the default feedPollInterval (1s): every LPUSH of a
// burst, and every emptying of the list, is published, at any phase of the
// poll, and the server sees about one LLEN per interval. It logs LPUSH →
// change on the feed (the adapter's share of an autoscaler's reaction).
func TestRealServerFeed(t *testing.T) {
	needBinaries(t)
	t.Parallel()
	srv := startServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := goredis.NewClient(&goredis.Options{Addr: srv.addr()})
	defer admin.Close()
	hub := providertest.NewTimedHub()
	pwFile := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pwFile, []byte(aclPassword), 0o600); err != nil {
		t.Fatal(err)
	}
	raw := fmt.Sprintf(`{"address": %q, "username": %q, "password": {"file": %q}, "cacheTTL": "2s",
		"metrics": [{"name": "redis_jobs_length", "type": "listLength", "key": "jobs"}]}`, srv.addr(), aclUser, pwFile)
	pp, err := Factory{}.New("redis-feed", []byte(raw), providers.Deps{Changes: hub})
	if err != nil {
		t.Fatal(err)
	}
	p := pp.(*Provider)
	t.Cleanup(func() { _ = p.Close() })
	go p.Run(ctx)
	// The autoscaler's first query: the list is polled from now on.
	if _, err := p.GetExternalMetric(ctx, "shop", labels.Everything(), providers.ExternalMetricInfo{Metric: "redis_jobs_length"}); err != nil {
		t.Fatal(err)
	}
	llens := func() int {
		t.Helper()
		for _, line := range strings.Split(srv.cli("INFO", "commandstats"), "\n") {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_llen:calls="); ok {
				n := 0
				fmt.Sscanf(rest, "%d", &n)
				return n
			}
		}
		return 0
	}
	before, began := llens(), time.Now()
	const trials = 20
	var lat []time.Duration
	for i := range trials {
		time.Sleep(rand.N(1500 * time.Millisecond))
		hub.Drain()
		start := time.Now()
		if i%2 == 0 {
			jobs := make([]any, 50)
			for j := range jobs {
				jobs[j] = j
			}
			if err := admin.LPush(ctx, "jobs", jobs...).Err(); err != nil {
				t.Fatal(err)
			}
		} else if err := admin.Del(ctx, "jobs").Err(); err != nil {
			t.Fatal(err)
		}
		select {
		case c := <-hub.C:
			lat = append(lat, c.At.Sub(start))
		case <-time.After(30 * time.Second):
			t.Fatalf("trial %d: the change was not published", i)
		}
	}
	elapsed := time.Since(began)
	reads := llens() - before
	slices.Sort(lat)
	t.Logf("LPUSH/DEL → change on the feed over %d trials at feedPollInterval 1s: p50 %s, max %s; %d LLEN in %s (%.2f/s)",
		trials, lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond), reads, elapsed.Round(time.Millisecond), float64(reads)/elapsed.Seconds())
	// One read per interval (the poll's), plus the one tick in flight.
	if limit := int(elapsed/time.Second) + 2; reads > limit {
		t.Errorf("%d LLEN in %s, want at most one per interval (%d)", reads, elapsed.Round(time.Millisecond), limit)
	}
}
