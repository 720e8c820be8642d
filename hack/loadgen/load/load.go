// Package load sends GET requests from N concurrent clients, rotating over
// a list of URLs, and summarizes throughput and latency. hack/loadgen is
// its command line; the adapter's benchmark runs it in a child process so
// that the client's CPU is not counted as the adapter's.
package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Config says what to send.
type Config struct {
	// URLs are fetched in turn: client w fetches URLs[w], URLs[w+Clients],
	// and so on, wrapping around.
	URLs []string
	// Clients is the number of concurrent clients, each one request at a
	// time.
	Clients int
	// Duration bounds the run; Requests (if > 0) bounds the total count.
	// At least one must be set.
	Duration time.Duration
	Requests int
	// Token is sent as a bearer token.
	Token string
	// Accept, if set, is the Accept header (say
	// application/vnd.kubernetes.protobuf, as kube-controller-manager asks).
	Accept string
	// Client sends the requests (its transport carries TLS and client
	// certificates); NewClient, if set, gives each client its own instead
	// (its own connection, as separate callers have).
	Client    *http.Client
	NewClient func() *http.Client
}

// Result is what a run measured.
type Result struct {
	Requests  int             `json:"requests"`
	Errors    int             `json:"errors"` // transport errors and non-2xx answers
	Elapsed   time.Duration   `json:"elapsed"`
	Codes     map[int]int     `json:"codes"`
	FirstErr  string          `json:"firstError,omitempty"`
	Latencies []time.Duration `json:"-"`
}

// Summary is a Result's figures.
type Summary struct {
	Requests int           `json:"requests"`
	Errors   int           `json:"errors"`
	QPS      float64       `json:"qps"`
	P50      time.Duration `json:"p50"`
	P99      time.Duration `json:"p99"`
	Max      time.Duration `json:"max"`
}

// Percentile returns the p-quantile (0 ≤ p ≤ 1) of sorted latencies by the
// nearest-rank method: the smallest value with at least p of all values at
// or below it. Zero for no values.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(float64(len(sorted))*p - 1e-9)) // 1e-9: 100×0.99 is 99, not 99.000…01
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// Summarize computes the figures of r; it sorts r.Latencies.
func Summarize(r *Result) Summary {
	slices.Sort(r.Latencies)
	s := Summary{Requests: r.Requests, Errors: r.Errors,
		P50: Percentile(r.Latencies, 0.50), P99: Percentile(r.Latencies, 0.99)}
	if n := len(r.Latencies); n > 0 {
		s.Max = r.Latencies[n-1]
	}
	if r.Elapsed > 0 {
		s.QPS = float64(r.Requests) / r.Elapsed.Seconds()
	}
	return s
}

// Run sends requests until Duration passes, Requests are sent or ctx is
// done. Every answer's body is read to the end, so the server pays for
// writing it.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if len(cfg.URLs) == 0 {
		return nil, errors.New("no URLs")
	}
	if cfg.Clients <= 0 {
		return nil, errors.New("clients must be positive")
	}
	if cfg.Duration <= 0 && cfg.Requests <= 0 {
		return nil, errors.New("set a duration or a request count")
	}
	hc := cfg.Client
	if hc == nil {
		hc = http.DefaultClient
	}
	// Elapsed starts before the deadline is set, so that a run of Duration
	// never reports less (and its q/s is not overstated).
	start := time.Now()
	if cfg.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, start.Add(cfg.Duration))
		defer cancel()
	}
	type clientResult struct {
		lat      []time.Duration
		errs     int
		codes    map[int]int
		firstErr string
	}
	results := make([]clientResult, cfg.Clients)
	var sent atomic.Int64
	var wg sync.WaitGroup
	for w := range cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cr := &results[w]
			cr.codes = map[int]int{}
			hc := hc
			if cfg.NewClient != nil {
				hc = cfg.NewClient()
			}
			// Client w asks for URLs w, w+Clients, …: no two clients ask
			// for the same URL at once unless the list is shorter.
			for i := w; ; i += cfg.Clients {
				if ctx.Err() != nil {
					return
				}
				if cfg.Requests > 0 && sent.Add(1) > int64(cfg.Requests) {
					return
				}
				t0 := time.Now()
				code, err := get(ctx, hc, cfg.URLs[i%len(cfg.URLs)], cfg.Token, cfg.Accept)
				if err != nil && ctx.Err() != nil {
					return // cut by the deadline: not an answer
				}
				cr.lat = append(cr.lat, time.Since(t0))
				cr.codes[code]++
				if err == nil && (code < 200 || code > 299) {
					err = fmt.Errorf("%s: HTTP %d", cfg.URLs[i%len(cfg.URLs)], code)
				}
				if err != nil {
					cr.errs++
					if cr.firstErr == "" {
						cr.firstErr = err.Error()
					}
				}
			}
		}()
	}
	wg.Wait()
	r := &Result{Elapsed: time.Since(start), Codes: map[int]int{}}
	for _, cr := range results {
		r.Latencies = append(r.Latencies, cr.lat...)
		r.Errors += cr.errs
		for c, n := range cr.codes {
			r.Codes[c] += n
		}
		if r.FirstErr == "" {
			r.FirstErr = cr.firstErr
		}
	}
	r.Requests = len(r.Latencies)
	return r, nil
}

func get(ctx context.Context, hc *http.Client, url, token, accept string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return resp.StatusCode, err
	}
	return resp.StatusCode, nil
}
