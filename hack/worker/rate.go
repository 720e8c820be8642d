package main

import (
	"sync"
	"time"
)

// rateWindow counts processed jobs in one-second buckets over the last Window, for the
// jobs/s gauge: a scrape sees the recent rate, not the average since the start.
type rateWindow struct {
	mu      sync.Mutex
	start   time.Time // the first second counted: before Window has passed, the rate divides by the time since
	buckets []int64   // buckets[s % len] counts the jobs of Unix second s
	seconds []int64   // seconds[i] is the Unix second buckets[i] counts
}

// newRateWindow is a window of window (at least one second, rounded down to seconds)
// that starts counting at start.
func newRateWindow(window time.Duration, start time.Time) *rateWindow {
	n := int(window / time.Second)
	if n < 1 {
		n = 1
	}
	return &rateWindow{start: start, buckets: make([]int64, n), seconds: make([]int64, n)}
}

// add counts n jobs finished at now.
func (r *rateWindow) add(now time.Time, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := now.Unix()
	i := int(s % int64(len(r.buckets)))
	if r.seconds[i] != s {
		r.seconds[i], r.buckets[i] = s, 0
	}
	r.buckets[i] += int64(n)
}

// rate is the jobs per second over the window's seconds up to now's (the current second
// included). Until a whole window has passed since start it divides by the seconds since
// start (at least one), so a worker that just started does not read as slow.
func (r *rateWindow) rate(now time.Time) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := now.Unix()
	n := int64(len(r.buckets))
	var sum int64
	for i := range r.buckets {
		if age := s - r.seconds[i]; age >= 0 && age < n {
			sum += r.buckets[i]
		}
	}
	span := n
	if since := s - r.start.Unix() + 1; since < span {
		span = max(since, 1)
	}
	return float64(sum) / float64(span)
}
