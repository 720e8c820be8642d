// Package registry routes each metric to the provider instance that serves
// it, so several providers serve at once behind one API server.
//
// A Registry implements custom-metrics-apiserver's provider.MetricsProvider:
// it normalizes the resource of custom metric queries through the
// RESTMapper, picks the provider by the first route whose glob matches the
// metric name, bounds the call by the provider's timeout (a provider that
// hangs yields a 503, never a hung request), converts every error to API
// semantics and records the adapter's metrics. Routing is per kind: a route
// may name a provider for custom, external or resource (metrics.k8s.io)
// metrics, and a query routed to a provider that does not serve its kind is a
// 404 naming the provider. Discovery merges the providers' lists, keeps each
// metric only under the provider its route names, and is bounded and never
// empty. A push is stored whole or not at all, across providers.
package registry

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	"k8s.io/metrics/pkg/apis/external_metrics"
	"k8s.io/utils/clock"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/naming"
	"github.com/metricscale/metricscale/providers/telemetry"
)

// Kinds a route can be limited to.
const (
	KindAny      = "" // custom and external, not resource
	KindCustom   = "custom"
	KindExternal = "external"
	// KindResource routes metrics.k8s.io (CPU and memory of pods and nodes);
	// it is never implied by KindAny, and its route's metric must be "*".
	KindResource = "resource"
)

// Placeholders keep discovery non-empty while no metric exists: an empty
// resource list makes clients treat the group version as broken. Queries of
// them answer 404 like any unknown metric.
const (
	PlaceholderCustomMetric   = "metricscale_no_metrics_yet"
	PlaceholderExternalMetric = "metricscale_no_metrics_yet"
)

// how long discovery lists are reused.
const cacheTTL = 5 * time.Second

// Instance is a provider with its per-query timeout.
type Instance struct {
	Provider providers.Provider
	Timeout  time.Duration
}

// Route sends metrics whose name matches the glob Metric (path.Match) to the
// provider named Provider; Kind limits it to custom or external metrics.
type Route struct {
	Metric   string
	Provider string
	Kind     string
}

type route struct {
	Route
	inst *Instance
}

// Registry routes queries; it is safe for concurrent use.
type Registry struct {
	instances  []*Instance
	routes     []route
	resources  *naming.Resolver
	maxMetrics int
	clock      clock.PassiveClock

	// pushMu serializes pushes, so a push checked by every target provider
	// is stored by every one (see providers.Appender).
	pushMu sync.Mutex

	mu       sync.Mutex
	discAt   time.Time
	custom   []providers.CustomMetricInfo
	external []providers.ExternalMetricInfo
}

var _ provider.MetricsProvider = (*Registry)(nil)

