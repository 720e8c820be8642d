package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRateWindow(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	at := func(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }
	type add struct {
		at float64
		n  int
	}
	tests := []struct {
		name   string
		window time.Duration
		adds   []add
		at     float64
		want   float64
	}{
		{"nothing", 10 * time.Second, nil, 30, 0},
		{"first second divides by one", 10 * time.Second, []add{{0.2, 10}}, 0.5, 10},
		{"before a whole window, by the seconds since the start", 10 * time.Second, []add{{0, 4}, {1.5, 4}}, 1.9, 4},
		{"steady 5/s over a full window", 10 * time.Second,
			func() (a []add) {
				for s := range 20 {
					a = append(a, add{float64(s) + 0.5, 5})
				}
				return a
			}(), 19.7, 5},
		{"old seconds leave the window", 10 * time.Second, []add{{0, 100}}, 15, 0},
		{"a reused bucket forgets its old second", 10 * time.Second, []add{{0, 3}, {10, 7}}, 10, 0.7},
		{"the window's oldest second still counts", 10 * time.Second, []add{{11, 3}, {20, 7}}, 20.9, 1},
		{"a sub-second window is one second", 0, []add{{5, 2}, {6, 3}}, 6, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRateWindow(tc.window, t0)
			for _, a := range tc.adds {
				r.add(at(a.at), a.n)
			}
			if got := r.rate(at(tc.at)); got != tc.want {
				t.Errorf("rate at +%gs = %g, want %g", tc.at, got, tc.want)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	b := backoff{min: 100 * time.Millisecond, max: time.Second}
	var got []time.Duration
	for w := time.Duration(0); len(got) < 6; {
		w = b.next(w)
		got = append(got, w)
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second}
	if !slices.Equal(got, want) {
		t.Errorf("waits %v, want %v", got, want)
	}
}

// fakeQueue hands out jobs and fails the calls listed in failAt (1-based).
type fakeQueue struct {
	mu        sync.Mutex
	jobs      int // -1: endless
	failAt    map[int]bool
	calls     int
	consumed  int
	onConsume func(call int) // runs after each call, outside the lock
}

func (q *fakeQueue) Consume(ctx context.Context, n int) (int, error) {
	q.mu.Lock()
	q.calls++
	call := q.calls
	var got int
	var err error
	switch {
	case q.failAt[call]:
		err = errors.New("connection refused")
	case q.jobs < 0:
		got = n
	default:
		got = min(n, q.jobs)
		q.jobs -= got
	}
	q.consumed += got
	q.mu.Unlock()
	if q.onConsume != nil {
		q.onConsume(call)
	}
	return got, err
}

func (q *fakeQueue) Publish(context.Context, int) error { return errors.New("not in the fake") }
func (q *fakeQueue) Depth(context.Context) (int, error) { return 0, errors.New("not in the fake") }
func (q *fakeQueue) Drain(context.Context) error        { return errors.New("not in the fake") }
func (q *fakeQueue) Close() error                       { return nil }

// sleeps records what a worker waited for, without waiting.
type sleeps struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.waits = append(s.waits, d)
	s.mu.Unlock()
	return ctx.Err()
}

func newTestWorker(q *fakeQueue, s *sleeps, concurrency int) (*worker, *metrics) {
	cfg := config{jobTime: 50 * time.Millisecond, concurrency: concurrency, rateWindow: 10 * time.Second}
	now := func() time.Time { return time.Unix(1000, 0) }
	m := newMetrics(prometheus.NewRegistry(), cfg, now)
	return &worker{
		queue: q, jobTime: cfg.jobTime, concurrency: concurrency, idle: 7 * time.Millisecond,
		backoff: backoff{min: 100 * time.Millisecond, max: 300 * time.Millisecond},
		metrics: m, now: now, sleep: s.sleep,
	}, m
}

// The loop stops once its context is done, finishing (and counting) the job it took
// and taking no other.
func TestLoopStopsOnCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := &fakeQueue{jobs: -1}
	q.onConsume = func(call int) {
		if call == 5 {
			cancel()
		}
	}
	var s sleeps
	w, m := newTestWorker(q, &s, 1)
	w.run(ctx) // returns, or the test times out
	if q.calls != 5 || q.consumed != 5 {
		t.Errorf("Consume called %d times for %d jobs after a cancel at the 5th; want 5 and 5", q.calls, q.consumed)
	}
	if got := testutil.ToFloat64(m.processed); got != 5 {
		t.Errorf("processed %g, want 5 (the job taken when the context was cancelled is finished)", got)
	}
	if want := slices.Repeat([]time.Duration{w.jobTime}, 5); !slices.Equal(s.waits, want) {
		t.Errorf("waits %v, want each job's processing time %v", s.waits, want)
	}
	if got := m.rate.rate(w.now()); got != 5 {
		t.Errorf("rate %g jobs/s, want 5 (five jobs in the first second)", got)
	}
}

// A failing Consume is counted and retried after a growing wait; the loop goes on.
func TestConsumeErrorRetriedWithBackoff(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		failAt    []int
		jobs      int
		wantWaits []time.Duration
	}{
		{"failures in a row back off up to the max", []int{1, 2, 3, 4}, 2,
			[]time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond}},
		{"a success resets the backoff", []int{1, 2, 4}, 2,
			[]time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 50 * time.Millisecond}},
		{"no failure", nil, 3, []time.Duration{50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			q := &fakeQueue{jobs: tc.jobs, failAt: map[int]bool{}}
			for _, c := range tc.failAt {
				q.failAt[c] = true
			}
			// stop at the first empty poll, once every job and failure went by
			q.onConsume = func(call int) {
				if call == tc.jobs+len(tc.failAt)+1 {
					cancel()
				}
			}
			var s sleeps
			w, m := newTestWorker(q, &s, 1)
			w.run(ctx)
			if got := testutil.ToFloat64(m.errors.WithLabelValues("consume")); got != float64(len(tc.failAt)) {
				t.Errorf("metricscale_worker_errors_total{operation=consume} = %g, want %d", got, len(tc.failAt))
			}
			if got := testutil.ToFloat64(m.processed); got != float64(tc.jobs) {
				t.Errorf("processed %g, want %d", got, tc.jobs)
			}
			// the empty poll that cancelled adds no wait: the loop returns
			if !slices.Equal(s.waits, tc.wantWaits) {
				t.Errorf("waits %v, want %v", s.waits, tc.wantWaits)
			}
		})
	}
}

