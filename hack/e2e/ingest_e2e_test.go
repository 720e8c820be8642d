//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/metricscale/metricscale/hack/freeport"
	"github.com/metricscale/metricscale/providers/push"
)

// TestIngestScales: queue depths that reach the adapter's push port by
// Prometheus remote write (Debian's Prometheus scraping a target and
// writing to /api/v1/write) and by OTLP/HTTP (the OpenTelemetry Go SDK's
// exporter sending to /v1/metrics) each scale a MetricAutoscaler through the
// aggregated external metrics API, up and down.
func TestIngestScales(t *testing.T) {
	needAutoscaler(t)
	base := strings.TrimSuffix(cluster.PushURL, "/push")

	t.Run("PrometheusRemoteWrite", func(t *testing.T) {
		if _, err := os.Stat("/usr/bin/prometheus"); err != nil {
			t.Fatalf("Debian's prometheus is not installed (hack/cluster.sh install-prometheus): %v", err)
		}
		ns := cluster.CreateNamespace(t, "remotewrite")
		queue := "rw-" + ns
		var depth atomic.Int64
		depth.Store(40)
		target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			fmt.Fprintf(w, "# TYPE queue_messages_ready gauge\nqueue_messages_ready{queue=%q} %d\n", queue, depth.Load())
		}))
		defer target.Close()
		startRemoteWriter(t, target.Listener.Addr().String(), base+push.RemoteWritePath)

		cluster.CreateDeployment(t, KwokDeployment(ns, "worker", 1, "100m", "10m"))
		createMA(t, newMA(ns, "worker", 1, 10, 15*time.Second, queueSpec(queue, "10")))
		waitReplicas(t, ns, "worker", 4, 2*time.Minute)
		depth.Store(70)
		waitReplicas(t, ns, "worker", 7, time.Minute)
	})

	t.Run("OTLPExporter", func(t *testing.T) {
		ns := cluster.CreateNamespace(t, "otlp")
		queue := "otlp-" + ns
		ctx := context.Background()
		exp, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(base+push.OTLPPath),
			otlpmetrichttp.WithHeaders(map[string]string{"Authorization": "Bearer " + cluster.PushToken}))
		if err != nil {
			t.Fatal(err)
		}
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(2*time.Second))))
		defer func() { _ = mp.Shutdown(ctx) }()
		var depth atomic.Int64
		depth.Store(50)
		// The exporter's name for the gauge is OpenTelemetry's; the adapter
		// stores it as queue_messages_ready.
		if _, err := mp.Meter("e2e").Int64ObservableGauge("queue.messages.ready", metric.WithInt64Callback(
			func(_ context.Context, o metric.Int64Observer) error {
				o.Observe(depth.Load(), metric.WithAttributes(attribute.String("queue", queue)))
				return nil
			})); err != nil {
			t.Fatal(err)
		}
		cluster.CreateDeployment(t, KwokDeployment(ns, "worker", 1, "100m", "10m"))
		createMA(t, newMA(ns, "worker", 1, 10, 15*time.Second, queueSpec(queue, "10")))
		waitReplicas(t, ns, "worker", 5, 2*time.Minute)
		depth.Store(20)
		waitReplicas(t, ns, "worker", 2, 2*time.Minute)
	})
}

// startRemoteWriter runs Debian's Prometheus scraping target every second
// and remote-writing to url with the cluster's push token.
func startRemoteWriter(t *testing.T, target, url string) {
	t.Helper()
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte(cluster.PushToken), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("global: {scrape_interval: 1s}\nscrape_configs:\n- job_name: worker\n  static_configs: [{targets: [%q]}]\n"+
		"remote_write:\n- url: %s\n  authorization: {credentials_file: %s}\n  queue_config: {batch_send_deadline: 500ms}\n", target, url, token)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	logs, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/usr/bin/prometheus", "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), fmt.Sprintf("--web.listen-address=127.0.0.1:%d", freeport.For(t)), "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logs.Name())
			t.Logf("remote-writing prometheus' log:\n%s", b)
		}
	})
}
