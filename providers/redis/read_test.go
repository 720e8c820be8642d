package redis

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/metricscale/metricscale/providers"
)

// build makes a provider over fake from raw options.
func build(t *testing.T, raw string, fake *fakeClient) (*Provider, *clocktesting.FakePassiveClock) {
	t.Helper()
	s, err := decodeOptions("options", []byte(raw))
	if err != nil {
		t.Fatalf("options: %v", err)
	}
	clk := clocktesting.NewFakePassiveClock(time.Now())
	p, err := newProvider("redis-test", s, fake, clk, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p, clk
}

// values reads metric from namespace ns as "label=value,..." → value.
func values(t *testing.T, p *Provider, ns, metric, selector string) (map[string]float64, error) {
	t.Helper()
	sel, err := labels.Parse(selector)
	if err != nil {
		t.Fatal(err)
	}
	list, err := p.GetExternalMetric(context.Background(), ns, sel, providers.ExternalMetricInfo{Metric: metric})
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, it := range list.Items {
		out[labels.Set(it.MetricLabels).String()] = it.Value.AsApproximateFloat64()
	}
	return out, nil
}

func wantValues(t *testing.T, got map[string]float64, err error, want map[string]float64) {
	t.Helper()
	if err != nil {
		t.Fatalf("error %v, want %v", err, want)
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("series %s = %v (present %v), want %v; all: %v", k, g, ok, v, got)
		}
	}
}

func wantReason(t *testing.T, err error, reason providers.Reason, contains ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s", reason)
	}
	if r := providers.ReasonOf(err); r != reason {
		t.Errorf("reason %s (%v), want %s", r, err, reason)
	}
	for _, c := range contains {
		if !strings.Contains(err.Error(), c) {
			t.Errorf("error %q does not contain %q", err, c)
		}
	}
}

const streamMetrics = `{"address":"h:1","metrics":[
 {"name":"events_length","type":"streamLength","key":"events"},
 {"name":"events_pending","type":"streamPending","key":"events"},
 {"name":"events_lag","type":"streamLag","key":"events"},
 {"name":"events_backlog","type":"streamBacklog","key":"events"},
 {"name":"events_backlog_workers","type":"streamBacklog","key":"events","group":"workers"}]}`

func TestStreamGroups(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	fake.streams["events"] = fakeStream{length: 50, groups: []Group{
		{Name: "workers", Pending: 3, Lag: lag(7), LagReported: true},
		{Name: "audit", Pending: 0, Lag: lag(50), LagReported: true},
	}}
	p, _ := build(t, streamMetrics, fake)
	for _, tc := range []struct {
		metric, sel string
		want        map[string]float64
	}{
		{"events_length", "", map[string]float64{"stream=events": 50}},
		{"events_pending", "", map[string]float64{"group=workers,stream=events": 3, "group=audit,stream=events": 0}},
		{"events_lag", "", map[string]float64{"group=workers,stream=events": 7, "group=audit,stream=events": 50}},
		{"events_backlog", "", map[string]float64{"group=workers,stream=events": 10, "group=audit,stream=events": 50}},
		{"events_backlog", "group=audit", map[string]float64{"group=audit,stream=events": 50}},
		{"events_backlog_workers", "", map[string]float64{"group=workers,stream=events": 10}},
	} {
		got, err := values(t, p, "default", tc.metric, tc.sel)
		wantValues(t, got, err, tc.want)
	}
	// five metrics, one TTL: one pipeline with XLEN and one XINFO GROUPS
	if n := fake.pipelines.Load(); n != 1 {
		t.Errorf("%d pipelines, want 1", n)
	}
	if len(fake.lastCmds) != 2 {
		t.Errorf("pipeline %v, want XLEN and XINFO GROUPS of events once each", fake.lastCmds)
	}
}

func TestStreamLagCappedAtLength(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	// trimmed to 3 entries after the group read 2 of 10: Redis says lag 8
	fake.streams["events"] = fakeStream{length: 3, groups: []Group{
		{Name: "workers", Pending: 2, Lag: lag(8), LagReported: true},
		{Name: "audit", Pending: 0, Lag: lag(1), LagReported: true},
	}}
	p, _ := build(t, streamMetrics, fake)
	got, err := values(t, p, "default", "events_lag", "")
	wantValues(t, got, err, map[string]float64{"group=workers,stream=events": 3, "group=audit,stream=events": 1})
	got, err = values(t, p, "default", "events_backlog", "")
	wantValues(t, got, err, map[string]float64{"group=workers,stream=events": 5, "group=audit,stream=events": 1})
}

