// Package providers defines the seam between the adapter's API server and the
// metric backends behind it.
//
// A backend implements Provider (modelled on custom-metrics-apiserver's
// pkg/provider interfaces, but per backend instance and with typed errors), and
// registers a Factory for its config "type". The registry
// (providers/registry) routes each metric name to one Provider instance, so
// several backends serve at once.
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
