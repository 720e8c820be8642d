package metricsource

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	cmint "k8s.io/metrics/pkg/apis/custom_metrics"
	custommetricsv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	externalmetricsv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	resourceclient "k8s.io/metrics/pkg/client/clientset/versioned/typed/metrics/v1beta1"
	customclient "k8s.io/metrics/pkg/client/custom_metrics"
	customscheme "k8s.io/metrics/pkg/client/custom_metrics/scheme"

	"github.com/metricscale/metricscale/autoscaler/arith"
	"github.com/metricscale/metricscale/providers/changefeed"
)

// REST reads the three metrics APIs through the API server's aggregation
// layer, as the HPA controller does, except that every read honours its
// context: k8s.io/metrics' custom and external clients send theirs with
// context.TODO(), so a hung adapter held the reading worker until the
// connection broke. The custom metrics version is discovered as theirs is.
type REST struct {
	resource resourceclient.PodMetricsesGetter
	external rest.Interface
	custom   *customMetrics
	// observe, when set, is told of every read: the API ("resource",
	// "custom", "external"), how long it took and its error.
	observe func(api string, took time.Duration, err error)
}

var _ Source = (*REST)(nil)

// NewREST builds the clients of the three metrics APIs from cfg (its
// QPS/Burst or RateLimiter apply to each: give cfg a RateLimiter for one
// limit shared by all). apis says which custom.metrics.k8s.io version to
// use; observe may be nil.
func NewREST(cfg *rest.Config, mapper meta.RESTMapper, apis customclient.AvailableAPIsGetter, observe func(api string, took time.Duration, err error)) (*REST, error) {
	res, err := resourceclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("resource metrics client: %w", err)
	}
	extCfg := rest.CopyConfig(cfg)
	extCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return servedByTransport{rt} })
	ext, err := apiClient(extCfg, externalmetricsv1beta1.SchemeGroupVersion, scheme.Codecs.WithoutConversion())
	if err != nil {
		return nil, fmt.Errorf("external metrics client: %w", err)
	}
	return &REST{
		resource: res, external: ext, observe: observe,
		custom: &customMetrics{cfg: rest.CopyConfig(cfg), mapper: mapper, apis: apis, clients: map[schema.GroupVersion]rest.Interface{}},
	}, nil
}

// apiClient is a REST client of one metrics API group version.
func apiClient(base *rest.Config, gv schema.GroupVersion, codecs runtime.NegotiatedSerializer) (rest.Interface, error) {
	cfg := rest.CopyConfig(base)
	cfg.APIPath = "/apis"
	cfg.GroupVersion = &gv
	cfg.NegotiatedSerializer = codecs
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	return rest.RESTClientFor(cfg)
}

func (r *REST) done(api string, start time.Time, err error) {
	if r.observe != nil {
		r.observe(api, time.Since(start), err)
	}
}

// ResourceMetric implements Source.
func (r *REST) ResourceMetric(ctx context.Context, resource corev1.ResourceName, namespace string, selector labels.Selector, container string) (PodMetricsInfo, time.Time, error) {
	start := time.Now()
	list, err := r.resource.PodMetricses(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	r.done("resource", start, err)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("unable to fetch metrics from resource metrics API: %w", err)
	}
	return FromPodMetrics(list.Items, resource, container, false)
}

// PodsMetric implements Source.
func (r *REST) PodsMetric(ctx context.Context, metricName, namespace string, selector, metricSelector labels.Selector) (PodMetricsInfo, time.Time, error) {
	start := time.Now()
	list, err := r.custom.get(ctx, schema.GroupKind{Kind: "Pod"}, namespace, custommetricsv1beta2.AllObjects, metricName, selector, metricSelector)
	r.done("custom", start, err)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("unable to fetch metrics from custom metrics API: %w", err)
	}
	return FromCustomMetrics(list.Items, false)
}

// ObjectMetric implements Source. A core Namespace is always the
// autoscaler's own: a reference cannot reach out of its namespace.
func (r *REST) ObjectMetric(ctx context.Context, metricName, namespace string, ref *autoscalingv2.CrossVersionObjectReference, metricSelector labels.Selector) (int64, time.Time, error) {
	gk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind).GroupKind()
	name := ref.Name
	if gk.Kind == "Namespace" && gk.Group == "" {
		name = namespace
	}
	start := time.Now()
	list, err := r.custom.get(ctx, gk, namespace, name, metricName, nil, metricSelector)
	if err == nil && len(list.Items) != 1 {
		err = fmt.Errorf("the custom metrics API server returned %d results when we asked for exactly one", len(list.Items))
	}
	r.done("custom", start, err)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("unable to fetch metrics from custom metrics API: %w", err)
	}
	v := &list.Items[0]
	return arith.MilliValue(v.Value, false), v.Timestamp.Time, nil
}

