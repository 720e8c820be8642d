package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-base/metrics/testutil"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/providertest"
)

// newFeedProvider builds a provider with the change feed on (hub) and runs
// it until the test ends.
func newFeedProvider(t *testing.T, name string, hub providers.ChangeSink, opts map[string]any) *Provider {
	t.Helper()
	raw, err := json.Marshal(opts)
	if err != nil {
		t.Fatal(err)
	}
	pp, err := Factory{}.New(name, raw, providers.Deps{Changes: hub})
	if err != nil {
		t.Fatal(err)
	}
	p := pp.(*Provider)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; _ = p.Close() })
	return p
}

// waitFor waits until cond holds, failing the test after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// established waits until metric is served from notifications.
func established(t *testing.T, p *Provider, metric string) {
	t.Helper()
	waitFor(t, metric+" served from keyspace notifications", func() bool {
		ok, err := p.keyspace.state(metric)
		if err != nil {
			t.Fatalf("the keyspace feed failed: %v", err)
		}
		return ok
	})
}

// commandCalls is INFO commandstats: command → calls.
func commandCalls(t *testing.T, srv *server) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, line := range strings.Split(srv.cli("INFO", "commandstats"), "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		n := 0
		fmt.Sscanf(rest, "%d", &n)
		out[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	return out
}

// served counts the commands between two commandstats, less redis-cli's
// own (INFO, CONFIG GET by the test) and the test's writes.
func served(before, after map[string]int) (int, string) {
	var parts []string
	total := 0
	for c, n := range after {
		switch c {
		case "info", "lpush", "del", "config|set", "hello", "client|kill":
			continue
		}
		if d := n - before[c]; d > 0 {
			total += d
			parts = append(parts, fmt.Sprintf("%s %d", c, d))
		}
	}
	slices.Sort(parts)
	return total, strings.Join(parts, ", ")
}

// awaitChange waits for a change of metric whose label key is key (other
// changes are skipped) and returns how long after start it came.
func awaitChange(t *testing.T, hub *providertest.TimedHub, start time.Time, metric, label, key string) time.Duration {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case c := <-hub.C:
			if c.Metric == metric && (c.All || c.Labels[label] == key) {
				return c.At.Sub(start)
			}
		case <-timeout:
			t.Fatalf("no change of %s{%s=%s} published within a minute", metric, label, key)
		}
	}
}

