package providers

import (
	"context"
	"encoding/json"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	"k8s.io/metrics/pkg/apis/external_metrics"
	"k8s.io/utils/clock"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
)

// CustomMetricInfo and ExternalMetricInfo are custom-metrics-apiserver's, so
// a Provider's answers plug into the API server unchanged.
type (
	CustomMetricInfo   = provider.CustomMetricInfo
	ExternalMetricInfo = provider.ExternalMetricInfo
)

// Provider is one configured backend instance.
//
// The registry calls a Provider only for metrics routed to it, always with a
// GroupResource already normalized through the RESTMapper (plural resource,
// full group: "pods", "deployments.apps") and with a context that carries the
// instance's timeout. Implementations must return promptly when the context
// is done.
type Provider interface {
	// Name is the instance name from the config (providers[].name).
	Name() string

	// GetMetricByName returns the metric for one object. The namespace is empty
	// for cluster-scoped objects.
	GetMetricByName(ctx context.Context, name types.NamespacedName, info CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValue, error)

	// GetMetricBySelector returns the metric for every object of the resource
	// in the namespace matching selector. Objects without a current value are
	// left out; if no object has one, it returns a 404.
	GetMetricBySelector(ctx context.Context, namespace string, selector labels.Selector, info CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValueList, error)

	// GetExternalMetric returns every series of the metric visible from the
	// namespace that matches metricSelector, one item per series, unsummed.
	GetExternalMetric(ctx context.Context, namespace string, metricSelector labels.Selector, info ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error)

	// ListAllMetrics and ListAllExternalMetrics describe what the provider can
	// currently serve, for discovery. They must be cheap and must not block on
	// a backend: return the last known list.
	ListAllMetrics() []CustomMetricInfo
	ListAllExternalMetrics() []ExternalMetricInfo
}

// Sample is one pushed value of one series.
type Sample struct {
	// Name is the metric name.
	Name string
	// Labels are the series' labels, not including the name.
	Labels map[string]string
	// Value is the sample value; it is always finite.
	Value float64
	// Timestamp is when the value was observed; zero means "when received".
	Timestamp time.Time
}

// Appender is implemented by providers that accept pushed samples.
type Appender interface {
	// Append stores samples; it either stores all of them or none and
	// returns an error that says which sample was refused.
	Append(samples []Sample) error
}

// Runner is implemented by providers with background work (expiry, polling);
// Run returns when ctx is done.
type Runner interface {
	Run(ctx context.Context)
}

// ReadinessChecker is implemented by providers that can tell whether their
// backend is usable; the adapter reports it on /readyz.
type ReadinessChecker interface {
	Ready(ctx context.Context) error
}

// InMemory is implemented by providers that answer from process memory and
// never block; the registry calls them directly instead of guarding the
// call with a goroutine and a timeout.
type InMemory interface {
	AnswersFromMemory()
}

// SeriesCounter is implemented by providers that store series, for the
// adapter's series-stored gauge.
type SeriesCounter interface {
	SeriesCount() int
}

// ObjectLister resolves a label selector to object names from a watch cache
// (never a LIST per request).
type ObjectLister interface {
	// ListNames returns the names of the objects of the resource in namespace
	// (empty for cluster-scoped resources) whose labels match selector.
	ListNames(ctx context.Context, gr schema.GroupResource, namespace string, selector labels.Selector) ([]string, error)
}

// Deps are what the adapter hands every provider factory.
type Deps struct {
	// Mapper resolves label names and resources to GroupResources.
	Mapper apimeta.RESTMapper
	// Objects resolves label selectors to object names.
	Objects ObjectLister
	// Clock is the time source; tests use a fake one.
	Clock clock.PassiveClock
	// SeriesTTL and MaxAge are the command-line defaults for stores
	// (--series-ttl, --max-age); a provider's options may override them.
	SeriesTTL time.Duration
	MaxAge    time.Duration
}

// Factory builds a provider instance named name from its raw options
// (providers[].options as JSON; nil when absent). field is the config path of
// the options, for error messages ("providers[0].options").
type Factory interface {
	// Validate checks options without building anything.
	Validate(field string, options json.RawMessage) error
	// New builds the provider.
	New(name string, options json.RawMessage, deps Deps) (Provider, error)
}
