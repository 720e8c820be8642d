//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/rand"
)

// TestPrometheusInfra checks the Prometheus test infrastructure of hack/cluster.sh, that
// the Prometheus provider's tests build on: series set on the exporter reach Prometheus
// within seconds, the pods' kwok usage annotations become cAdvisor series with the right
// rates, and Prometheus can be stopped and started again.
func TestPrometheusInfra(t *testing.T) {
	cluster.RequirePrometheus(t)
	run := rand.String(6) // keeps this test's series apart from other tests'

	t.Run("exporter series reach Prometheus", func(t *testing.T) {
		ctx := context.Background()
		series := fmt.Sprintf(`e2e_infra_queue_messages_ready{namespace="default",queue="orders",run=%q}`, run)
		t.Cleanup(func() { _ = cluster.ResetExporter(context.Background()) })

		for _, v := range []float64{12, 30} {
			if err := cluster.SetExporterSeries(ctx, fmt.Sprintf("%s %v\n", series, v)); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := cluster.WaitPrometheusSeries(wctx, series, v)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s = %v visible in Prometheus %v after it was set", series, v, time.Since(start).Round(10*time.Millisecond))
		}

		if err := cluster.SetExporterSeries(ctx, "not a series line"); err == nil {
			t.Error("the exporter accepted a bad line")
		} else {
			t.Logf("a bad line is refused: %v", err)
		}

		if err := cluster.ResetExporter(ctx); err != nil {
			t.Fatal(err)
		}
		Eventually(t, 10*time.Second, 250*time.Millisecond, "the reset series to go stale in Prometheus",
			func(ctx context.Context) (bool, string, error) {
				s, err := cluster.QueryPrometheus(ctx, series)
				return err == nil && len(s) == 0, fmt.Sprintf("%v", s), err
			})
	})

	t.Run("pod usage annotations become cAdvisor series", func(t *testing.T) {
		ns := cluster.CreateNamespace(t, "prominfra")
		d := KwokDeployment(ns, "web", 2, "100m", "150m")
		d.Spec.Template.Annotations[UsageMemoryAnnotation] = "64Mi"
		cluster.CreateDeployment(t, d)
		cluster.WaitDeploymentReady(t, ns, "web", 2, 90*time.Second)

		podCPU := fmt.Sprintf(`sum(rate(container_cpu_usage_seconds_total{namespace=%q,container!="",pod!=""}[10s]))`, ns)
		waitClose(t, podCPU, 0.3, 0.03)

		memory := fmt.Sprintf(`sum(container_memory_working_set_bytes{namespace=%q,container!="",pod!=""})`, ns)
		wctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := cluster.WaitPrometheusSeries(wctx, memory, 2*64*1024*1024); err != nil {
			t.Fatal(err)
		}

		// The pod cgroup series (container="") carry the same usage, as cAdvisor's do.
		cgroupCPU := fmt.Sprintf(`sum(rate(container_cpu_usage_seconds_total{namespace=%q,container="",pod!=""}[10s]))`, ns)
		waitClose(t, cgroupCPU, 0.3, 0.03)

		pods, err := cluster.Pods(context.Background(), ns, map[string]string{"app": "web"})
		if err != nil {
			t.Fatal(err)
		}
		if err := cluster.SetPodCPUUsage(context.Background(), ns, pods[0].Name, "500m"); err != nil {
			t.Fatal(err)
		}
		onePod := fmt.Sprintf(`sum(rate(container_cpu_usage_seconds_total{namespace=%q,pod=%q,container!=""}[5s]))`, ns, pods[0].Name)
		waitClose(t, onePod, 0.5, 0.03)

		// The node's root cgroup counts at least this namespace's pods (others may run there).
		node := fmt.Sprintf(`sum(rate(container_cpu_usage_seconds_total{id="/",node=%q}[5s]))`, pods[0].Spec.NodeName)
		samples, err := cluster.QueryPrometheus(context.Background(), node)
		if err != nil {
			t.Fatal(err)
		}
		if len(samples) != 1 || samples[0].Value < 0.65*0.97 {
			t.Errorf("%s = %v, want at least 0.65", node, samples)
		} else {
			t.Logf("%s = %.3f", node, samples[0].Value)
		}
	})

	t.Run("Prometheus stops and starts again", func(t *testing.T) {
		ctx := context.Background()
		t.Cleanup(func() {
			if err := cluster.StartPrometheus(context.Background()); err != nil { // no-op when it runs
				t.Error(err)
			}
			_ = cluster.ResetExporter(context.Background())
		})
		start := time.Now()
		if err := cluster.StopPrometheus(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("Prometheus stopped in %v", time.Since(start).Round(10*time.Millisecond))
		if s, err := cluster.QueryPrometheus(ctx, "up"); err == nil {
			t.Fatalf("Prometheus still answers after stop-prometheus: %v", s)
		} else {
			t.Logf("while stopped, a query fails: %v", err)
		}

		series := fmt.Sprintf(`e2e_infra_after_outage{run=%q}`, run)
		if err := cluster.SetExporterSeries(ctx, series+" 7"); err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		if err := cluster.StartPrometheus(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("Prometheus restarted and scraping again in %v", time.Since(start).Round(10*time.Millisecond))
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := cluster.WaitPrometheusSeries(wctx, series, 7); err != nil {
			t.Fatal(err)
		}
	})
}

// waitClose waits until promql returns one sample within tolerance (relative) of want.
func waitClose(t *testing.T, promql string, want, tolerance float64) {
	t.Helper()
	start := time.Now()
	Eventually(t, 30*time.Second, 500*time.Millisecond, fmt.Sprintf("%s to be %v ± %v%%", promql, want, tolerance*100),
		func(ctx context.Context) (bool, string, error) {
			s, err := cluster.QueryPrometheus(ctx, promql)
			if err != nil || len(s) != 1 {
				return false, fmt.Sprintf("%v", s), err
			}
			return math.Abs(s[0].Value-want) <= tolerance*want, s[0].String(), nil
		})
	t.Logf("%s ≈ %v after %v", promql, want, time.Since(start).Round(100*time.Millisecond))
}