func TestStreamLagUnknown(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		group Group
		want  string
	}{
		{"NULL lag", Group{Name: "workers", Pending: 2, LastDeliveredID: "5-0", LagReported: true}, `group "workers": Redis reports the lag as unknown (NULL)`},
		{"Redis 6", Group{Name: "workers", Pending: 2}, "from Redis 7.0 on"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := newFake(t)
			fake.streams["events"] = fakeStream{length: 9, groups: []Group{tc.group}}
			p, _ := build(t, streamMetrics, fake)
			for _, m := range []string{"events_lag", "events_backlog", "events_backlog_workers"} {
				_, err := values(t, p, "default", m, "")
				wantReason(t, err, providers.ReasonBackend, tc.want, `"redis-test"`)
			}
			// pending and length do not need the lag
			got, err := values(t, p, "default", "events_pending", "")
			wantValues(t, got, err, map[string]float64{"group=workers,stream=events": 2})
			got, err = values(t, p, "default", "events_length", "")
			wantValues(t, got, err, map[string]float64{"stream=events": 9})
		})
	}
}

func TestMissingKeys(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	p, _ := build(t, `{"address":"h:1","metrics":[
	 {"name":"jobs","type":"listLength","key":"jobs"},
	 {"name":"events_length","type":"streamLength","key":"events"},
	 {"name":"events_backlog","type":"streamBacklog","key":"events"},
	 {"name":"other_backlog","type":"streamBacklog","key":"other","group":"nope"}]}`, fake)
	fake.streams["other"] = fakeStream{length: 1, groups: []Group{{Name: "workers", Lag: lag(1), LagReported: true}}}
	// Redis deletes an empty list: a missing one is an empty queue
	got, err := values(t, p, "default", "jobs", "")
	wantValues(t, got, err, map[string]float64{"key=jobs": 0})
	got, err = values(t, p, "default", "events_length", "")
	wantValues(t, got, err, map[string]float64{"stream=events": 0})
	// a missing stream, or group, has no series: 404 naming the metric
	_, err = values(t, p, "default", "events_backlog", "")
	wantReason(t, err, providers.ReasonNoValue, "events_backlog")
	_, err = values(t, p, "default", "other_backlog", "")
	wantReason(t, err, providers.ReasonNoValue, "other_backlog")
}

