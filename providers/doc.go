// Package providers defines the seam between the adapter's API server and the
// metric backends behind it.
//
// A backend implements the interfaces of the APIs it serves — CustomProvider
// (custom.metrics.k8s.io), ExternalProvider (external.metrics.k8s.io),
// ResourceProvider (metrics.k8s.io) — modelled on custom-metrics-apiserver's
// pkg/provider interfaces, but per backend instance and with typed errors, and
// optionally Appender (pushed samples), Runner, ReadinessChecker. Its Factory
// is registered for its config "type" in one place: package
// providers/catalog. The registry (providers/registry) routes each metric
// name, per kind, to one provider instance, so several backends serve at
// once.
//
// Shared pieces: providers/naming (resource normalization with one cache,
// and prometheus-adapter's label ↔ resource mapping), providers/push and
// providers/pushformat (the push endpoint, feeding any Appender),
// providers/telemetry (the adapter's self-metrics), providers/providertest
// (the conformance suite every provider's tests run), providers/changefeed
// (the wire format of the change feed the adapter serves and the autoscaler
// reads).
//
// Types: memory (providers/memory), prometheus (providers/prometheus), and
// the queue backends, which read their broker on demand through
// providers/ondemand (per-metric cache TTL, coalesced reads, selectors and
// namespaces applied in the adapter): rabbitmq, redis, kafka, postgresql,
// nats (providers/<type>, each with a README); and apiservice
// (providers/apiservice), federation to another metrics adapter (KEDA,
// prometheus-adapter, ...) over HTTPS.
//
// Errors returned by providers must carry API semantics; use the constructors
// in this package:
//
//   - NewMetricNotFound / NewObjectNotFound / NewStale: 404, naming the metric
//     and the object;
//   - NewBackendError: 503, carrying the backend's reason;
//   - NewBadSelector: 400, naming the selector.
//
// The registry turns any other error into a 503 naming the provider, so a
// backend bug can never surface as a wrong number.
package providers