func quantiles(lat []time.Duration) string {
	slices.Sort(lat)
	return fmt.Sprintf("p50 %s, max %s", lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
}

// TestRealServerKeyspaceFeed (a): with feed: keyspace on a real
// redis-server whose notifications are off, the provider sets
// notify-keyspace-events (setNotifyKeyspaceEvents), and every LPUSH of a
// burst, emptying of the list, and new key of a pattern is published and
// served, and every XADD to a stream; it logs write → change on the feed.
func TestRealServerKeyspaceFeed(t *testing.T) {
	needBinaries(t)
	t.Parallel()
	srv := startServer(t)
	ctx := context.Background()
	admin := goredis.NewClient(&goredis.Options{Addr: srv.addr()})
	defer admin.Close()
	hub := providertest.NewTimedHub()
	p := newFeedProvider(t, "redis-keyspace", hub, map[string]any{
		"address": srv.addr(), "feed": "keyspace", "setNotifyKeyspaceEvents": true,
		"metrics": []map[string]any{
			{"name": "redis_jobs_length", "type": "listLength", "key": "jobs"},
			{"name": "redis_queues", "type": "listLength", "keyPattern": "q:*"},
			{"name": "redis_events_length", "type": "streamLength", "key": "events"},
		},
	})
	must(t, admin.RPush(ctx, "q:first", "a").Err())
	for _, m := range []string{"redis_jobs_length", "redis_queues", "redis_events_length"} {
		if _, err := query(ctx, p, m); err != nil {
			t.Fatalf("query %s: %v", m, err)
		}
	}
	established(t, p, "redis_jobs_length")
	established(t, p, "redis_queues")
	established(t, p, "redis_events_length")
	if got := srv.cli("CONFIG", "GET", "notify-keyspace-events"); missingFlags(strings.Fields(got + " x")[1], "Kglt") != "" {
		t.Errorf("notify-keyspace-events after start: %q, want K, g, l and t set", got)
	}
	hub.Drain()
	const trials = 64
	var lat, quiet, busy []time.Duration
	lastWrite := map[string]time.Time{}
	for i := range trials {
		time.Sleep(rand.N(300 * time.Millisecond))
		start := time.Now()
		metric, label, key := "redis_jobs_length", "key", "jobs"
		switch i % 4 {
		case 0:
			burst := make([]any, 20)
			for j := range burst {
				burst[j] = j
			}
			must(t, admin.LPush(ctx, "jobs", burst...).Err())
		case 1:
			must(t, admin.Del(ctx, "jobs").Err())
		case 2:
			metric, key = "redis_queues", fmt.Sprintf("q:%d", i)
			must(t, admin.LPush(ctx, key, "job").Err())
		case 3:
			metric, label, key = "redis_events_length", "stream", "events"
			must(t, admin.XAdd(ctx, &goredis.XAddArgs{Stream: "events", Values: []any{"n", i}}).Err())
		}
		d := awaitChange(t, hub, start, metric, label, key)
		lat = append(lat, d)
		// a key read less than feedPollInterval (1s) ago is read once that
		// much has passed
		if last, ok := lastWrite[key]; ok && start.Sub(last) < time.Second {
			busy = append(busy, d)
		} else {
			quiet = append(quiet, d)
		}
		lastWrite[key] = start
	}
	t.Logf("write → change on the feed over %d trials (LPUSH of 20, DEL, LPUSH to a new key of a pattern, XADD), feed keyspace: all %s; %d to a key not written in the last 1s: %s; %d to one written less than 1s before: %s",
		trials, quantiles(lat), len(quiet), quantiles(quiet), len(busy), quantiles(busy))
	if v, err := testutil.GetCounterMetricValue(keyspaceNotifications.WithLabelValues("redis-keyspace")); err != nil || v < trials {
		t.Errorf("metricscale_adapter_feed_keyspace_notifications_total = %v (%v), want at least one per write (%d)", v, err, trials)
	}
	if v, err := testutil.GetGaugeMetricValue(keyspaceFailed.WithLabelValues("redis-keyspace")); err != nil || v != 0 {
		t.Errorf("metricscale_adapter_feed_keyspace_failed = %v (%v), want 0", v, err)
	}
	// A restart: the server's notify-keyspace-events is its config file's
	// again (off); the provider sets it once reconnected.
	srv.stop()
	srv.start()
	waitFor(t, "notify-keyspace-events set again after the restart", func() bool {
		f := strings.Fields(srv.cli("CONFIG", "GET", "notify-keyspace-events") + " x")
		return missingFlags(f[1], "Kglt") == ""
	})
	established(t, p, "redis_queues")
	hub.Drain()
	start := time.Now()
	must(t, admin.LPush(ctx, "q:after-restart", "job").Err())
	restarted := awaitChange(t, hub, start, "redis_queues", "key", "q:after-restart")
	t.Logf("after a server restart: LPUSH to a new key → change %s", restarted.Round(time.Millisecond))
	// the snapshot the notifications keep serves what Redis holds
	got, err := query(ctx, p, "redis_queues")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := admin.Keys(ctx, "q:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(keys) {
		t.Errorf("redis_queues serves %d series, Redis has %d keys q:*", len(got), len(keys))
	}
	for _, k := range keys {
		if v, ok := got[labels.Set{"key": k}.String()]; !ok || v != 1 {
			t.Errorf("redis_queues{key=%s} = %v (served %v), want 1", k, v, ok)
		}
	}
	// A pattern's key popped empty (lpop, then del) and one deleted leave
	// its series; the events say so without a TYPE.
	other := keys[0]
	if other == "q:after-restart" {
		other = keys[1]
	}
	types := commandCalls(t, srv)["type"]
	hub.Drain()
	start = time.Now()
	must(t, admin.LPop(ctx, "q:after-restart").Err())
	awaitChange(t, hub, start, "redis_queues", "key", "q:after-restart")
	hub.Drain()
	start = time.Now()
	must(t, admin.Del(ctx, other).Err())
	awaitChange(t, hub, start, "redis_queues", "key", other)
	got, err = query(ctx, p, "redis_queues")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"q:after-restart", other} {
		if _, ok := got[labels.Set{"key": k}.String()]; ok {
			t.Errorf("redis_queues{key=%s} still served after the key is gone: %v", k, got)
		}
	}
	if n := commandCalls(t, srv)["type"] - types; n != 0 {
		t.Errorf("%d TYPE commands for keys whose events said their type", n)
	}
}

