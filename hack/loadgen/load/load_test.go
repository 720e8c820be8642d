package load

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func ms(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	for _, tc := range []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"one", ms(7), 0.99, 7 * time.Millisecond},
		{"median of odd", ms(1, 2, 3), 0.5, 2 * time.Millisecond},
		{"median of even is the lower", ms(1, 2, 3, 4), 0.5, 2 * time.Millisecond},
		{"p99 of 100", hundred, 0.99, 99 * time.Millisecond},
		{"p50 of 100", hundred, 0.50, 50 * time.Millisecond},
		{"p100", hundred, 1, 100 * time.Millisecond},
		{"p0 is the minimum", hundred, 0, time.Millisecond},
		{"p99 of 10 is the maximum", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.99, 10 * time.Millisecond},
	} {
		if got := Percentile(tc.sorted, tc.p); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	r := &Result{Requests: 4, Errors: 1, Elapsed: 2 * time.Second, Latencies: ms(40, 10, 30, 20)}
	s := Summarize(r)
	if s.QPS != 2 || s.P50 != 20*time.Millisecond || s.P99 != 40*time.Millisecond || s.Max != 40*time.Millisecond || s.Errors != 1 {
		t.Errorf("summary %+v", s)
	}
	if z := Summarize(&Result{}); z.QPS != 0 || z.P99 != 0 {
		t.Errorf("empty summary %+v", z)
	}
}

// TestRun sends a fixed number of requests over two URLs, one of which
// fails, and checks the counts, the rotation and the bearer token.
func TestRun(t *testing.T) {
	t.Parallel()
	var good, bad, noToken, noAccept atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			noToken.Add(1)
		}
		if r.Header.Get("Accept") != "application/x-test" {
			noAccept.Add(1)
		}
		if strings.HasSuffix(r.URL.Path, "/bad") {
			bad.Add(1)
			http.Error(w, "no", http.StatusServiceUnavailable)
			return
		}
		good.Add(1)
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()
	r, err := Run(context.Background(), Config{
		URLs: []string{srv.URL + "/good", srv.URL + "/bad"}, Clients: 4, Requests: 100, Token: "tok", Accept: "application/x-test", Client: srv.Client(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests != 100 || len(r.Latencies) != 100 {
		t.Fatalf("requests %d, latencies %d, want 100", r.Requests, len(r.Latencies))
	}
	if r.Errors != int(bad.Load()) || r.Codes[503] != int(bad.Load()) || r.Codes[200] != int(good.Load()) {
		t.Errorf("errors %d codes %v; server saw %d good %d bad", r.Errors, r.Codes, good.Load(), bad.Load())
	}
	if bad.Load() == 0 || good.Load() == 0 {
		t.Errorf("rotation: %d good, %d bad", good.Load(), bad.Load())
	}
	if noToken.Load() != 0 || noAccept.Load() != 0 {
		t.Errorf("%d requests without the token, %d without the Accept header", noToken.Load(), noAccept.Load())
	}
	if !strings.Contains(r.FirstErr, "HTTP 503") {
		t.Errorf("first error %q", r.FirstErr)
	}
}

func TestRunDuration(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(time.Millisecond)
	}))
	defer srv.Close()
	r, err := Run(context.Background(), Config{URLs: []string{srv.URL}, Clients: 2, Duration: 200 * time.Millisecond, Client: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests == 0 || r.Errors != 0 {
		t.Errorf("requests %d errors %d (%s)", r.Requests, r.Errors, r.FirstErr)
	}
	if r.Elapsed < 200*time.Millisecond || r.Elapsed > 2*time.Second {
		t.Errorf("elapsed %v for a 200ms run", r.Elapsed)
	}
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{
		{Clients: 1, Requests: 1},
		{URLs: []string{"http://x"}, Requests: 1},
		{URLs: []string{"http://x"}, Clients: 1},
	} {
		if _, err := Run(context.Background(), cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
}