// New builds a registry over instances (in config order) and routes (first
// match wins). resources normalizes the resources of custom metric queries;
// maxMetrics bounds each discovery list.
func New(instances []*Instance, routes []Route, resources *naming.Resolver, maxMetrics int, clk clock.PassiveClock) (*Registry, error) {
	if len(instances) == 0 {
		return nil, errors.New("registry: no providers")
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	if maxMetrics <= 0 {
		maxMetrics = 1000
	}
	byName := map[string]*Instance{}
	for i, in := range instances {
		if in == nil || in.Provider == nil {
			return nil, fmt.Errorf("registry: provider %d is nil", i)
		}
		name := in.Provider.Name()
		if _, dup := byName[name]; dup {
			return nil, fmt.Errorf("registry: duplicate provider name %q", name)
		}
		if in.Timeout <= 0 {
			return nil, fmt.Errorf("registry: provider %q: timeout must be positive", name)
		}
		byName[name] = in
	}
	r := &Registry{instances: instances, resources: resources, maxMetrics: maxMetrics, clock: clk}
	for i, rt := range routes {
		in, ok := byName[rt.Provider]
		if !ok {
			return nil, fmt.Errorf("registry: routes[%d]: unknown provider %q", i, rt.Provider)
		}
		if _, err := path.Match(rt.Metric, ""); err != nil {
			return nil, fmt.Errorf("registry: routes[%d]: pattern %q: %w", i, rt.Metric, err)
		}
		switch rt.Kind {
		case KindAny, KindCustom, KindExternal:
		case KindResource:
			if rt.Metric != "*" {
				return nil, fmt.Errorf("registry: routes[%d]: a resource route serves cpu and memory together: its metric must be \"*\", not %q", i, rt.Metric)
			}
			if _, ok := in.Provider.(providers.ResourceProvider); !ok {
				return nil, fmt.Errorf("registry: routes[%d]: provider %q serves no resource metrics", i, rt.Provider)
			}
		default:
			return nil, fmt.Errorf("registry: routes[%d]: unknown kind %q", i, rt.Kind)
		}
		if rt.Kind == KindCustom {
			if _, ok := in.Provider.(providers.CustomProvider); !ok {
				return nil, fmt.Errorf("registry: routes[%d]: provider %q serves no custom metrics", i, rt.Provider)
			}
		}
		if rt.Kind == KindExternal {
			if _, ok := in.Provider.(providers.ExternalProvider); !ok {
				return nil, fmt.Errorf("registry: routes[%d]: provider %q serves no external metrics", i, rt.Provider)
			}
		}
		r.routes = append(r.routes, route{Route: rt, inst: in})
	}
	return r, nil
}

// Instances returns the provider instances in config order.
func (r *Registry) Instances() []*Instance { return r.instances }

// Route returns the instance serving metric for kind (custom, external or
// resource), or nil.
func (r *Registry) Route(metric, kind string) *Instance {
	for i := range r.routes {
		rt := &r.routes[i]
		if rt.Kind != kind && (rt.Kind != KindAny || kind == KindResource) {
			continue
		}
		if ok, _ := path.Match(rt.Metric, metric); ok {
			return rt.inst
		}
	}
	return nil
}

// normalize resolves gr to its canonical plural, fully-grouped form.
func (r *Registry) normalize(gr schema.GroupResource) (schema.GroupResource, error) {
	if r.resources == nil {
		return gr, providers.NewBackendError("registry", errors.New("no resource resolver"))
	}
	if r.resources.Hit(gr) {
		telemetry.CacheHit("resource")
	} else {
		telemetry.CacheMiss("resource")
	}
	res, err := r.resources.Resolve(gr)
	if err != nil {
		var ur *naming.UnknownResourceError
		if errors.As(err, &ur) {
			return gr, providers.NewUnknownResource(gr)
		}
		return gr, apierrors.NewBadRequest(fmt.Sprintf("resource %q: %v", gr.String(), err))
	}
	return res.GR, nil
}

// customFor returns the custom provider serving metric, or a 404.
func (r *Registry) customFor(gr schema.GroupResource, metric string) (*Instance, providers.CustomProvider, error) {
	in := r.Route(metric, KindCustom)
	if in == nil {
		return nil, nil, providers.NewUnknownMetric(gr, metric)
	}
	cp, ok := in.Provider.(providers.CustomProvider)
	if !ok {
		return nil, nil, providers.NewKindNotServed(gr, metric, in.Provider.Name())
	}
	return in, cp, nil
}

// call runs fn against in with in's timeout. A provider that does not
// return in time, or panics, yields a 503; the result is always an error the
// API server answers with its own code.
func call[T any](ctx context.Context, in *Instance, api, metric string, fn func(context.Context) (T, error)) (T, error) {
	name := in.Provider.Name()
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, in.Timeout)
	defer cancel()

	type result struct {
		v   T
		err error
	}
	guarded := func(ch chan<- result) {
		defer func() {
			if p := recover(); p != nil {
				var zero T
				ch <- result{zero, fmt.Errorf("provider panicked: %v", p)}
			}
		}()
		v, err := fn(ctx)
		ch <- result{v, err}
	}
	var res result
	if _, inMemory := in.Provider.(providers.InMemory); inMemory {
		ch := make(chan result, 1)
		guarded(ch)
		res = <-ch
	} else {
		ch := make(chan result, 1)
		go guarded(ch)
		select {
		case res = <-ch:
		case <-ctx.Done():
			res.err = fmt.Errorf("no answer for metric %q within %s: %w", metric, in.Timeout, ctx.Err())
		}
	}
	elapsed := time.Since(start)
	res.err = providers.ToAPIError(name, res.err)

	label := metric
	code := 200
	if res.err != nil {
		reason := providers.ReasonOf(res.err)
		if reason == providers.ReasonUnknownMetric {
			label = telemetry.UnknownMetric
		}
		code = statusCode(res.err)
		telemetry.BackendErrors.WithLabelValues(name, string(reason)).Inc()
		if reason == providers.ReasonBackend {
			klog.ErrorS(res.err, "Metric query failed", "provider", name, "api", api, "metric", metric, "elapsed", elapsed)
		} else {
			klog.V(4).InfoS("Metric query answered with an error", "provider", name, "api", api, "metric", metric, "reason", reason, "err", res.err)
		}
	}
	telemetry.Requests.WithLabelValues(name, api, label, strconv.Itoa(code)).Inc()
	telemetry.RequestDuration.WithLabelValues(name, api, label).Observe(elapsed.Seconds())
	return res.v, res.err
}