// TestRealServerKeyspaceIdleCost (b): 100 lists of one keyPattern metric,
// subscribed and queried as 100 autoscalers at a 15s sync would (7
// queries a second), idle for 10s: the commands Redis serves, polling
// every 1s against keyspace notifications with a 5s reconciliation.
func TestRealServerKeyspaceIdleCost(t *testing.T) {
	needBinaries(t)
	t.Parallel()
	const lists, idle = 100, 10 * time.Second
	var mu sync.Mutex
	rates := map[string]float64{}
	t.Run("modes", func(t *testing.T) {
		for _, mode := range []string{"poll", "keyspace"} {
			t.Run(mode, func(t *testing.T) {
				t.Parallel()
				srv := startServer(t, "notify-keyspace-events Kgl")
				ctx := context.Background()
				admin := goredis.NewClient(&goredis.Options{Addr: srv.addr()})
				defer admin.Close()
				for i := range lists {
					must(t, admin.RPush(ctx, fmt.Sprintf("q:%d", i), "job").Err())
				}
				p := newFeedProvider(t, "redis-idle-"+mode, providertest.NewTimedHub(), map[string]any{
					"address": srv.addr(), "feed": mode, "feedReconcileInterval": "5s",
					"metrics": []map[string]any{{"name": "redis_queues", "type": "listLength", "keyPattern": "q:*", "labelsFrom": "^q:(?P<queue>.+)$"}},
				})
				if _, err := query(ctx, p, "redis_queues"); err != nil {
					t.Fatal(err)
				}
				if mode == "keyspace" {
					established(t, p, "redis_queues")
				}
				before, began := commandCalls(t, srv), time.Now()
				for i := 0; time.Since(began) < idle; i++ {
					sel := labels.SelectorFromSet(labels.Set{"queue": fmt.Sprint(i % lists)})
					if _, err := p.GetExternalMetric(ctx, "default", sel, providers.ExternalMetricInfo{Metric: "redis_queues"}); err != nil {
						t.Fatal(err)
					}
					time.Sleep(150 * time.Millisecond)
				}
				elapsed := time.Since(began)
				n, detail := served(before, commandCalls(t, srv))
				rate := float64(n) / elapsed.Seconds()
				t.Logf("feed %s, %d idle lists queried 7/s for %s: %d commands (%.1f/s): %s", mode, lists, elapsed.Round(time.Millisecond), n, rate, detail)
				mu.Lock()
				rates[mode] = rate
				mu.Unlock()
			})
		}
	})
	if t.Failed() {
		return
	}
	t.Logf("Redis commands per second, %d idle subscribed lists: poll %.1f, keyspace %.1f (%.1f%%)", lists, rates["poll"], rates["keyspace"], 100*rates["keyspace"]/rates["poll"])
	// Two reconciliations (SCAN + 100 LLEN + CONFIG GET each) against ten
	// polls: well under half, whatever the machine's speed.
	if rates["keyspace"] >= rates["poll"]/2 {
		t.Errorf("keyspace feed: %.1f commands/s, polling %.1f: want well under half", rates["keyspace"], rates["poll"])
	}
}

