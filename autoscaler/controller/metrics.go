package controller

import (
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// The reconcile metrics mirror kube-controller-manager's
// horizontal_pod_autoscaler_controller_* series, by object kind.
var (
	reconciliations = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "metricscale",
		Subsystem:      "autoscaler",
		Name:           "reconciliations_total",
		Help:           "Reconciles by object kind, action (scale_up, scale_down, none) and error (none, internal).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind", "action", "error"})
	reconciliationDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace:      "metricscale",
		Subsystem:      "autoscaler",
		Name:           "reconciliation_duration_seconds",
		Help:           "Time one reconcile took, by object kind, action and error.",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 15),
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind", "action", "error"})
	metricReadDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace:      "metricscale",
		Subsystem:      "autoscaler",
		Name:           "metric_read_duration_seconds",
		Help:           "Time one read of a metrics API took, through the API server's aggregation layer, by API (resource, custom, external) and error (none, failed).",
		Buckets:        metrics.ExponentialBuckets(0.0005, 2, 14),
		StabilityLevel: metrics.ALPHA,
	}, []string{"api", "error"})
)

func init() {
	legacyregistry.MustRegister(reconciliations, reconciliationDuration, metricReadDuration)
}

// ObserveMetricRead records a read of a metrics API (for metricsource.REST).
func ObserveMetricRead(api string, took time.Duration, err error) {
	errLabel := "none"
	if err != nil {
		errLabel = "failed"
	}
	metricReadDuration.WithLabelValues(api, errLabel).Observe(took.Seconds())
}

func observeReconcile(kind, action string, err error, took time.Duration) {
	errLabel := "none"
	if err != nil {
		errLabel = "internal"
	}
	reconciliations.WithLabelValues(kind, action, errLabel).Inc()
	reconciliationDuration.WithLabelValues(kind, action, errLabel).Observe(took.Seconds())
}
