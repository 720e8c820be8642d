package app

import (
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// The config reload's metrics, served on /metrics with the adapter's
// others (providers/telemetry).
var (
	reloadsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "metricscale", Subsystem: "adapter", Name: "config_reloads_total",
		Help:           "Config file changes the adapter tried to apply, by result (success, or failure: the running config was kept).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})

	lastReloadSuccessful = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: "metricscale", Subsystem: "adapter", Name: "config_last_reload_successful",
		Help:           "1 when the last config change was applied (or none was tried since the start), 0 when it was refused.",
		StabilityLevel: metrics.ALPHA,
	})

	lastReloadSuccessTime = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: "metricscale", Subsystem: "adapter", Name: "config_last_reload_success_timestamp_seconds",
		Help:           "When the config in use was loaded (at start or by a reload), in seconds since the epoch.",
		StabilityLevel: metrics.ALPHA,
	})

	configInfo = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "metricscale", Subsystem: "adapter", Name: "config_info",
		Help:           "1, labelled with the sha256 of the config file in use (empty without --config).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"hash"})
)

var registerReloadOnce sync.Once

// registerReloadMetrics registers the reload metrics in the legacy
// registry; it is idempotent.
func registerReloadMetrics() {
	registerReloadOnce.Do(func() {
		legacyregistry.MustRegister(reloadsTotal, lastReloadSuccessful, lastReloadSuccessTime, configInfo)
		// Both results exist from the start, so a rate or an alert on
		// failures has a series before the first one.
		reloadsTotal.WithLabelValues(reloadSuccess)
		reloadsTotal.WithLabelValues(reloadFailure)
	})
}

// setConfigInfo records the config in use.
func setConfigInfo(hash string, at time.Time) {
	configInfo.Reset()
	configInfo.WithLabelValues(hash).Set(1)
	lastReloadSuccessTime.Set(float64(at.UnixNano()) / 1e9)
}
