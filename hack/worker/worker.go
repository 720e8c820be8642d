package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/metricscale/metricscale/hack/backends"
)

// backoff is the wait after a failed call: min, doubling up to max, back to min after a
// success. A broker that is down is retried at most every max, never in a tight loop.
type backoff struct{ min, max time.Duration }

func (b backoff) next(prev time.Duration) time.Duration {
	if prev <= 0 {
		return b.min
	}
	return min(2*prev, b.max)
}

// metrics are the worker's series, served on /metrics.
type metrics struct {
	processed  prometheus.Counter
	errors     *prometheus.CounterVec // by operation: open, consume
	inProgress prometheus.Gauge
	rate       *rateWindow
	total      atomic.Int64 // processed, for the last log line
}

func newMetrics(reg prometheus.Registerer, cfg config, now func() time.Time) *metrics {
	m := &metrics{
		processed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "metricscale_worker_jobs_processed_total",
			Help: "Jobs taken from the queue and processed (each takes --job-time).",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metricscale_worker_errors_total",
			Help: "Failed calls to the queue backend, by operation (open, consume); each is retried with backoff.",
		}, []string{"operation"}),
		inProgress: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "metricscale_worker_jobs_in_progress",
			Help: "Jobs taken and not yet finished.",
		}),
		rate: newRateWindow(cfg.rateWindow, now()),
	}
	// both operations show from the start, at 0
	m.errors.WithLabelValues("open")
	m.errors.WithLabelValues("consume")
	reg.MustRegister(m.processed, m.errors, m.inProgress,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "metricscale_worker_jobs_per_second",
			Help:        "Jobs processed per second over the last --rate-window (over the time since the start before that).",
			ConstLabels: prometheus.Labels{"window": cfg.rateWindow.String()},
		}, func() float64 { return m.rate.rate(now()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "metricscale_worker_concurrency",
			Help: "Jobs processed at the same time (--concurrency).",
		}, func() float64 { return float64(cfg.concurrency) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "metricscale_worker_job_seconds",
			Help: "Processing time of one job (--job-time).",
		}, func() float64 { return cfg.jobTime.Seconds() }),
	)
	return m
}

// worker runs concurrency loops that each take one job at a time from queue and process
// it for jobTime.
type worker struct {
	queue       backends.Queue
	jobTime     time.Duration
	concurrency int
	idle        time.Duration // the wait after finding the queue empty
	backoff     backoff
	metrics     *metrics
	now         func() time.Time
	// sleep waits d or until ctx is done (then it returns ctx's error); tests replace it.
	sleep func(ctx context.Context, d time.Duration) error

	// consumeMu serialises Consume: a Queue is one connection (an AMQP channel is not
	// safe for concurrent use); processing, the slow part, runs in parallel.
	consumeMu sync.Mutex
}

// run runs the loops until ctx is done and each has finished the job it holds.
func (w *worker) run(ctx context.Context) {
	var wg sync.WaitGroup
	for i := range w.concurrency {
		wg.Go(func() { w.loop(ctx, i) })
	}
	wg.Wait()
}

func (w *worker) consume(ctx context.Context) (int, error) {
	w.consumeMu.Lock()
	defer w.consumeMu.Unlock()
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	return w.queue.Consume(ctx, 1)
}

func (w *worker) loop(ctx context.Context, id int) {
	var wait time.Duration
	for ctx.Err() == nil {
		n, err := w.consume(ctx)
		if ctx.Err() != nil && n == 0 {
			return
		}
		if err != nil {
			w.metrics.errors.WithLabelValues("consume").Inc()
			wait = w.backoff.next(wait)
			klog.ErrorS(err, "Consuming a job failed; retrying", "loop", id, "retryIn", wait)
			_ = w.sleep(ctx, wait)
			continue
		}
		wait = 0
		if n == 0 {
			_ = w.sleep(ctx, w.idle)
			continue
		}
		// A job taken is acknowledged already: finish it even when asked to stop
		// (a pod's termination grace period is far longer than a job).
		w.metrics.inProgress.Add(float64(n))
		_ = w.sleep(context.WithoutCancel(ctx), time.Duration(n)*w.jobTime)
		w.metrics.inProgress.Sub(float64(n))
		w.metrics.processed.Add(float64(n))
		w.metrics.total.Add(int64(n))
		w.metrics.rate.add(w.now(), n)
	}
}

// sleepCtx waits d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