func statusCode(err error) int {
	var st apierrors.APIStatus
	if errors.As(err, &st) && st.Status().Code != 0 {
		return int(st.Status().Code)
	}
	return 500
}

// GetMetricByName implements provider.CustomMetricsProvider.
func (r *Registry) GetMetricByName(ctx context.Context, name types.NamespacedName, info provider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValue, error) {
	gr, err := r.normalize(info.GroupResource)
	if err != nil {
		return nil, err
	}
	info.GroupResource = gr
	in, cp, err := r.customFor(gr, info.Metric)
	if err != nil {
		return nil, err
	}
	return call(ctx, in, KindCustom, info.Metric, func(ctx context.Context) (*custom_metrics.MetricValue, error) {
		return cp.GetMetricByName(ctx, name, info, metricSelector)
	})
}

// GetMetricBySelector implements provider.CustomMetricsProvider.
func (r *Registry) GetMetricBySelector(ctx context.Context, namespace string, selector labels.Selector, info provider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValueList, error) {
	gr, err := r.normalize(info.GroupResource)
	if err != nil {
		return nil, err
	}
	info.GroupResource = gr
	in, cp, err := r.customFor(gr, info.Metric)
	if err != nil {
		return nil, err
	}
	return call(ctx, in, KindCustom, info.Metric, func(ctx context.Context) (*custom_metrics.MetricValueList, error) {
		return cp.GetMetricBySelector(ctx, namespace, selector, info, metricSelector)
	})
}

// GetExternalMetric implements provider.ExternalMetricsProvider.
func (r *Registry) GetExternalMetric(ctx context.Context, namespace string, metricSelector labels.Selector, info provider.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	in := r.Route(info.Metric, KindExternal)
	if in == nil {
		return nil, providers.NewUnknownMetric(schema.GroupResource{}, info.Metric)
	}
	ep, ok := in.Provider.(providers.ExternalProvider)
	if !ok {
		return nil, providers.NewKindNotServed(schema.GroupResource{}, info.Metric, in.Provider.Name())
	}
	return call(ctx, in, KindExternal, info.Metric, func(ctx context.Context) (*external_metrics.ExternalMetricValueList, error) {
		return ep.GetExternalMetric(ctx, namespace, metricSelector, info)
	})
}

// ResourceProvider returns the provider that serves metrics.k8s.io, or nil
// when no route of kind resource exists.
func (r *Registry) ResourceProvider() (*Instance, providers.ResourceProvider) {
	in := r.Route("*", KindResource)
	if in == nil {
		return nil, nil
	}
	rp, _ := in.Provider.(providers.ResourceProvider) // checked in New
	return in, rp
}

// GetPodMetrics returns the usage of the pods from the resource provider,
// bounded by its timeout.
func (r *Registry) GetPodMetrics(ctx context.Context, pods []types.NamespacedName) ([]providers.PodUsage, error) {
	in, rp := r.ResourceProvider()
	if rp == nil {
		return nil, providers.NewUnknownMetric(schema.GroupResource{Resource: "pods"}, "cpu")
	}
	return call(ctx, in, KindResource, "pods", func(ctx context.Context) ([]providers.PodUsage, error) {
		return rp.GetPodMetrics(ctx, pods)
	})
}

// GetNodeMetrics returns the usage of the nodes from the resource provider,
// bounded by its timeout.
func (r *Registry) GetNodeMetrics(ctx context.Context, nodes []string) ([]providers.NodeUsage, error) {
	in, rp := r.ResourceProvider()
	if rp == nil {
		return nil, providers.NewUnknownMetric(schema.GroupResource{Resource: "nodes"}, "cpu")
	}
	return call(ctx, in, KindResource, "nodes", func(ctx context.Context) ([]providers.NodeUsage, error) {
		return rp.GetNodeMetrics(ctx, nodes)
	})
}