// --concurrency N processes N jobs at the same time.
func TestConcurrency(t *testing.T) {
	t.Parallel()
	const n = 3
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := &fakeQueue{jobs: n}
	all := make(chan struct{})
	var mu sync.Mutex
	inside, maxInside := 0, 0
	var w *worker
	var m *metrics
	w, m = newTestWorker(q, &sleeps{}, n)
	w.sleep = func(ctx context.Context, d time.Duration) error {
		if d != w.jobTime {
			return sleepCtx(ctx, time.Millisecond) // an idle poll
		}
		mu.Lock()
		inside++
		maxInside = max(maxInside, inside)
		if inside == n {
			close(all)
		}
		mu.Unlock()
		<-all // every loop waits here until all n jobs are in progress at once
		mu.Lock()
		inside--
		if inside == 0 {
			cancel()
		}
		mu.Unlock()
		return nil
	}
	w.run(ctx)
	if maxInside != n {
		t.Errorf("at most %d jobs in progress together, want %d", maxInside, n)
	}
	if got := testutil.ToFloat64(m.processed); got != n {
		t.Errorf("processed %g, want %d", got, n)
	}
}

func TestParseConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		environ []string
		check   func(t *testing.T, c config)
		wantErr string
	}{
		{"defaults", nil, nil, func(t *testing.T, c config) {
			if c.backend != "redis" || c.jobTime != 200*time.Millisecond || c.concurrency != 1 || c.listen != ":8080" || c.rateWindow != 10*time.Second {
				t.Errorf("defaults %+v", c)
			}
		}, ""},
		{"environment sets flags", nil, []string{"METRICSCALE_WORKER_JOB_TIME=1s", "METRICSCALE_WORKER_CONCURRENCY=4", "METRICSCALE_WORKER_BACKEND=nats"},
			func(t *testing.T, c config) {
				if c.jobTime != time.Second || c.concurrency != 4 || c.backend != "nats" {
					t.Errorf("from the environment: %+v", c)
				}
			}, ""},
		{"a flag wins over its variable", []string{"--job-time", "30ms"}, []string{"METRICSCALE_WORKER_JOB_TIME=1s"},
			func(t *testing.T, c config) {
				if c.jobTime != 30*time.Millisecond {
					t.Errorf("job time %s, want the flag's 30ms", c.jobTime)
				}
			}, ""},
		{"the backend's own variables only", []string{"--backend", "redis", "--queue", "orders"},
			[]string{"METRICSCALE_REDIS_ADDR=10.0.0.1:6379", "METRICSCALE_REDIS_ADMIN_PASSWORD_FILE=/etc/redis/password", "METRICSCALE_NATS_URL=nats://x", "HOME=/root"},
			func(t *testing.T, c config) {
				want := map[string]string{"METRICSCALE_REDIS_ADDR": "10.0.0.1:6379", "METRICSCALE_REDIS_ADMIN_PASSWORD_FILE": "/etc/redis/password", "METRICSCALE_REDIS_QUEUE": "orders"}
				if fmt.Sprint(c.env) != fmt.Sprint(want) {
					t.Errorf("backend env %v, want %v", c.env, want)
				}
			}, ""},
		{"queue name on a backend without", []string{"--backend", "nats", "--queue", "x"}, nil, nil, "it takes no queue name"},
		{"unknown backend", []string{"--backend", "sqs"}, nil, nil, `unknown queue backend "sqs"`},
		{"bad variable", nil, []string{"METRICSCALE_WORKER_CONCURRENCY=many"}, nil, "METRICSCALE_WORKER_CONCURRENCY=\"many\""},
		{"zero concurrency", []string{"--concurrency", "0"}, nil, nil, "--concurrency 0"},
		{"negative job time", []string{"--job-time", "-1s"}, nil, nil, "--job-time -1s"},
		{"argument", []string{"extra"}, nil, nil, `unexpected argument "extra"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, _, err := parseConfig(tc.args, tc.environ, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if code := run(context.Background(), []string{"--version"}, nil, &out, io.Discard, nil); code != 0 || !strings.HasPrefix(out.String(), "metricscale-worker dev (commit unknown, go") {
		t.Errorf("--version: exit %d, %q", code, out.String())
	}
}

// A broker that does not answer: the worker keeps serving, counts the failed opens,
// reports not ready, and stops cleanly; it does not exit into a crash loop.
func TestUnreachableBackend(t *testing.T) {
	t.Parallel()
	pw := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pw, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrc := make(chan string, 1)
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"--listen", "127.0.0.1:0", "--retry-min", "10ms", "--retry-max", "20ms"},
			// port 1: nothing listens there
			[]string{"METRICSCALE_REDIS_ADDR=127.0.0.1:1", "METRICSCALE_REDIS_ADMIN_PASSWORD_FILE=" + pw},
			io.Discard, io.Discard, func(a string) { addrc <- a })
	}()
	base := "http://" + <-addrc
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const failed = `metricscale_worker_errors_total{operation="open"} `
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, body := get("/metrics")
		if i := strings.Index(body, failed); i >= 0 && !strings.HasPrefix(body[i+len(failed):], "0\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no failed open counted after 30s:\n%s", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz %d, want 200 while retrying", code)
	}
	if code, _ := get("/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz %d, want 503 while the queue is not open", code)
	}
	_, body := get("/metrics")
	for _, want := range []string{
		"metricscale_worker_jobs_processed_total 0",
		`metricscale_worker_jobs_per_second{window="10s"} 0`,
		`metricscale_worker_errors_total{operation="consume"} 0`,
		"metricscale_worker_concurrency 1",
		"metricscale_worker_job_seconds 0.2",
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics has no line %q:\n%s", want, body)
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("exit %d after the cancel, want 0", code)
	}
}