// TestRealServerKeyspaceCatchesUp (c): a write whose notification is lost
// (notifications turned off for it) is published by the reconciliation,
// which also sets the notifications back; a killed pub/sub connection is
// reconnected, and writes meanwhile and after are published.
func TestRealServerKeyspaceCatchesUp(t *testing.T) {
	needBinaries(t)
	t.Parallel()
	srv := startServer(t, "notify-keyspace-events Kgl")
	ctx := context.Background()
	admin := goredis.NewClient(&goredis.Options{Addr: srv.addr()})
	defer admin.Close()
	hub := providertest.NewTimedHub()
	p := newFeedProvider(t, "redis-catchup", hub, map[string]any{
		"address": srv.addr(), "feed": "keyspace", "feedReconcileInterval": "2s", "setNotifyKeyspaceEvents": true,
		"metrics": []map[string]any{{"name": "redis_jobs_length", "type": "listLength", "key": "jobs"}},
	})
	if _, err := query(ctx, p, "redis_jobs_length"); err != nil {
		t.Fatal(err)
	}
	established(t, p, "redis_jobs_length")
	hub.Drain()

	srv.cli("CONFIG", "SET", "notify-keyspace-events", "")
	start := time.Now()
	must(t, admin.LPush(ctx, "jobs", "missed").Err())
	missed := awaitChange(t, hub, start, "redis_jobs_length", "key", "jobs")
	if got, _ := query(ctx, p, "redis_jobs_length"); got[labels.Set{"key": "jobs"}.String()] != 1 {
		t.Errorf("after the reconciliation served %v, want jobs at 1", got)
	}
	waitFor(t, "notify-keyspace-events set again", func() bool {
		f := strings.Fields(srv.cli("CONFIG", "GET", "notify-keyspace-events") + " x")
		return missingFlags(f[1], "Kgl") == ""
	})
	established(t, p, "redis_jobs_length")
	hub.Drain()
	start = time.Now()
	must(t, admin.LPush(ctx, "jobs", "notified").Err())
	notified := awaitChange(t, hub, start, "redis_jobs_length", "key", "jobs")

	srv.cli("CLIENT", "KILL", "TYPE", "pubsub")
	start = time.Now()
	must(t, admin.LPush(ctx, "jobs", "while reconnecting").Err())
	reconnecting := awaitChange(t, hub, start, "redis_jobs_length", "key", "jobs")
	established(t, p, "redis_jobs_length")
	hub.Drain()
	start = time.Now()
	must(t, admin.LPush(ctx, "jobs", "after").Err())
	after := awaitChange(t, hub, start, "redis_jobs_length", "key", "jobs")
	if got, _ := query(ctx, p, "redis_jobs_length"); got[labels.Set{"key": "jobs"}.String()] != 4 {
		t.Errorf("at the end served %v, want jobs at 4", got)
	}
	t.Logf("LPUSH → change: notification lost %s (reconciliation every 2s), notified %s, pub/sub connection killed %s, after reconnecting %s",
		missed.Round(time.Millisecond), notified.Round(time.Millisecond), reconnecting.Round(time.Millisecond), after.Round(time.Millisecond))
}