// refreshDiscovery rebuilds the cached discovery lists if they are older
// than cacheTTL.
func (r *Registry) refreshDiscovery() {
	now := r.clock.Now()
	r.mu.Lock()
	fresh := !r.discAt.IsZero() && now.Sub(r.discAt) < cacheTTL
	r.mu.Unlock()
	if fresh {
		telemetry.CacheHit("discovery")
		return
	}
	telemetry.CacheMiss("discovery")

	var custom []providers.CustomMetricInfo
	var external []providers.ExternalMetricInfo
	seenC := map[string]bool{}
	seenE := map[string]bool{}
	for _, in := range r.instances {
		if cp, ok := in.Provider.(providers.CustomProvider); ok {
			for _, m := range cp.ListAllMetrics() {
				key := m.String()
				if seenC[key] || r.Route(m.Metric, KindCustom) != in {
					continue
				}
				seenC[key] = true
				custom = append(custom, m)
			}
		}
		if ep, ok := in.Provider.(providers.ExternalProvider); ok {
			for _, m := range ep.ListAllExternalMetrics() {
				if seenE[m.Metric] || r.Route(m.Metric, KindExternal) != in {
					continue
				}
				seenE[m.Metric] = true
				external = append(external, m)
			}
		}
	}
	sort.Slice(custom, func(i, j int) bool { return custom[i].String() < custom[j].String() })
	sort.Slice(external, func(i, j int) bool { return external[i].Metric < external[j].Metric })
	if len(custom) > r.maxMetrics {
		klog.V(2).InfoS("Custom metrics discovery truncated", "metrics", len(custom), "max", r.maxMetrics)
		custom = custom[:r.maxMetrics]
	}
	if len(external) > r.maxMetrics {
		klog.V(2).InfoS("External metrics discovery truncated", "metrics", len(external), "max", r.maxMetrics)
		external = external[:r.maxMetrics]
	}
	if len(custom) == 0 {
		custom = []providers.CustomMetricInfo{{GroupResource: schema.GroupResource{Resource: "namespaces"}, Metric: PlaceholderCustomMetric}}
	}
	if len(external) == 0 {
		external = []providers.ExternalMetricInfo{{Metric: PlaceholderExternalMetric}}
	}
	r.mu.Lock()
	r.custom, r.external, r.discAt = custom, external, now
	r.mu.Unlock()
}

// ListAllMetrics implements provider.CustomMetricsProvider; the list is
// bounded by maxMetrics and never empty.
func (r *Registry) ListAllMetrics() []provider.CustomMetricInfo {
	r.refreshDiscovery()
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]provider.CustomMetricInfo(nil), r.custom...)
}

// ListAllExternalMetrics implements provider.ExternalMetricsProvider; the
// list is bounded by maxMetrics and never empty.
func (r *Registry) ListAllExternalMetrics() []provider.ExternalMetricInfo {
	r.refreshDiscovery()
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]provider.ExternalMetricInfo(nil), r.external...)
}

// InvalidateDiscovery makes the next discovery call rebuild its lists.
func (r *Registry) InvalidateDiscovery() {
	r.mu.Lock()
	r.discAt = time.Time{}
	r.mu.Unlock()
}

// Append routes pushed samples to the providers that serve their metrics
// (for custom and for external queries, if those differ) and stores them
// whole or not at all: every sample is routed, and every target provider
// checks its share, before any is stored. A sample without a route, or
// routed to a provider that does not accept pushes, fails the whole push.
func (r *Registry) Append(samples []providers.Sample) error {
	type batch struct {
		app     providers.Appender
		samples []providers.Sample
	}
	var order []*batch
	byInst := map[*Instance]*batch{}
	for i, s := range samples {
		targets := [2]*Instance{r.Route(s.Name, KindCustom), r.Route(s.Name, KindExternal)}
		if targets[0] == nil && targets[1] == nil {
			return fmt.Errorf("sample %d: no route serves metric %q", i, s.Name)
		}
		if targets[0] == targets[1] {
			targets[1] = nil
		}
		for _, in := range targets {
			if in == nil {
				continue
			}
			b := byInst[in]
			if b == nil {
				app, ok := in.Provider.(providers.Appender)
				if !ok {
					return fmt.Errorf("sample %d: metric %q is served by provider %q, which does not accept pushes", i, s.Name, in.Provider.Name())
				}
				b = &batch{app: app}
				byInst[in] = b
				order = append(order, b)
			}
			b.samples = append(b.samples, s)
		}
	}
	r.pushMu.Lock()
	defer r.pushMu.Unlock()
	if len(order) > 1 {
		for _, b := range order {
			if err := b.app.CheckAppend(b.samples); err != nil {
				return err
			}
		}
	}
	for _, b := range order {
		if err := b.app.Append(b.samples); err != nil {
			return err
		}
	}
	return nil
}

// UpdateSeriesGauge sets the series-stored gauge of every provider that
// stores series.
func (r *Registry) UpdateSeriesGauge() {
	for _, in := range r.instances {
		if sc, ok := in.Provider.(providers.SeriesCounter); ok {
			telemetry.Series.WithLabelValues(in.Provider.Name()).Set(float64(sc.SeriesCount()))
		}
	}
}
