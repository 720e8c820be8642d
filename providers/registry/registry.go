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
//
// The routes and instances form an immutable table behind an atomic
// pointer: Swap replaces them at once (config reload), and every query,
// discovery listing and push works on one table from start to end. An
// instance that a swap removes is retired: no new call reaches it, and its
// Drained channel closes once the calls already running on it have
// returned, so its owner can close it without cutting an in-flight query.
package registry

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
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

	// life counts the calls running on the provider; instances made by
	// WithTimeout share it, since they share the provider. Set by New and
	// Swap before the instance is published.
	life *lifecycle
}

// WithTimeout returns an instance of the same provider (same series, same
// connections, same in-flight accounting) with another timeout, for a
// reload that changes only the timeout.
func (in *Instance) WithTimeout(d time.Duration) *Instance {
	in.init()
	return &Instance{Provider: in.Provider, Timeout: d, life: in.life}
}

// Drained is closed once the instance has been retired by Swap and no call
// runs on its provider any more; nil while it is in use.
func (in *Instance) Drained() <-chan struct{} {
	if in.life == nil {
		return nil
	}
	in.life.mu.Lock()
	defer in.life.mu.Unlock()
	if !in.life.retired {
		return nil
	}
	return in.life.drained
}

// Inflight is the number of calls running on the instance's provider.
func (in *Instance) Inflight() int {
	if in.life == nil {
		return 0
	}
	in.life.mu.Lock()
	defer in.life.mu.Unlock()
	return in.life.inflight
}

func (in *Instance) init() {
	if in.life == nil {
		in.life = &lifecycle{drained: make(chan struct{})}
	}
}

// lifecycle is a provider's in-flight count and whether a swap retired it.
type lifecycle struct {
	mu       sync.Mutex
	inflight int
	retired  bool
	drained  chan struct{} // closed when retired and inflight is 0
}

// acquire counts a call; false once retired (the caller then rereads the
// current table, which no longer holds the instance).
func (l *lifecycle) acquire() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.retired {
		return false
	}
	l.inflight++
	return true
}

func (l *lifecycle) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inflight--
	if l.retired && l.inflight == 0 {
		close(l.drained)
	}
}

func (l *lifecycle) retire() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.retired {
		return
	}
	l.retired = true
	if l.inflight == 0 {
		close(l.drained)
	}
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
	resources *naming.Resolver
	clock     clock.PassiveClock

	// pushMu serializes pushes, so a push checked by every target provider
	// is stored by every one (see providers.Appender).
	pushMu sync.Mutex

	// swapMu serializes swaps; readers never take it.
	swapMu     sync.Mutex
	cur        atomic.Pointer[table]
	generation atomic.Uint64
}