// TestRealServerKeyspaceRefused (d): when the server's notifications are
// off and the adapter may not set them, the keyspace feed fails with an
// error naming notify-keyspace-events, and the provider polls instead: a
// LPUSH is still published.
func TestRealServerKeyspaceRefused(t *testing.T) {
	needBinaries(t)
	t.Parallel()
	const keyspaceRules = "resetkeys %R~* resetchannels &__keyspace@0__:* -@all +llen +xlen +xinfo|groups +scan +type +subscribe +psubscribe +unsubscribe +punsubscribe +ping"
	for _, tc := range []struct {
		name, user, notify string
		setNotify          bool
		want               []string
	}{
		{"CONFIG GET refused", "noconfig", "", true, []string{"notify-keyspace-events", "+config|get", "NOPERM"}},
		{"flags off, not allowed to set", "cfgget", "", false, []string{`notify-keyspace-events is ""`, `without "Kgl"`, "setNotifyKeyspaceEvents"}},
		{"flags off, CONFIG SET refused", "cfgget", "", true, []string{"CONFIG SET notify-keyspace-events", "+config|set", "NOPERM"}},
		// flags on, but its channels allow every key's SUBSCRIBE, not the
		// pattern's PSUBSCRIBE
		{"PSUBSCRIBE refused", "cfgget", "Kgl", false, []string{"PSUBSCRIBE is checked against it literally", "&__keyspace@0__:<keyPattern>", "NOPERM"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := startServer(t,
				"user noconfig on >"+aclPassword+" "+keyspaceRules,
				"user cfgget on >"+aclPassword+" "+keyspaceRules+" +config|get",
				fmt.Sprintf("notify-keyspace-events %q", tc.notify))
			ctx := context.Background()
			admin := goredis.NewClient(&goredis.Options{Addr: srv.addr()})
			defer admin.Close()
			pwFile := filepath.Join(t.TempDir(), "password")
			must(t, os.WriteFile(pwFile, []byte(aclPassword), 0o600))
			hub := providertest.NewTimedHub()
			name := "redis-refused-" + strings.NewReplacer(" ", "-", ",", "").Replace(tc.name)
			p := newFeedProvider(t, name, hub, map[string]any{
				"address": srv.addr(), "username": tc.user, "password": map[string]string{"file": pwFile},
				"feed": "keyspace", "setNotifyKeyspaceEvents": tc.setNotify,
				"metrics": []map[string]any{{"name": "redis_jobs_length", "type": "listLength", "keyPattern": "jobs*"}},
			})
			must(t, admin.LPush(ctx, "jobs", "first").Err())
			if _, err := query(ctx, p, "redis_jobs_length"); err != nil {
				t.Fatal(err)
			}
			var failure error
			waitFor(t, "the keyspace feed's failure", func() bool {
				_, failure = p.keyspace.state("redis_jobs_length")
				return failure != nil
			})
			for _, w := range tc.want {
				if !strings.Contains(failure.Error(), w) {
					t.Errorf("failure %q, want it to contain %q", failure, w)
				}
			}
			if v, err := testutil.GetGaugeMetricValue(keyspaceFailed.WithLabelValues(name)); err != nil || v != 1 {
				t.Errorf("metricscale_adapter_feed_keyspace_failed{provider=%s} = %v (%v), want 1", name, v, err)
			}
			if strings.Contains(failure.Error(), aclPassword) {
				t.Errorf("the failure echoes the password: %q", failure)
			}
			if got := strings.TrimSpace(strings.TrimPrefix(srv.cli("CONFIG", "GET", "notify-keyspace-events"), "notify-keyspace-events")); missingFlags(got, tc.notify) != "" || missingFlags(tc.notify, got) != "" {
				t.Errorf("notify-keyspace-events changed from %q to %q", tc.notify, got)
			}
			hub.Drain()
			start := time.Now()
			must(t, admin.LPush(ctx, "jobs", "a", "b").Err())
			lat := awaitChange(t, hub, start, "redis_jobs_length", "key", "jobs")
			t.Logf("polling instead (%v): LPUSH → change %s", failure, lat.Round(time.Millisecond))
		})
	}
}

// audienceHub is a hub whose subscribers come and go.
type audienceHub struct {
	*providertest.TimedHub
	n atomic.Int32
}

func (h *audienceHub) Subscribers() int { return int(h.n.Load()) }

// TestRealServerKeyspaceUnsubscribe: the pub/sub connection exists while
// the change feed has a subscriber reading a notified metric, and is
// closed once it has none.
func TestRealServerKeyspaceUnsubscribe(t *testing.T) {
	needBinaries(t)
	t.Parallel()
	srv := startServer(t, "notify-keyspace-events Kgl")
	ctx := context.Background()
	hub := &audienceHub{TimedHub: providertest.NewTimedHub()}
	hub.n.Store(1)
	p := newFeedProvider(t, "redis-unsubscribe", hub, map[string]any{
		"address": srv.addr(), "feed": "keyspace",
		"metrics": []map[string]any{{"name": "redis_jobs_length", "type": "listLength", "keyPattern": "jobs:*"}},
	})
	clients := func() string { return srv.cli("CLIENT", "LIST", "TYPE", "pubsub") }
	if c := clients(); c != "" {
		t.Fatalf("a pub/sub connection before any query: %s", c)
	}
	if _, err := query(ctx, p, "redis_jobs_length"); err != nil && !strings.Contains(err.Error(), "redis_jobs_length") {
		t.Fatal(err)
	}
	established(t, p, "redis_jobs_length")
	if c := clients(); !strings.Contains(c, "psub=1") {
		t.Errorf("pub/sub connections while watched: %q, want one with one pattern", c)
	}
	hub.n.Store(0)
	waitFor(t, "the pub/sub connection closed after the last subscriber left", func() bool { return clients() == "" })
	if ok, _ := p.keyspace.state("redis_jobs_length"); ok {
		t.Error("the metric is still served from notifications with no connection")
	}
}

