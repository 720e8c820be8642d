// Command exporter is what the local cluster's Prometheus scrapes (hack/cluster.sh runs it
// next to Prometheus). It stands in for two things a real cluster's Prometheus scrapes:
//
//   - an application's series whose values the e2e tests set over HTTP, for example the
//     depth of a queue:
//
//     POST /set    a body of Prometheus text-format lines, for example
//     queue_messages_ready{namespace="default",queue="orders"} 12
//     each line adds its series or replaces the value of the series with the same
//     name and labels; the other series stay. 204 on success, 400 (and nothing
//     changed) when a line does not parse.
//     POST /reset  removes every series set with /set. 204.
//
//   - the kubelet's cAdvisor series of the pods that run on kwok's fake nodes, computed from
//     the pods' kwok usage annotations (kwok.x-k8s.io/usage-cpu, kwok.x-k8s.io/usage-memory)
//     as kwok itself reports them to metrics-server: each container uses what the
//     annotation says. See usage.go for the series and their labels.
//
// GET /metrics serves both, GET /healthz answers 200 once the pod and node caches are
// synced (at once without --kubeconfig).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9105", "address to serve /metrics, /set, /reset and /healthz on")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster whose pods get cAdvisor series; empty: only the series set with /set")
	defaultCPU := flag.String("default-cpu", "1m", "CPU usage of a container whose pod has no "+usageCPUAnnotation+" annotation (kwok's default)")
	defaultMemory := flag.String("default-memory", "1Mi", "memory usage of a container whose pod has no "+usageMemoryAnnotation+" annotation (kwok's default)")
	flag.Parse()

	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(logger, *listen, *kubeconfig, *defaultCPU, *defaultMemory); err != nil {
		logger.Error("exporter failed", "err", err)
		os.Exit(1)
	}
}

func run(logger *slog.Logger, listen, kubeconfig, defaultCPU, defaultMemory string) error {
	cpu, err := resource.ParseQuantity(defaultCPU)
	if err != nil {
		return fmt.Errorf("--default-cpu: %w", err)
	}
	mem, err := resource.ParseQuantity(defaultMemory)
	if err != nil {
		return fmt.Errorf("--default-memory: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	set := newSeriesStore()
	usage := newUsageTracker(time.Now, cpu.AsApproximateFloat64(), mem.AsApproximateFloat64(), logger)
	synced := func() bool { return true }
	if kubeconfig != "" {
		config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return err
		}
		config.UserAgent = "metricscale-e2e-exporter"
		client, err := kubernetes.NewForConfig(config)
		if err != nil {
			return err
		}
		factory := informers.NewSharedInformerFactory(client, 0)
		pods := factory.Core().V1().Pods().Informer()
		nodes := factory.Core().V1().Nodes().Informer()
		if _, err := pods.AddEventHandler(usage.podHandler()); err != nil {
			return err
		}
		if _, err := nodes.AddEventHandler(usage.nodeHandler()); err != nil {
			return err
		}
		factory.Start(ctx.Done())
		defer factory.Shutdown()
		synced = func() bool { return pods.HasSynced() && nodes.HasSynced() }
		go func() {
			if cache.WaitForCacheSync(ctx.Done(), pods.HasSynced, nodes.HasSynced) {
				logger.Info("pod and node caches synced")
			}
		}()
	}

	srv := &http.Server{Addr: listen, Handler: newHandler(set, usage, synced), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	logger.Info("serving", "address", listen, "kubeconfig", kubeconfig)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

const maxBody = 8 << 20

func newHandler(set *seriesStore, usage *usageTracker, synced func() bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		all := append(set.series(), usage.series()...)
		_, _ = io.WriteString(w, formatText(all))
	})
	mux.HandleFunc("POST /set", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			http.Error(w, "reading the body: "+err.Error(), http.StatusBadRequest)
			return
		}
		parsed, err := parseText(string(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		set.set(parsed)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /reset", func(w http.ResponseWriter, _ *http.Request) {
		set.reset()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !synced() {
			http.Error(w, "waiting for the pod and node caches to sync", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, fmt.Sprintf("no such endpoint %s %s; try GET /metrics, POST /set, POST /reset, GET /healthz",
			r.Method, r.URL.Path), http.StatusNotFound)
	})
	return mux
}

// sample is one series and its value.
type sample struct {
	name   string
	labels []label // sorted by name, no empty values
	value  float64
}

type label struct{ name, value string }

// key identifies the series: its name and labels in the text format.
func (s sample) key() string {
	var b strings.Builder
	b.WriteString(s.name)
	if len(s.labels) > 0 {
		b.WriteByte('{')
		for i, l := range s.labels {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(l.name)
			b.WriteString(`="`)
			b.WriteString(escapeLabelValue(l.value))
			b.WriteByte('"')
		}
		b.WriteByte('}')
	}
	return b.String()
}