// table is one immutable routing table with its discovery cache.
type table struct {
	instances  []*Instance
	routes     []route
	maxMetrics int

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
	t, err := newTable(instances, routes, maxMetrics)
	if err != nil {
		return nil, err
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	r := &Registry{resources: resources, clock: clk}
	r.cur.Store(t)
	r.generation.Store(1)
	return r, nil
}

// Swap replaces the instances and routes at once; queries that already
// picked an instance finish on it. It validates like New and changes
// nothing on error. An instance passed again (the same *Instance, or one made
// by WithTimeout from it) stays in service; the others are retired and
// returned: wait for their Drained channel before closing them.
func (r *Registry) Swap(instances []*Instance, routes []Route, maxMetrics int) (retired []*Instance, err error) {
	t, err := newTable(instances, routes, maxMetrics)
	if err != nil {
		return nil, err
	}
	r.swapMu.Lock()
	defer r.swapMu.Unlock()
	old := r.cur.Swap(t)
	r.generation.Add(1)
	kept := map[*lifecycle]bool{}
	for _, in := range t.instances {
		kept[in.life] = true
	}
	// Retire after the new table is published: a call that finds its
	// instance retired rereads the table and gets the new one.
	for _, in := range old.instances {
		if !kept[in.life] {
			kept[in.life] = true // once per provider
			in.life.retire()
			retired = append(retired, in)
		}
	}
	return retired, nil
}

// Generation counts the tables the registry has served: 1 after New, one
// more per Swap.
func (r *Registry) Generation() uint64 { return r.generation.Load() }

func newTable(instances []*Instance, routes []Route, maxMetrics int) (*table, error) {
	if len(instances) == 0 {
		return nil, errors.New("registry: no providers")
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
	t := &table{instances: instances, maxMetrics: maxMetrics}
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
		t.routes = append(t.routes, route{Route: rt, inst: in})
	}
	for _, in := range instances {
		in.init()
	}
	return t, nil
}

// Instances returns the provider instances of the current table, in config
// order.
func (r *Registry) Instances() []*Instance { return r.cur.Load().instances }

// Route returns the instance of the current table serving metric for kind
// (custom, external or resource), or nil.
func (r *Registry) Route(metric, kind string) *Instance { return r.cur.Load().route(metric, kind) }

func (t *table) route(metric, kind string) *Instance {
	for i := range t.routes {
		rt := &t.routes[i]
		if rt.Kind != kind && (rt.Kind != KindAny || kind == KindResource) {
			continue
		}
		if ok, _ := path.Match(rt.Metric, metric); ok {
			return rt.inst
		}
	}
	return nil
}

// pick returns the instance serving metric for kind with a call counted on
// it (release it with in.life.release), or nil. An instance retired between
// reading the table and counting the call is skipped by rereading the
// table, which a swap publishes before retiring anything.
func (r *Registry) pick(metric, kind string) *Instance {
	for {
		in := r.cur.Load().route(metric, kind)
		if in == nil || in.life.acquire() {
			return in
		}
	}
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

// customFor returns the custom provider serving metric, with a call counted
// on it (call releases it), or a 404.
func (r *Registry) customFor(gr schema.GroupResource, metric string) (*Instance, providers.CustomProvider, error) {
	in := r.pick(metric, KindCustom)
	if in == nil {
		return nil, nil, providers.NewUnknownMetric(gr, metric)
	}
	cp, ok := in.Provider.(providers.CustomProvider)
	if !ok {
		in.life.release()
		return nil, nil, providers.NewKindNotServed(gr, metric, in.Provider.Name())
	}
	return in, cp, nil
}

// call runs fn against in with in's timeout. A provider that does not
// return in time, or panics, yields a 503; the result is always an error the
// API server answers with its own code. in comes from pick: the call counted
// on it is released when fn returns, which for a provider that outlives its
// timeout is after call has answered, so a retired provider is not closed
// under it.
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
		defer in.life.release()
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
	in := r.pick(info.Metric, KindExternal)
	if in == nil {
		return nil, providers.NewUnknownMetric(schema.GroupResource{}, info.Metric)
	}
	ep, ok := in.Provider.(providers.ExternalProvider)
	if !ok {
		in.life.release()
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

// pickResource is ResourceProvider with a call counted on the instance.
func (r *Registry) pickResource() (*Instance, providers.ResourceProvider) {
	in := r.pick("*", KindResource)
	if in == nil {
		return nil, nil
	}
	rp, _ := in.Provider.(providers.ResourceProvider)
	return in, rp
}

// GetPodMetrics returns the usage of the pods from the resource provider,
// bounded by its timeout.
func (r *Registry) GetPodMetrics(ctx context.Context, pods []types.NamespacedName) ([]providers.PodUsage, error) {
	in, rp := r.pickResource()
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
	in, rp := r.pickResource()
	if rp == nil {
		return nil, providers.NewUnknownMetric(schema.GroupResource{Resource: "nodes"}, "cpu")
	}
	return call(ctx, in, KindResource, "nodes", func(ctx context.Context) ([]providers.NodeUsage, error) {
		return rp.GetNodeMetrics(ctx, nodes)
	})
}

// refreshDiscovery rebuilds the cached discovery lists of t if they are
// older than cacheTTL. A table's cache is its own, so a swap is seen at
// once.
func (r *Registry) refreshDiscovery(t *table) {
	now := r.clock.Now()
	t.mu.Lock()
	fresh := !t.discAt.IsZero() && now.Sub(t.discAt) < cacheTTL
	t.mu.Unlock()
	if fresh {
		telemetry.CacheHit("discovery")
		return
	}
	telemetry.CacheMiss("discovery")

	var custom []providers.CustomMetricInfo
	var external []providers.ExternalMetricInfo
	seenC := map[string]bool{}
	seenE := map[string]bool{}
	for _, in := range t.instances {
		if !in.life.acquire() {
			continue // retired by a swap since t was read: t is on its way out
		}
		if cp, ok := in.Provider.(providers.CustomProvider); ok {
			for _, m := range cp.ListAllMetrics() {
				key := m.String()
				if seenC[key] || t.route(m.Metric, KindCustom) != in {
					continue
				}
				seenC[key] = true
				custom = append(custom, m)
			}
		}
		if ep, ok := in.Provider.(providers.ExternalProvider); ok {
			for _, m := range ep.ListAllExternalMetrics() {
				if seenE[m.Metric] || t.route(m.Metric, KindExternal) != in {
					continue
				}
				seenE[m.Metric] = true
				external = append(external, m)
			}
		}
		in.life.release()
	}
	sort.Slice(custom, func(i, j int) bool { return custom[i].String() < custom[j].String() })
	sort.Slice(external, func(i, j int) bool { return external[i].Metric < external[j].Metric })
	if len(custom) > t.maxMetrics {
		klog.V(2).InfoS("Custom metrics discovery truncated", "metrics", len(custom), "max", t.maxMetrics)
		custom = custom[:t.maxMetrics]
	}
	if len(external) > t.maxMetrics {
		klog.V(2).InfoS("External metrics discovery truncated", "metrics", len(external), "max", t.maxMetrics)
		external = external[:t.maxMetrics]
	}
	if len(custom) == 0 {
		custom = []providers.CustomMetricInfo{{GroupResource: schema.GroupResource{Resource: "namespaces"}, Metric: PlaceholderCustomMetric}}
	}
	if len(external) == 0 {
		external = []providers.ExternalMetricInfo{{Metric: PlaceholderExternalMetric}}
	}
	t.mu.Lock()
	t.custom, t.external, t.discAt = custom, external, now
	t.mu.Unlock()
}

// ListAllMetrics implements provider.CustomMetricsProvider; the list is
// bounded by maxMetrics and never empty.
func (r *Registry) ListAllMetrics() []provider.CustomMetricInfo {
	t := r.cur.Load()
	r.refreshDiscovery(t)
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]provider.CustomMetricInfo(nil), t.custom...)
}

// ListAllExternalMetrics implements provider.ExternalMetricsProvider; the
// list is bounded by maxMetrics and never empty.
func (r *Registry) ListAllExternalMetrics() []provider.ExternalMetricInfo {
	t := r.cur.Load()
	r.refreshDiscovery(t)
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]provider.ExternalMetricInfo(nil), t.external...)
}

