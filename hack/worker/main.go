// Command worker is the test and demo workload of metricscale's development setup (not a
// product binary; image ghcr.io/metricscale/worker, built by `make images`): it takes
// jobs one at a time from a queue of a development backend (hack/backends: redis,
// rabbitmq, postgresql, nats, kafka), "processes" each for --job-time, and serves its
// processing rate in Prometheus text on /metrics, plus /healthz and /readyz. See
// README.md.
//
//	worker --backend redis --job-time 200ms --concurrency 2
//
// Every flag can also be set by METRICSCALE_WORKER_<FLAG> (--job-time:
// METRICSCALE_WORKER_JOB_TIME); a flag on the command line wins. The backend's address
// and credentials are its METRICSCALE_<BACKEND>_* variables, as `hack/cluster.sh env`
// (backends.Backend.Env) prints them; password variables name files, so a Deployment
// mounts them from a Secret.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"

	"github.com/metricscale/metricscale/hack/backends"
)

// Version and Commit are stamped at link time by hack/images (-X main.Version=...).
var (
	Version = "dev"
	Commit  = "unknown"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr, nil)
	stop()
	klog.Flush()
	os.Exit(code)
}

// config is the worker's settings, from flags and METRICSCALE_WORKER_* variables.
type config struct {
	backend     string
	queue       string
	jobTime     time.Duration
	concurrency int
	listen      string
	rateWindow  time.Duration
	idle        time.Duration
	backoff     backoff
	// env holds the backend's METRICSCALE_<BACKEND>_* variables, for OpenQueue.
	env map[string]string
}

// envPrefix prefixes the variable of each flag: --job-time is METRICSCALE_WORKER_JOB_TIME.
const envPrefix = "METRICSCALE_WORKER_"

// flagEnv is the variable that sets flag name.
func flagEnv(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// parseConfig reads args and environ (KEY=VALUE lines). It returns flag.ErrHelp for -h.
func parseConfig(args, environ []string, stderr io.Writer) (config, bool, error) {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	var c config
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.backend, "backend", backends.PodBackend(), "queue backend: "+strings.Join(backends.Names(), ", ")+"; its address and credentials come from its METRICSCALE_<BACKEND>_* variables")
	fs.StringVar(&c.queue, "queue", "", "the queue to consume, on a backend with named queues (a list's key); default the backend's e2e queue")
	fs.DurationVar(&c.jobTime, "job-time", 200*time.Millisecond, "processing time of one job")
	fs.IntVar(&c.concurrency, "concurrency", 1, "jobs processed at the same time")
	fs.StringVar(&c.listen, "listen", ":8080", "address of /metrics, /healthz and /readyz")
	fs.DurationVar(&c.rateWindow, "rate-window", 10*time.Second, "the jobs/s gauge is the rate over this last span (whole seconds)")
	fs.DurationVar(&c.idle, "idle-wait", 200*time.Millisecond, "wait after finding the queue empty")
	fs.DurationVar(&c.backoff.min, "retry-min", 100*time.Millisecond, "first wait after a failed call to the backend; it doubles with each failure in a row")
	fs.DurationVar(&c.backoff.max, "retry-max", 5*time.Second, "longest wait between retries")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return c, false, err
	}
	if fs.NArg() > 0 {
		return c, false, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *showVersion {
		return c, true, nil
	}
	// A variable sets a flag the command line did not.
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		v, ok := env[flagEnv(f.Name)]
		if !ok || set[f.Name] || f.Name == "version" || err != nil {
			return
		}
		if e := fs.Set(f.Name, v); e != nil {
			err = fmt.Errorf("%s=%q: %w", flagEnv(f.Name), v, e)
		}
	})
	if err != nil {
		return c, false, err
	}
	switch {
	case c.jobTime < 0:
		return c, false, fmt.Errorf("--job-time %s: must not be negative", c.jobTime)
	case c.concurrency < 1:
		return c, false, fmt.Errorf("--concurrency %d: must be at least 1", c.concurrency)
	case c.rateWindow < time.Second:
		return c, false, fmt.Errorf("--rate-window %s: must be at least 1s", c.rateWindow)
	case c.backoff.min <= 0 || c.backoff.max < c.backoff.min:
		return c, false, fmt.Errorf("--retry-min %s, --retry-max %s: want 0 < min <= max", c.backoff.min, c.backoff.max)
	}
	b, err := backends.Lookup(c.backend)
	if err != nil {
		return c, false, fmt.Errorf("--backend: %w", err)
	}
	prefix := "METRICSCALE_" + strings.ToUpper(c.backend) + "_"
	c.env = map[string]string{}
	for k, v := range env {
		if strings.HasPrefix(k, prefix) {
			c.env[k] = v
		}
	}
	if c.queue != "" {
		named, ok := b.(backends.NamedQueues)
		if !ok {
			return c, false, fmt.Errorf("--queue: the %s backend has one queue; it takes no queue name", c.backend)
		}
		c.env[named.QueueNameVar()] = c.queue
	}
	return c, false, nil
}

// run is the command; ready, when not nil, gets the address it serves on (for tests
// listening on port 0).
func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer, ready func(addr string)) int {
	cfg, showVersion, err := parseConfig(args, environ, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "worker: %v\n", err)
		return 2
	}
	if showVersion {
		fmt.Fprintf(stdout, "metricscale-worker %s (commit %s, %s)\n", Version, Commit, runtime.Version())
		return 0
	}
	b, _ := backends.Lookup(cfg.backend) // checked by parseConfig

	reg := prometheus.NewRegistry()
	m := newMetrics(reg, cfg, time.Now)
	opened := make(chan struct{}) // closed once the queue is open: /readyz
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		select {
		case <-opened:
			fmt.Fprintln(w, "ok")
		default:
			http.Error(w, "the queue is not open yet", http.StatusServiceUnavailable)
		}
	})
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		fmt.Fprintf(stderr, "worker: --listen: %v\n", err)
		return 1
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "Serving /metrics failed")
		}
	}()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	klog.InfoS("Worker started", "version", Version, "backend", cfg.backend, "jobTime", cfg.jobTime,
		"concurrency", cfg.concurrency, "listen", ln.Addr().String())
	if ready != nil {
		ready(ln.Addr().String())
	}

	// The broker may not answer yet (a pod starts before it, or it is down): retry,
	// serving /metrics and /healthz meanwhile, rather than exit into a crash loop.
	var q backends.Queue
	for wait := time.Duration(0); ; {
		q, err = b.OpenQueue(ctx, cfg.env)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return 0
		}
		m.errors.WithLabelValues("open").Inc()
		wait = cfg.backoff.next(wait)
		klog.ErrorS(err, "Opening the queue failed; retrying", "backend", cfg.backend, "retryIn", wait)
		if sleepCtx(ctx, wait) != nil {
			return 0
		}
	}
	close(opened)
	defer q.Close()
	klog.InfoS("Queue open; consuming", "backend", cfg.backend)

	w := &worker{
		queue: q, jobTime: cfg.jobTime, concurrency: cfg.concurrency, idle: cfg.idle,
		backoff: cfg.backoff, metrics: m, now: time.Now, sleep: sleepCtx,
	}
	w.run(ctx)
	klog.InfoS("Worker stopped", "processed", m.total.Load())
	return 0
}
