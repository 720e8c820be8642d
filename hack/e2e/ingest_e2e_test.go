//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/metricscale/metricscale/providers/providertest"
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
		if _, err := os.Stat(providertest.PrometheusBinary); err != nil {
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
		createMA(t, withoutScaleDownWindow(newMA(ns, "worker", 1, 10, 15*time.Second, queueSpec(queue, "10"))))
		waitReplicas(t, ns, "worker", 4, 2*time.Minute)
		depth.Store(70)
		waitReplicas(t, ns, "worker", 7, time.Minute)
		depth.Store(20)
		waitReplicas(t, ns, "worker", 2, time.Minute)
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
		createMA(t, withoutScaleDownWindow(newMA(ns, "worker", 1, 10, 15*time.Second, queueSpec(queue, "10"))))
		waitReplicas(t, ns, "worker", 5, 2*time.Minute)
		depth.Store(20)
		waitReplicas(t, ns, "worker", 2, 2*time.Minute)
	})
}

// startRemoteWriter runs Debian's Prometheus scraping target every second
// and remote-writing to url with the cluster's push token.
func startRemoteWriter(t *testing.T, target, url string) {
	t.Helper()
	providertest.StartPrometheus(t, fmt.Sprintf("global: {scrape_interval: 1s}\nscrape_configs:\n- job_name: worker\n  static_configs: [{targets: [%q]}]\n"+
		"remote_write:\n- url: %s\n  authorization: {credentials_file: $DIR/token}\n  queue_config: {batch_send_deadline: 500ms}\n", target, url),
		map[string]string{"token": cluster.PushToken})
}
