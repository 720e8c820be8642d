// Package telemetry holds the adapter's own Prometheus metrics, registered in
// component-base's legacy registry, which the API server serves on /metrics
// (authorized like any other request).
package telemetry

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const (
	namespace = "metricscale"
	subsystem = "adapter"
)

// UnknownMetric is the "metric" label value for queries of metrics no
// provider has, so clients cannot blow up the label's cardinality.
const UnknownMetric = "<unknown>"

var (
	// Requests counts metric queries per provider, API (custom, external),
	// metric and HTTP status code.
	Requests = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "requests_total",
		Help:           "Metric queries answered, by provider, API (custom or external), metric and HTTP status code.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"provider", "api", "metric", "code"})

	// RequestDuration is the latency of metric queries in the provider.
	RequestDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "request_duration_seconds",
		Help:           "Time to answer a metric query, by provider, API and metric.",
		Buckets:        []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		StabilityLevel: metrics.ALPHA,
	}, []string{"provider", "api", "metric"})

	// CacheRequests counts lookups in the adapter's caches (discovery,
	// resource mapping, object watch caches) by result (hit, miss).
	CacheRequests = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "cache_requests_total",
		Help:           "Lookups in the adapter's caches, by cache and result (hit or miss).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"cache", "result"})

	// BackendErrors counts failed queries per provider and reason.
	BackendErrors = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "backend_errors_total",
		Help:           "Metric queries that failed, by provider and reason (backend, bad_value, stale, unknown_metric, no_value, bad_selector, not_allowed, too_many_items).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"provider", "reason"})

	// Series is the number of series stored per provider.
	Series = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "series",
		Help:           "Series stored, by provider.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"provider"})

	// ProviderUp is 1 when a provider's last backend call succeeded (or none
	// was made yet), 0 when it failed; only providers that read on demand.
	ProviderUp = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "provider_up",
		Help:           "1 when the provider's last backend call succeeded or none was made yet, 0 when it failed; for providers that read their backend on demand.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"provider"})

	// PushRequests counts push requests by HTTP status code.
	PushRequests = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "push_requests_total",
		Help:           "Push requests, by HTTP status code.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"code"})

	// PushForwards counts pushes forwarded to other replicas by result.
	PushForwards = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "push_forwards_total",
		Help:           "Pushes forwarded to the other replicas, by result (ok or error).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})

	// PushedSamples counts samples accepted by the push endpoint.
	PushedSamples = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: namespace, Subsystem: subsystem, Name: "pushed_samples_total",
		Help:           "Samples accepted by the push endpoint.",
		StabilityLevel: metrics.ALPHA,
	})
)

var once sync.Once

// Register registers the metrics in the legacy registry; it is idempotent.
func Register() {
	once.Do(func() {
		legacyregistry.MustRegister(Requests, RequestDuration, CacheRequests, BackendErrors, Series, ProviderUp, PushRequests, PushForwards, PushedSamples)
	})
}

// CacheHit and CacheMiss count one lookup in the named cache.
func CacheHit(cache string)  { CacheRequests.WithLabelValues(cache, "hit").Inc() }
func CacheMiss(cache string) { CacheRequests.WithLabelValues(cache, "miss").Inc() }
