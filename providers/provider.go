package providers

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	"k8s.io/metrics/pkg/apis/external_metrics"
	"k8s.io/utils/clock"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/metricscale/metricscale/providers/naming"
)

// CustomMetricInfo and ExternalMetricInfo are custom-metrics-apiserver's, so
// a Provider's answers plug into the API server unchanged.
type (
	CustomMetricInfo   = provider.CustomMetricInfo
	ExternalMetricInfo = provider.ExternalMetricInfo
)

// Provider is one configured backend instance. On its own it serves
// nothing: a backend implements the API interfaces below for the metric
// kinds it actually has (custom-metrics-apiserver splits them the same way),
// and the registry answers a 404 naming the provider for a kind it lacks.
//
// The registry calls a provider only for metrics routed to it, always with a
// GroupResource already normalized through the RESTMapper (plural resource,
// full group: "pods", "deployments.apps") and with a context that carries the
// instance's timeout. Implementations must return promptly when the context
// is done.
type Provider interface {
	// Name is the instance name from the config (providers[].name).
	Name() string
}

// CustomProvider serves custom.metrics.k8s.io: metrics that describe
// Kubernetes objects.
type CustomProvider interface {
	Provider

	// GetMetricByName returns the metric for one object. The namespace is empty
	// for cluster-scoped objects.
	GetMetricByName(ctx context.Context, name types.NamespacedName, info CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValue, error)

	// GetMetricBySelector returns the metric for every object of the resource
	// in the namespace matching selector. Objects without a current value are
	// left out; if no object has one, it returns a 404.
	GetMetricBySelector(ctx context.Context, namespace string, selector labels.Selector, info CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValueList, error)

	// ListAllMetrics describes what the provider can currently serve, for
	// discovery. It must be cheap and must not block on a backend: it returns
	// the last known list.
	ListAllMetrics() []CustomMetricInfo
}

// ExternalProvider serves external.metrics.k8s.io: metrics of anything
// outside the cluster, selected by labels.
type ExternalProvider interface {
	Provider

	// GetExternalMetric returns every series of the metric visible from the
	// namespace that matches metricSelector, one item per series, unsummed.
	// The list and its items must not be changed after they are returned:
	// the API server encodes them after the call, possibly while other
	// callers share them, and reuses the encoding of a large answer for as
	// long as the same items come back (adapter/fastpath).
	GetExternalMetric(ctx context.Context, namespace string, metricSelector labels.Selector, info ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error)

	// ListAllExternalMetrics is ListAllMetrics for external metrics.
	ListAllExternalMetrics() []ExternalMetricInfo
}

// ResourceProvider serves metrics.k8s.io: CPU and memory usage of pods
// (per container) and nodes, as metrics-server does.
type ResourceProvider interface {
	Provider

	// GetPodMetrics returns the usage of each pod that has a value; pods
	// without one are left out.
	GetPodMetrics(ctx context.Context, pods []types.NamespacedName) ([]PodUsage, error)

	// GetNodeMetrics returns the usage of each node that has a value.
	GetNodeMetrics(ctx context.Context, nodes []string) ([]NodeUsage, error)
}

// ContainerUsage is one container's usage: CPU in cores, memory in bytes.
type ContainerUsage struct {
	Name        string
	CPU, Memory resource.Quantity
}

// PodUsage is one pod's usage over Window ending at Timestamp.
type PodUsage struct {
	Pod        types.NamespacedName
	Timestamp  time.Time
	Window     time.Duration
	Containers []ContainerUsage
}

// NodeUsage is one node's usage over Window ending at Timestamp.
type NodeUsage struct {
	Node        string
	Timestamp   time.Time
	Window      time.Duration
	CPU, Memory resource.Quantity
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
	// Accepted and Origin order the values of one series between the
	// adapter's replicas (package push's replication): Accepted is when the
	// first replica accepted the value (Unix nanoseconds) and Origin that
	// replica's id. Zero: the store stamps the sample as it stores it.
	Accepted int64
	Origin   uint64
	// Seen, for a series copied from another replica, is when that replica
	// last received it (the series TTL counts from it); zero: now.
	Seen time.Time
}

// ErrStoreFull is returned (wrapped) by an Appender whose series limit a
// push would exceed; the push endpoint answers 507.
var ErrStoreFull = errors.New("series limit reached")

// Appender is implemented by providers that accept pushed samples.
//
// A push may feed several providers and is stored whole or not at all: the
// registry serializes pushes, asks every target CheckAppend first and calls
// Append only when all agreed, so an Append after a successful CheckAppend of
// the same samples must not fail for any reason CheckAppend checks.
type Appender interface {
	// CheckAppend returns the error Append would return, storing nothing.
	CheckAppend(samples []Sample) error
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

// HealthReporter is implemented by providers that read a backend on demand
// (queue brokers, SQL): Health is the result of their last backend call. It
// does not gate /readyz on purpose: the aggregator serves an API group from
// one adapter, so one broker down must not take every other metric with it.
// The adapter reports it as metricscale_adapter_provider_up and on /providerz.
type HealthReporter interface {
	Health() error
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
	// Mapper is the cluster's RESTMapper; prefer Resources, which caches.
	Mapper apimeta.RESTMapper
	// Resources normalizes resources through Mapper with one shared cache.
	Resources *naming.Resolver
	// Objects resolves label selectors to object names.
	Objects ObjectLister
	// Clock is the time source; tests use a fake one.
	Clock clock.PassiveClock
	// Changes, if not nil, receives the changes of providers that know when
	// a value changes (see Change); providers that only read on demand
	// ignore it.
	Changes ChangeSink
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