func TestListPattern(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	fake.lists["jobs:team-a:orders"] = 4
	fake.lists["jobs:team-a:mails"] = 1
	fake.lists["jobs:team-b:orders"] = 6
	fake.lists["jobs:odd"] = 100 // does not match labelsFrom: left out
	fake.lists["other"] = 9
	fake.streams["jobs:stream"] = fakeStream{length: 3} // not a list: SCAN TYPE leaves it out
	p, _ := build(t, `{"address":"h:1","metrics":[
	 {"name":"jobs","type":"listLength","keyPattern":"jobs:*","labelsFrom":"^jobs:(?P<namespace>[^:]+):(?P<queue>.+)$"},
	 {"name":"all_jobs","type":"listLength","keyPattern":"jobs:*","labels":{"tier":"gold"}}]}`, fake)
	got, err := values(t, p, "team-a", "jobs", "")
	wantValues(t, got, err, map[string]float64{
		"key=jobs:team-a:orders,namespace=team-a,queue=orders": 4,
		"key=jobs:team-a:mails,namespace=team-a,queue=mails":   1,
	})
	got, err = values(t, p, "team-b", "jobs", "queue=orders")
	wantValues(t, got, err, map[string]float64{"key=jobs:team-b:orders,namespace=team-b,queue=orders": 6})
	got, err = values(t, p, "x", "all_jobs", "")
	wantValues(t, got, err, map[string]float64{
		"key=jobs:team-a:orders,tier=gold": 4, "key=jobs:team-a:mails,tier=gold": 1,
		"key=jobs:team-b:orders,tier=gold": 6, "key=jobs:odd,tier=gold": 100,
	})
	// both metrics scan the same pattern once, and LLEN each key once
	if s, n := fake.scans.Load(), fake.pipelines.Load(); s != 1 || n != 1 {
		t.Errorf("%d scans and %d pipelines, want 1 and 1", s, n)
	}
	if len(fake.lastCmds) != 4 {
		t.Errorf("pipeline %v, want one LLEN per list", fake.lastCmds)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	pwFile := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pwFile, []byte("hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	raw := `{"address":"h:1","password":{"file":"` + pwFile + `"},"metrics":[
	 {"name":"jobs","type":"listLength","key":"jobs"},
	 {"name":"events","type":"listLength","key":"events"},
	 {"name":"scanned","type":"listLength","keyPattern":"q:*"}]}`

	t.Run("command error fails only its metric", func(t *testing.T) {
		fake := newFake(t)
		fake.lists["jobs"] = 3
		fake.streams["events"] = fakeStream{length: 1}
		fake.scanErr["q:*"] = errors.New("NOPERM this user has no permissions to run the 'scan' command")
		p, _ := build(t, raw, fake)
		_, err := values(t, p, "default", "events", "")
		wantReason(t, err, providers.ReasonBackend, `LLEN "events"`, "WRONGTYPE", `"redis-test"`)
		_, err = values(t, p, "default", "scanned", "")
		wantReason(t, err, providers.ReasonBackend, "NOPERM")
		got, err := values(t, p, "default", "jobs", "")
		wantValues(t, got, err, map[string]float64{"key=jobs": 3})
	})
	t.Run("down server fails every metric, redacted, and recovers", func(t *testing.T) {
		fake := newFake(t)
		fake.lists["jobs"] = 3
		fake.tripErr = errors.New("dial tcp: connection refused (auth hunter2)")
		p, clk := build(t, raw, fake)
		for _, m := range []string{"jobs", "events", "scanned"} {
			_, err := values(t, p, "default", m, "")
			wantReason(t, err, providers.ReasonBackend, "connection refused", `"redis-test"`)
			if err != nil && strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the error shows the password: %v", err)
			}
		}
		fake.mu.Lock()
		fake.tripErr = nil
		fake.mu.Unlock()
		// the failure is cached for the TTL, then the next query reads again
		_, err := values(t, p, "default", "jobs", "")
		wantReason(t, err, providers.ReasonBackend)
		clk.SetTime(clk.Now().Add(ondemandTTL(p)))
		got, err := values(t, p, "default", "jobs", "")
		wantValues(t, got, err, map[string]float64{"key=jobs": 3})
	})
}

func ondemandTTL(p *Provider) time.Duration { return p.settings.ttl }

func TestBatchesAndCache(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	fake.lists["a"], fake.lists["b"], fake.lists["c"] = 1, 2, 3
	p, clk := build(t, `{"address":"h:1","cacheTTL":"2s","metrics":[
	 {"name":"a","type":"listLength","key":"a"},
	 {"name":"b","type":"listLength","key":"b"},
	 {"name":"c","type":"listLength","key":"c","cacheTTL":"10s"}]}`, fake)
	read := func(m string) float64 {
		got, err := values(t, p, "default", m, "")
		if err != nil {
			t.Fatal(err)
		}
		return got["key="+m]
	}
	if read("a") != 1 || read("b") != 2 {
		t.Fatal("wrong values")
	}
	if n := fake.pipelines.Load(); n != 1 {
		t.Errorf("a and b (same TTL): %d pipelines, want 1", n)
	}
	if read("c") != 3 {
		t.Fatal("wrong value")
	}
	if n := fake.pipelines.Load(); n != 2 {
		t.Errorf("c (own TTL): %d pipelines, want 2", n)
	}
	fake.mu.Lock()
	fake.lists["a"], fake.lists["c"] = 10, 30
	fake.mu.Unlock()
	for range 100 {
		if read("a") != 1 {
			t.Fatal("a changed within its TTL")
		}
	}
	clk.SetTime(clk.Now().Add(2 * time.Second))
	if v := read("a"); v != 10 {
		t.Errorf("a after its TTL = %v, want 10", v)
	}
	if v := read("c"); v != 3 {
		t.Errorf("c within its 10s TTL = %v, want the cached 3", v)
	}
	if n := fake.pipelines.Load(); n != 3 {
		t.Errorf("%d pipelines, want 3", n)
	}
}

func TestNewDoesNotConnect(t *testing.T) {
	t.Parallel()
	// nothing listens on port 1; New and discovery must not care
	raw := `{"address":"127.0.0.1:1","password":{"file":"/nonexistent/password"},"metrics":[{"name":"jobs","type":"listLength","key":"jobs"}]}`
	start := time.Now()
	pp, err := Factory{}.New("r", []byte(raw), providers.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	p := pp.(*Provider)
	defer p.Close()
	if l := p.ListAllExternalMetrics(); len(l) != 1 || l[0].Metric != "jobs" {
		t.Errorf("discovery: %v", l)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("New and discovery took %s", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = p.GetExternalMetric(ctx, "default", labels.Everything(), providers.ExternalMetricInfo{Metric: "jobs"})
	wantReason(t, err, providers.ReasonBackend, `"r"`, "connection refused")
}