// ExternalMetric implements Source.
func (r *REST) ExternalMetric(ctx context.Context, metricName, namespace string, selector labels.Selector) ([]int64, time.Time, error) {
	start := time.Now()
	list := &externalmetricsv1beta1.ExternalMetricValueList{}
	req := r.external.Get().Namespace(namespace).Resource(metricName)
	// The query ListOptions{LabelSelector} would make, without the
	// parameter codec's reflection at every read.
	if s := selector.String(); s != "" {
		req = req.Param("labelSelector", s)
	}
	err := req.Do(ctx).Into(list)
	r.done("external", start, err)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("unable to fetch metrics from external metrics API: %w", err)
	}
	return FromExternalMetrics(list.Items, false)
}

// servedByKey carries WithServedBy's *string in a context.
type servedByKey struct{}

// WithServedBy asks REST to record, in *replica, which adapter replica
// answered the External read made under ctx: the answer's
// changefeed.ReplicaHeader, "" if it has none. One read at a time under
// ctx.
func WithServedBy(ctx context.Context, replica *string) context.Context {
	return context.WithValue(ctx, servedByKey{}, replica)
}

// RecordServedBy records replica as the answerer of the read made under
// ctx, if ctx asks (WithServedBy): REST records the answer's header; a
// Source of another kind may record its own.
func RecordServedBy(ctx context.Context, replica string) {
	if p, ok := ctx.Value(servedByKey{}).(*string); ok {
		*p = replica
	}
}

// servedByTransport records the answering replica of the requests whose
// context asks for it (WithServedBy). The aggregator passes the adapter's
// answer headers on.
type servedByTransport struct{ next http.RoundTripper }

func (t servedByTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	replica := ""
	if err == nil {
		replica = resp.Header.Get(changefeed.ReplicaHeader)
	}
	RecordServedBy(req.Context(), replica)
	return resp, err
}

// WrappedRoundTripper lets client-go see through the wrapper.
func (t servedByTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

// customMetrics reads custom.metrics.k8s.io in the version discovery
// prefers (v1beta2, or v1beta1 from older adapters), as k8s.io/metrics'
// client does, with the caller's context.
type customMetrics struct {
	cfg    *rest.Config
	mapper meta.RESTMapper
	apis   customclient.AvailableAPIsGetter

	mu      sync.Mutex
	clients map[schema.GroupVersion]rest.Interface
}

var customConverter = customclient.NewMetricConverter()

func (c *customMetrics) client() (rest.Interface, schema.GroupVersion, error) {
	gv, err := c.apis.PreferredVersion()
	if err != nil {
		return nil, gv, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.clients[gv]; ok {
		return cl, gv, nil
	}
	cl, err := apiClient(c.cfg, gv, customscheme.Codecs.WithoutConversion())
	if err != nil {
		return nil, gv, err
	}
	c.clients[gv] = cl
	return cl, gv, nil
}

// get reads metricName of the object name of gk in namespace (the
// namespace itself for a core Namespace), or of those selector selects
// when name is "*", as a v1beta2 list.
func (c *customMetrics) get(ctx context.Context, gk schema.GroupKind, namespace, name, metricName string, selector, metricSelector labels.Selector) (*custommetricsv1beta2.MetricValueList, error) {
	cl, gv, err := c.client()
	if err != nil {
		return nil, err
	}
	opts := &cmint.MetricListOptions{MetricLabelSelector: metricSelector.String()}
	if selector != nil {
		opts.LabelSelector = selector.String()
	}
	params, err := customConverter.ConvertListOptionsToVersion(opts, gv)
	if err != nil {
		return nil, err
	}
	req := cl.Get()
	if gk.Kind == "Namespace" && gk.Group == "" {
		// /namespaces/NS/metrics/NAME: a namespace's own metric
		req = req.Resource("metrics").Namespace(name).Name(metricName)
	} else {
		mapping, err := c.mapper.RESTMapping(gk)
		if err != nil {
			return nil, fmt.Errorf("unable to map kind %s to resource: %w", gk, err)
		}
		req = req.Resource(mapping.Resource.GroupResource().String()).Namespace(namespace).Name(name).SubResource(metricName)
	}
	obj, err := customConverter.ConvertResultToVersion(req.VersionedParams(params, customscheme.ParameterCodec).Do(ctx), custommetricsv1beta2.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	list, ok := obj.(*custommetricsv1beta2.MetricValueList)
	if !ok {
		return nil, fmt.Errorf("the custom metrics API server answered a %T, not a MetricValueList", obj)
	}
	return list, nil
}
