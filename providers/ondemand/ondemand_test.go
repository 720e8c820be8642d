package ondemand

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/metricscale/metricscale/providers"
)

func info(m string) providers.ExternalMetricInfo { return providers.ExternalMetricInfo{Metric: m} }

func TestNewRefusesBadMetrics(t *testing.T) {
	t.Parallel()
	read := func(context.Context) ([]Series, error) { return nil, nil }
	for _, tc := range []struct {
		name    string
		metrics []Metric
		want    string
	}{
		{"no name", []Metric{{Read: read}}, "metrics[0]: name is empty"},
		{"no read", []Metric{{Name: "a"}}, "metrics[0] (a): no read function"},
		{"twice", []Metric{{Name: "a", Read: read}, {Name: "a", Read: read}}, `metrics[1]: metric "a" is configured twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := New("q", tc.metrics, Options{})
			if err == nil || err.Error() != tc.want {
				t.Fatalf("New() error = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestGetExternalMetric(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	series := []Series{
		{Labels: map[string]string{"queue": "orders"}, Value: 12},
		{Labels: map[string]string{"queue": "mail"}, Value: 3.5},
		{Labels: map[string]string{"queue": "other", NamespaceLabel: "b"}, Value: 1},
	}
	p, err := New("rabbit", []Metric{
		{Name: "depth", Labels: map[string]string{"vhost": "main"}, Read: func(context.Context) ([]Series, error) { return series, nil }},
		{Name: "scoped", Namespace: "a", Read: func(context.Context) ([]Series, error) { return series, nil }},
	}, Options{Clock: clk, CacheTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.ListAllExternalMetrics(); len(got) != 2 || got[0].Metric != "depth" || got[1].Metric != "scoped" {
		t.Errorf("ListAllExternalMetrics() = %v", got)
	}
	for _, tc := range []struct {
		name, ns, metric, sel string
		want                  map[string]int64 // queue → milli-value
		wantCode              int
		wantMsg               string
	}{
		{name: "all from a", ns: "a", metric: "depth", want: map[string]int64{"orders": 12000, "mail": 3500}},
		{name: "namespaced series", ns: "b", metric: "depth", want: map[string]int64{"orders": 12000, "mail": 3500, "other": 1000}},
		{name: "selector", ns: "a", metric: "depth", sel: "queue in (orders,x)", want: map[string]int64{"orders": 12000}},
		{name: "static label", ns: "a", metric: "depth", sel: "vhost=main,queue!=orders", want: map[string]int64{"mail": 3500}},
		{name: "nothing matches", ns: "a", metric: "depth", sel: "queue=nope", wantCode: 404, wantMsg: `metric depth for namespace "a" with selector "queue=nope"`},
		{name: "scoped metric, its namespace", ns: "a", metric: "scoped", want: map[string]int64{"orders": 12000, "mail": 3500, "other": 1000}},
		{name: "scoped metric, another namespace", ns: "b", metric: "scoped", wantCode: 404, wantMsg: "scoped"},
		{name: "unknown", ns: "a", metric: "nope", wantCode: 404, wantMsg: "nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sel := labels.Everything()
			if tc.sel != "" {
				if sel, err = labels.Parse(tc.sel); err != nil {
					t.Fatal(err)
				}
			}
			list, err := p.GetExternalMetric(context.Background(), tc.ns, sel, info(tc.metric))
			if tc.wantCode != 0 {
				var pe *providers.Error
				if !errors.As(err, &pe) || pe.Code() != tc.wantCode || !strings.Contains(err.Error(), tc.wantMsg) {
					t.Fatalf("error = %v, want %d containing %q", err, tc.wantCode, tc.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int64{}
			for _, it := range list.Items {
				if it.MetricName != tc.metric || !it.Timestamp.Time.Equal(clk.Now()) {
					t.Errorf("item %+v: want metric %s at %s", it, tc.metric, clk.Now())
				}
				got[it.MetricLabels["queue"]] = it.Value.MilliValue()
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for q, v := range tc.want {
				if got[q] != v {
					t.Errorf("queue %s = %d, want %d (all: %v)", q, got[q], v, got)
				}
			}
		})
	}
}

// TestCacheAndCoalescing: one read per TTL whatever the number of queries,
// concurrent queries share one read, and a failure is a 503 that is never
// answered by an older value.
func TestCacheAndCoalescing(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0))
	var value atomic.Int64
	value.Store(5)
	var fail atomic.Bool
	release := make(chan struct{})
	var gate atomic.Bool
	p, err := New("redis", []Metric{{Name: "len", Read: func(ctx context.Context) ([]Series, error) {
		if gate.Load() {
			<-release
		}
		if fail.Load() {
			return nil, errors.New("dial tcp 127.0.0.1:6379: connection refused")
		}
		return []Series{{Labels: map[string]string{"key": "jobs"}, Value: float64(value.Load())}}, nil
	}}}, Options{Clock: clk, CacheTTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	get := func() (int64, error) {
		l, err := p.GetExternalMetric(context.Background(), "default", nil, info("len"))
		if err != nil {
			return 0, err
		}
		return l.Items[0].Value.Value(), nil
	}

	// 50 concurrent queries while the read is held: one call.
	gate.Store(true)
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if v, err := get(); err != nil || v != 5 {
				errs <- errors.Join(err, errors.New("wrong value"))
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	gate.Store(false)
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if c := p.BackendCalls(); c != 1 {
		t.Fatalf("50 concurrent queries made %d backend calls, want 1", c)
	}

	// Within the TTL: cached, even though the backend changed.
	value.Store(7)
	for range 1000 {
		if v, err := get(); err != nil || v != 5 {
			t.Fatalf("cached query = %d, %v; want 5", v, err)
		}
	}
	if c := p.BackendCalls(); c != 1 {
		t.Fatalf("1,000 queries within the TTL made %d backend calls, want 1", c)
	}

	// After it: a new read.
	clk.Step(2 * time.Second)
	if v, err := get(); err != nil || v != 7 {
		t.Fatalf("after the TTL = %d, %v; want 7", v, err)
	}

	// A failing backend: 503 naming the provider, not the cached 7.
	fail.Store(true)
	clk.Step(2 * time.Second)
	_, err = get()
	var pe *providers.Error
	if !errors.As(err, &pe) || pe.Code() != 503 || !strings.Contains(err.Error(), `"redis"`) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("backend down: error = %v, want a 503 naming the provider and the reason", err)
	}
	if p.Health() == nil {
		t.Error("Health() = nil after a failed read")
	}
	calls := p.BackendCalls()
	if _, err := get(); err == nil {
		t.Fatal("failed read not cached for the TTL: got a value")
	}
	if p.BackendCalls() != calls {
		t.Error("a failed read is retried within its TTL: a down broker would be hammered")
	}

	// Recovery: the next read after the TTL.
	fail.Store(false)
	clk.Step(2 * time.Second)
	if v, err := get(); err != nil || v != 7 {
		t.Fatalf("after recovery = %d, %v; want 7", v, err)
	}
	if err := p.Health(); err != nil {
		t.Errorf("Health() = %v after a good read", err)
	}
}

// TestHungBackend: a query ends with its context, a 503, while the read
// hangs; the read itself is bounded by the query's deadline.
func TestHungBackend(t *testing.T) {
	t.Parallel()
	readDone := make(chan error, 1)
	p, err := New("nats", []Metric{{Name: "pending", Read: func(ctx context.Context) ([]Series, error) {
		<-ctx.Done()
		readDone <- ctx.Err()
		return nil, ctx.Err()
	}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = p.GetExternalMetric(ctx, "default", nil, info("pending"))
	if providers.ReasonOf(err) != providers.ReasonBackend || !strings.Contains(err.Error(), `"nats"`) {
		t.Fatalf("error = %v, want a backend error naming the provider", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("query took %s with a 100ms context", took)
	}
	select {
	case err := <-readDone:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("read ended with %v, want its deadline", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("the hung read outlived the query's deadline")
	}
}

// TestCallerCancelDoesNotFailOthers: a caller that gives up does not cancel
// the read another caller waits for.
func TestCallerCancelDoesNotFailOthers(t *testing.T) {
	t.Parallel()
	l := NewLoader[int](0, time.Minute, nil)
	started, release := make(chan struct{}), make(chan struct{})
	load := func(ctx context.Context) (int, error) {
		close(started)
		select {
		case <-release:
			return 42, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	first, cancelFirst := context.WithCancel(context.Background())
	firstErr := make(chan error, 1)
	go func() { _, err := l.Get(first, "k", load); firstErr <- err }()
	<-started
	second := make(chan int, 1)
	go func() {
		v, _ := l.Get(context.Background(), "k", func(context.Context) (int, error) { return -1, nil })
		second <- v
	}()
	time.Sleep(20 * time.Millisecond) // let the second caller join
	cancelFirst()
	if err := <-firstErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("first caller: %v, want canceled", err)
	}
	close(release)
	if v := <-second; v != 42 {
		t.Fatalf("second caller got %d, want the shared read's 42", v)
	}
}

func TestTooManyItems(t *testing.T) {
	t.Parallel()
	p, err := New("pg", []Metric{{Name: "rows", Read: func(context.Context) ([]Series, error) {
		return []Series{{Labels: map[string]string{"q": "a"}}, {Labels: map[string]string{"q": "b"}}, {Labels: map[string]string{"q": "c"}}}, nil
	}}}, Options{MaxItems: 2})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.GetExternalMetric(context.Background(), "x", nil, info("rows"))
	var pe *providers.Error
	if !errors.As(err, &pe) || pe.Code() != 400 {
		t.Fatalf("3 series with MaxItems 2: error = %v, want a 400", err)
	}
}

func TestBadValuesRefused(t *testing.T) {
	t.Parallel()
	huge := 1e308
	for _, tc := range []struct {
		name          string
		series        []Series
		allowNegative bool
		sel           string
		want          string // in the 503; "" when served
	}{
		{name: "negative count", series: []Series{{Labels: map[string]string{"queue": "jobs"}, Value: -5}}, want: `series queue=jobs: refused, it is negative`},
		{name: "negative beside a good one", series: []Series{{Labels: map[string]string{"queue": "a"}, Value: 10}, {Labels: map[string]string{"queue": "b"}, Value: -4}}, want: "queue=b"},
		{name: "negative, not selected", series: []Series{{Labels: map[string]string{"queue": "a"}, Value: 10}, {Labels: map[string]string{"queue": "b"}, Value: -4}}, sel: "queue=a"},
		{name: "negative, allowed", series: []Series{{Labels: map[string]string{"queue": "jobs"}, Value: -5}}, allowNegative: true},
		{name: "overflowed sum", series: []Series{{Labels: map[string]string{"queue": "jobs"}, Value: huge + huge}}, allowNegative: true, want: "not finite"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := New("rabbit", []Metric{{Name: "depth", AllowNegative: tc.allowNegative, Read: func(context.Context) ([]Series, error) { return tc.series, nil }}}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			sel := labels.Everything()
			if tc.sel != "" {
				if sel, err = labels.Parse(tc.sel); err != nil {
					t.Fatal(err)
				}
			}
			got, err := p.GetExternalMetric(context.Background(), "a", sel, info("depth"))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if len(got.Items) == 0 {
					t.Fatal("no items")
				}
				return
			}
			var pe *providers.Error
			if !errors.As(err, &pe) || pe.Code() != 503 {
				t.Fatalf("GetExternalMetric() = %v, %v; want a 503", got, err)
			}
			for _, w := range []string{`"rabbit"`, "depth", tc.want} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestSeriesView: the view a query matches selectors against, and the key
// the feed indexes a series by, read the labels the query serves
// (seriesLabels), precedence included.
func TestSeriesView(t *testing.T) {
	t.Parallel()
	s := Series{Labels: map[string]string{"queue": "orders", "vhost": "backend", NamespaceLabel: "b", "empty": ""}}
	for _, tc := range []struct {
		m    *Metric
		want map[string]string
	}{
		{&Metric{Name: "plain"}, map[string]string{"queue": "orders", "vhost": "backend", NamespaceLabel: "b", "empty": ""}},
		{&Metric{Name: "static", Labels: map[string]string{"vhost": "main", "tier": "gold"}},
			map[string]string{"queue": "orders", "vhost": "main", "tier": "gold", NamespaceLabel: "b", "empty": ""}},
		{&Metric{Name: "scoped", Namespace: "a", Labels: map[string]string{NamespaceLabel: "c"}},
			map[string]string{"queue": "orders", "vhost": "backend", NamespaceLabel: "a", "empty": ""}},
	} {
		m := tc.m
		served := m.seriesLabels(s)
		if !maps.Equal(served, tc.want) {
			t.Errorf("%s: served labels %v, want %v", m.Name, served, tc.want)
		}
		view := &seriesView{m: m, s: &s}
		for _, k := range []string{"queue", "vhost", "tier", NamespaceLabel, "empty", "absent"} {
			want, wantOK := served[k]
			if got, ok := view.Lookup(k); got != want || ok != wantOK {
				t.Errorf("%s: Lookup(%q) = %q, %v; served labels have %q, %v", m.Name, k, got, ok, want, wantOK)
			}
			if view.Has(k) != wantOK || view.Get(k) != want {
				t.Errorf("%s: Has/Get(%q) = %v, %q; want %v, %q", m.Name, k, view.Has(k), view.Get(k), wantOK, want)
			}
		}
		var keys seriesKeys
		if got, want := string(keys.of(m, &s)), providers.LabelsKey(served); got != want {
			t.Errorf("%s: key %q, want LabelsKey of the served labels %q", m.Name, got, want)
		}
		for _, sel := range []string{"queue=orders", "vhost=main", "vhost!=main", "tier", "!tier", "empty=", "absent!=x"} {
			parsed, err := labels.Parse(sel)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := parsed.Matches(view), parsed.Matches(labels.Set(served)); got != want {
				t.Errorf("%s: %q matches the view %v, the served labels %v", m.Name, sel, got, want)
			}
		}
	}
}

// BenchmarkSelectOneOfMany: one metric holding many lists (a keyPattern),
// each autoscaler selecting its own, as in the KEDA benchmark.
func BenchmarkSelectOneOfMany(b *testing.B) {
	const n = 1000
	series := make([]Series, n)
	for i := range series {
		series[i] = Series{Labels: map[string]string{"key": fmt.Sprintf("list-%d", i)}, Value: float64(i)}
	}
	p, err := New("redis", []Metric{{Name: "depth", Labels: map[string]string{"db": "0"},
		Read: func(context.Context) ([]Series, error) { return series, nil }}}, Options{CacheTTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	sel, err := labels.Parse("key=list-500")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		list, err := p.GetExternalMetric(context.Background(), "default", sel, info("depth"))
		if err != nil || len(list.Items) != 1 || list.Items[0].Value.Value() != 500 {
			b.Fatalf("%v %v", list, err)
		}
	}
}