// TestRealServerKeyspaceLeastPrivilege: the ACL rules the README gives for
// feed: keyspace (no CONFIG SET) are enough, on a server whose config has
// the notifications on: the channel pattern of a keyPattern listed as is.
func TestRealServerKeyspaceLeastPrivilege(t *testing.T) {
	needBinaries(t)
	t.Parallel()
	srv := startServer(t, "notify-keyspace-events Kgl",
		"user keyspace on >"+aclPassword+" resetkeys %R~* resetchannels &__keyspace@0__:jobs:* -@all +llen +xlen +xinfo|groups +scan +type +subscribe +psubscribe +unsubscribe +punsubscribe +ping +config|get")
	ctx := context.Background()
	admin := goredis.NewClient(&goredis.Options{Addr: srv.addr()})
	defer admin.Close()
	pwFile := filepath.Join(t.TempDir(), "password")
	must(t, os.WriteFile(pwFile, []byte(aclPassword), 0o600))
	hub := providertest.NewTimedHub()
	must(t, admin.RPush(ctx, "jobs:a", "x").Err())
	p := newFeedProvider(t, "redis-acl", hub, map[string]any{
		"address": srv.addr(), "username": "keyspace", "password": map[string]string{"file": pwFile}, "feed": "keyspace",
		"metrics": []map[string]any{{"name": "redis_jobs_length", "type": "listLength", "keyPattern": "jobs:*"}},
	})
	if _, err := query(ctx, p, "redis_jobs_length"); err != nil {
		t.Fatal(err)
	}
	established(t, p, "redis_jobs_length")
	hub.Drain()
	start := time.Now()
	must(t, admin.LPush(ctx, "jobs:b", "y").Err())
	lat := awaitChange(t, hub, start, "redis_jobs_length", "key", "jobs:b")
	got, err := query(ctx, p, "redis_jobs_length")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Errorf("served %v, want jobs:a and jobs:b", got)
	}
	t.Logf("least-privilege user: LPUSH to a new key → change %s", lat.Round(time.Millisecond))
}

// TestRealServerKeyspaceBusyList: a list written every 20ms (a producer
// and its workers) is read at most once per feedPollInterval, as polling
// would, and its changes are still published.
func TestRealServerKeyspaceBusyList(t *testing.T) {
	needBinaries(t)
	t.Parallel()
	srv := startServer(t, "notify-keyspace-events Kgl")
	ctx := context.Background()
	admin := goredis.NewClient(&goredis.Options{Addr: srv.addr()})
	defer admin.Close()
	hub := providertest.NewTimedHub()
	p := newFeedProvider(t, "redis-busy", hub, map[string]any{
		"address": srv.addr(), "feed": "keyspace",
		"metrics": []map[string]any{{"name": "redis_jobs_length", "type": "listLength", "key": "jobs"}},
	})
	if _, err := query(ctx, p, "redis_jobs_length"); err != nil {
		t.Fatal(err)
	}
	established(t, p, "redis_jobs_length")
	hub.Drain()
	before, began := commandCalls(t, srv), time.Now()
	writes := 0
	for time.Since(began) < 5*time.Second {
		must(t, admin.LPush(ctx, "jobs", writes).Err())
		writes++
		time.Sleep(20 * time.Millisecond)
	}
	// the last write is published too (at most an interval later)
	final := int64(writes)
	waitFor(t, "the last write published and served", func() bool {
		got, err := query(ctx, p, "redis_jobs_length")
		return err == nil && got[labels.Set{"key": "jobs"}.String()] == float64(final)
	})
	elapsed := time.Since(began)
	llen := commandCalls(t, srv)["llen"] - before["llen"]
	changes := len(hub.C)
	t.Logf("%d LPUSH in %s: %d LLEN, %d changes published", writes, elapsed.Round(time.Millisecond), llen, changes)
	if limit := int(elapsed/time.Second) + 2; llen > limit {
		t.Errorf("%d LLEN for a list written every 20ms over %s, want at most one per feedPollInterval (%d)", llen, elapsed.Round(time.Millisecond), limit)
	}
	if changes == 0 {
		t.Error("no change published while the list grew")
	}
}