// InvalidateDiscovery makes the next discovery call rebuild its lists.
func (r *Registry) InvalidateDiscovery() {
	t := r.cur.Load()
	t.mu.Lock()
	t.discAt = time.Time{}
	t.mu.Unlock()
}

// Append routes pushed samples to the providers that serve their metrics
// (for custom and for external queries, if those differ) and stores them
// whole or not at all: every sample is routed, and every target provider
// checks its share, before any is stored. A sample without a route, or
// routed to a provider that does not accept pushes, fails the whole push.
func (r *Registry) Append(samples []providers.Sample) error {
	for {
		// A target retired by a swap while routing: route again on the new
		// table (published before anything is retired).
		if err := r.appendOnce(r.cur.Load(), samples); !errors.Is(err, errRetired) {
			return err
		}
	}
}

// errRetired means a target of a push was retired while it was routed.
var errRetired = errors.New("registry: provider retired during the push")

func (r *Registry) appendOnce(t *table, samples []providers.Sample) error {
	type batch struct {
		app     providers.Appender
		samples []providers.Sample
	}
	var order []*batch
	byInst := map[*Instance]*batch{}
	var held []*Instance
	defer func() {
		for _, in := range held {
			in.life.release()
		}
	}()
	for i, s := range samples {
		targets := [2]*Instance{t.route(s.Name, KindCustom), t.route(s.Name, KindExternal)}
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
				if !in.life.acquire() {
					return errRetired
				}
				held = append(held, in)
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
	for _, in := range r.Instances() {
		if sc, ok := in.Provider.(providers.SeriesCounter); ok {
			telemetry.Series.WithLabelValues(in.Provider.Name()).Set(float64(sc.SeriesCount()))
		}
	}
}
