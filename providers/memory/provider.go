// Package memory is the default provider: an in-process store of the latest
// sample of each pushed series, served as custom and external metrics.
//
// Series map to Kubernetes objects by label, as prometheus-adapter's default
// rules do:
//
//   - a label named after a resource, singular or plural ("pod", "service",
//     "deployment", "nodes", ...), together with a "namespace" label for
//     namespaced resources, makes the series a custom metric of that object;
//   - the "namespace" label alone makes it a metric of the namespace;
//   - every series is also an external metric, visible in the namespace of
//     its "namespace" label, or in every namespace if it has none.
//
// Several series for one object are summed (a sum whose milli-value does not
// fit an int64 saturates at ±math.MaxInt64 milli-units); external queries return every
// matching series unsummed (the HPA sums). A series not pushed for the TTL
// is deleted; a value older than the maximum age is never served: the query
// gets a 404 that says it is stale. An object whose series are partly stale
// counts as stale, so a sum never mixes in or silently drops an old value.
package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unique"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	"k8s.io/metrics/pkg/apis/external_metrics"
	"k8s.io/utils/clock"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/naming"
	"github.com/metricscale/metricscale/providers/options"
)

// Type is the config type of this provider.
const Type = "memory"

// Defaults for options not set in the config or on the command line.
const (
	DefaultSeriesTTL = 10 * time.Minute
	DefaultMaxAge    = 2 * time.Minute
	DefaultMaxSeries = 1_000_000
	// DefaultMaxBytes bounds the store's byte estimate (labels, strings and
	// overhead of every series): 512 MiB. The series count alone is no
	// bound: a series at the label caps is estimated at 42 KiB (33 KiB
	// measured, BenchmarkBytesPerSeriesAtCaps), a typical one with four
	// short labels at about 540 bytes (420 measured): the default admits
	// about 12,000 series at the caps, about 1,000,000 typical ones.
	DefaultMaxBytes = 512 << 20
	// DefaultMaxExternalItems bounds the items of one external answer.
	DefaultMaxExternalItems = 10_000
)

// how long the discovery lists are reused while the store's metric and
// label names do not change (resources are resolved by naming.Resolver).
const discoveryTTL = 30 * time.Second

var namespaceLabel = unique.Make("namespace")

// Options are the provider's config options (providers[].options).
type Options struct {
	// SeriesTTL: a series not pushed for this long is deleted.
	SeriesTTL *metav1.Duration `json:"seriesTTL,omitempty"`
	// MaxAge: a value older than this is not served.
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`
	// MaxSeries bounds the store; pushes beyond it are refused.
	MaxSeries int `json:"maxSeries,omitempty"`
	// MaxBytes bounds the store's byte estimate; pushes beyond it are
	// refused (507). Default DefaultMaxBytes.
	MaxBytes int64 `json:"maxBytes,omitempty"`
	// MaxExternalItems bounds the series of one external answer; a query
	// matching more gets a 400 asking to narrow the selector. Default
	// DefaultMaxExternalItems.
	MaxExternalItems int `json:"maxExternalItems,omitempty"`
}

// Factory builds memory providers. SeriesTTL and MaxAge are the defaults of
// options.seriesTTL and options.maxAge (the adapter's --series-ttl and
// --max-age); zero: DefaultSeriesTTL and DefaultMaxAge.
type Factory struct {
	SeriesTTL time.Duration
	MaxAge    time.Duration
}

var _ providers.Factory = Factory{}

// settings are Options validated; defaults are applied in New, where the
// command line's are known.
type settings struct{ Options }

// decodeOptions decodes raw strictly and validates it; every error names
// its field below field. No options at all are valid: every one has a
// default.
func decodeOptions(field string, raw json.RawMessage) (*settings, error) {
	s := &settings{}
	if options.Empty(raw) {
		return s, nil
	}
	if err := options.Decode(field, raw, &s.Options); err != nil {
		return nil, err
	}
	o, errs := s.Options, options.Errors{}
	if o.SeriesTTL != nil && o.SeriesTTL.Duration <= 0 {
		errs.Add(field+".seriesTTL", "must be positive, got %s", o.SeriesTTL.Duration)
	}
	if o.MaxAge != nil && o.MaxAge.Duration <= 0 {
		errs.Add(field+".maxAge", "must be positive, got %s", o.MaxAge.Duration)
	}
	if o.MaxSeries < 0 {
		errs.Add(field+".maxSeries", "must not be negative, got %d", o.MaxSeries)
	}
	if o.MaxBytes < 0 {
		errs.Add(field+".maxBytes", "must not be negative, got %d", o.MaxBytes)
	}
	if o.MaxExternalItems < 0 {
		errs.Add(field+".maxExternalItems", "must not be negative, got %d", o.MaxExternalItems)
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

// Validate implements providers.Factory.
func (Factory) Validate(field string, raw json.RawMessage) error {
	_, err := decodeOptions(field, raw)
	return err
}

// New implements providers.Factory.
func (f Factory) New(name string, raw json.RawMessage, deps providers.Deps) (providers.Provider, error) {
	o, err := decodeOptions("options", raw)
	if err != nil {
		return nil, fmt.Errorf("memory provider %q: %w", name, err)
	}
	ttl, maxAge := f.SeriesTTL, f.MaxAge
	if o.SeriesTTL != nil {
		ttl = o.SeriesTTL.Duration
	}
	if o.MaxAge != nil {
		maxAge = o.MaxAge.Duration
	}
	if ttl <= 0 {
		ttl = DefaultSeriesTTL
	}
	if maxAge <= 0 {
		maxAge = DefaultMaxAge
	}
	maxSeries := o.MaxSeries
	if maxSeries == 0 {
		maxSeries = DefaultMaxSeries
	}
	clk := deps.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	res := deps.Resources
	if res == nil {
		res = naming.NewResolver(deps.Mapper, clk)
	}
	store := NewStore(clk, ttl, maxSeries)
	maxBytes := o.MaxBytes
	if maxBytes == 0 {
		maxBytes = DefaultMaxBytes
	}
	store.SetMaxBytes(maxBytes)
	p := New(name, store, res, deps.Objects, clk, maxAge)
	p.SetChanges(deps.Changes)
	if o.MaxExternalItems > 0 {
		p.maxExternalItems = o.MaxExternalItems
	}
	return p, nil
}

// Provider serves the series of a Store.
type Provider struct {
	name      string
	store     *Store
	resources *naming.Resolver
	objects   providers.ObjectLister
	clock     clock.PassiveClock
	maxAge    time.Duration
	// maxExternalItems bounds the items of one external answer.
	maxExternalItems int
	// changes, if not nil, hears of every series whose served value a
	// push or an expiry changed.
	changes providers.ChangeSink

	mu   sync.Mutex
	disc discovery
}

var (
	_ providers.CustomProvider   = (*Provider)(nil)
	_ providers.ExternalProvider = (*Provider)(nil)
	_ providers.Appender         = (*Provider)(nil)
	_ providers.Runner           = (*Provider)(nil)
	_ providers.SeriesCounter    = (*Provider)(nil)
	_ providers.ReadinessChecker = (*Provider)(nil)
	_ providers.InMemory         = (*Provider)(nil)
)

// New returns a provider named name serving store. maxAge is the oldest a
// served value may be.
func New(name string, store *Store, resources *naming.Resolver, objects providers.ObjectLister, clk clock.PassiveClock, maxAge time.Duration) *Provider {
	return &Provider{name: name, store: store, resources: resources, objects: objects, clock: clk, maxAge: maxAge, maxExternalItems: DefaultMaxExternalItems}
}

// Name implements providers.Provider.
func (p *Provider) Name() string { return p.name }

// Store returns the provider's store.
func (p *Provider) Store() *Store { return p.store }

// SetChanges makes the provider publish to sink every series whose served
// value a push or an expiry changes (nil: none). Call it before use.
func (p *Provider) SetChanges(sink providers.ChangeSink) { p.changes = sink }

// Append implements providers.Appender. With a change sink, the series
// whose served value the push changed are published once stored: new
// series, new values, and values that were too old to be served; a push of
// the values already stored publishes nothing.
func (p *Provider) Append(samples []providers.Sample) error {
	if p.changes == nil {
		if err := p.store.Append(samples); err != nil {
			return fmt.Errorf("memory provider %q: %w", p.name, err)
		}
		return nil
	}
	changed, err := p.store.appendChanged(samples, p.clock.Now().Add(-p.maxAge))
	if err != nil {
		return fmt.Errorf("memory provider %q: %w", p.name, err)
	}
	p.publish(changed)
	return nil
}

// publish sends changed series to the change sink, outside the store's
// lock.
func (p *Provider) publish(changed []changedSeries) {
	for _, c := range changed {
		lbls := make(map[string]string, len(c.labels))
		ns := ""
		for _, l := range c.labels {
			lbls[l.name.Value()] = l.value.Value()
			if l.name == namespaceLabel {
				ns = l.value.Value()
			}
		}
		// Every pushed series is an External metric, and may be a custom
		// one: no kind.
		p.changes.Publish(providers.Change{Metric: c.name, Namespace: ns, Labels: lbls})
	}
}

// CheckAppend implements providers.Appender.
func (p *Provider) CheckAppend(samples []providers.Sample) error {
	if err := p.store.CheckAppend(samples); err != nil {
		return fmt.Errorf("memory provider %q: %w", p.name, err)
	}
	return nil
}

// SeriesCount implements providers.SeriesCounter.
func (p *Provider) SeriesCount() int { return p.store.Len() }

// AnswersFromMemory implements providers.InMemory.
func (p *Provider) AnswersFromMemory() {}

// Ready implements providers.ReadinessChecker: the store is always usable.
func (p *Provider) Ready(context.Context) error { return nil }

// Run deletes expired series until ctx is done.
func (p *Provider) Run(ctx context.Context) {
	every := min(max(p.store.ttl/4, time.Second), time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n := p.expire(); n > 0 {
				klog.V(2).InfoS("Expired series", "provider", p.name, "count", n, "ttl", p.store.ttl)
			}
		}
	}
}

// expire deletes the expired series, publishing each (its metric now has
// one series less), and returns how many.
func (p *Provider) expire() int {
	if p.changes == nil {
		return p.store.Expire()
	}
	var removed []changedSeries
	n := p.store.expire(func(name string, labels []label) {
		removed = append(removed, changedSeries{name: name, labels: labels})
	})
	p.publish(removed)
	return n
}

// resourceInfo is how series name objects of one resource.
type resourceInfo struct {
	*naming.Resource
	// labels are the label names that hold the object's name: the singular
	// and plural resource names.
	labels []unique.Handle[string]
}

// resource resolves a GroupResource through the shared resolver.
func (p *Provider) resource(gr schema.GroupResource) (*resourceInfo, error) {
	if p.resources == nil {
		return nil, providers.NewBackendError(p.name, fmt.Errorf("no resolver for resource %s", gr))
	}
	res, err := p.resources.Resolve(gr)
	if err != nil {
		return nil, err
	}
	return &resourceInfo{Resource: res, labels: []unique.Handle[string]{unique.Make(res.Singular), unique.Make(res.GR.Resource)}}, nil
}

// objectName returns the name of the object of ri that sr describes in
// namespace ns ("" for cluster-scoped resources), or false.
func (ri *resourceInfo) objectName(sr *series, ns string) (string, bool) {
	if ri.IsNamespace() {
		return sr.lookup(namespaceLabel)
	}
	if ri.Namespaced {
		if v, ok := sr.lookup(namespaceLabel); !ok || v != ns {
			return "", false
		}
	}
	for _, l := range ri.labels {
		if v, ok := sr.lookup(l); ok {
			return v, v != ""
		}
	}
	return "", false
}

// agg sums the series of one object.
type agg struct {
	sum    float64
	oldest int64
	newest int64
	stale  bool
}

func (a *agg) add(sr *series, staleBefore int64) {
	if a.oldest == 0 || sr.ts < a.oldest {
		a.oldest = sr.ts
	}
	if sr.ts > a.newest {
		a.newest = sr.ts
	}
	if sr.ts < staleBefore {
		a.stale = true
	}
	// values are within ±9.3e15 and a float64 sum of them cannot overflow;
	// Quantity saturates what exceeds the int64 milli range.
	a.sum += sr.value
}

func (p *Provider) metricValue(ri *resourceInfo, ns, name, metric string, msel labels.Selector, a *agg) custom_metrics.MetricValue {
	mv := custom_metrics.MetricValue{
		DescribedObject: custom_metrics.ObjectReference{APIVersion: ri.APIVersion, Kind: ri.Kind, Namespace: ns, Name: name},
		Metric:          custom_metrics.MetricIdentifier{Name: metric},
		Timestamp:       metav1.NewTime(time.Unix(0, a.oldest)),
		Value:           Quantity(a.sum),
	}
	if ri.IsNamespace() || !ri.Namespaced {
		mv.DescribedObject.Namespace = ""
	}
	if msel != nil && !msel.Empty() {
		if ls, err := metav1.ParseToLabelSelector(msel.String()); err == nil {
			mv.Metric.Selector = ls
		}
	}
	return mv
}

func selectorOrEverything(s labels.Selector) labels.Selector {
	if s == nil {
		return labels.Everything()
	}
	return s
}

// done refuses a query whose caller has given up (a cancelled or expired
// context), as a backend provider's would: an error, never a value.
func (p *Provider) done(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return providers.NewBackendError(p.name, err)
	}
	return nil
}

// GetMetricByName implements providers.Provider.
func (p *Provider) GetMetricByName(ctx context.Context, name types.NamespacedName, info providers.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValue, error) {
	if err := p.done(ctx); err != nil {
		return nil, err
	}
	ri, err := p.resource(info.GroupResource)
	if err != nil {
		return nil, err
	}
	msel := selectorOrEverything(metricSelector)
	now := p.clock.Now().UnixNano()
	staleBefore := now - int64(p.maxAge)
	var (
		a       agg
		matched bool
		known   bool
	)
	p.store.view(info.Metric, func(f *family) {
		if f == nil {
			return
		}
		known = true
		for _, sr := range f.list {
			if !p.store.live(sr, now) {
				continue
			}
			if obj, ok := ri.objectName(sr, name.Namespace); !ok || obj != name.Name {
				continue
			}
			if !msel.Matches(sr) {
				continue
			}
			matched = true
			a.add(sr, staleBefore)
		}
	})
	object := name.Name
	if ri.Namespaced && !ri.IsNamespace() {
		object = name.Namespace + "/" + name.Name
	}
	switch {
	case !known:
		return nil, providers.NewUnknownMetric(ri.GR, info.Metric)
	case !matched:
		if !msel.Empty() {
			return nil, providers.NewNoValue(info.Metric, fmt.Sprintf("%s %s with metric selector %s", ri.GR, object, msel))
		}
		return nil, providers.NewObjectNotFound(ri.GR, info.Metric, object)
	case a.stale:
		return nil, providers.NewStale(info.Metric, ri.GR.String()+" "+object, time.Unix(0, a.newest), p.maxAge)
	}
	mv := p.metricValue(ri, name.Namespace, name.Name, info.Metric, msel, &a)
	return &mv, nil
}

// GetMetricBySelector implements providers.Provider. Objects are resolved
// through the ObjectLister (a watch cache), never listed per request.
func (p *Provider) GetMetricBySelector(ctx context.Context, namespace string, selector labels.Selector, info providers.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValueList, error) {
	if err := p.done(ctx); err != nil {
		return nil, err
	}
	ri, err := p.resource(info.GroupResource)
	if err != nil {
		return nil, err
	}
	if p.objects == nil {
		return nil, providers.NewBackendError(p.name, fmt.Errorf("no object lister to resolve %s selector %s", ri.GR, selector))
	}
	listNS := namespace
	if !ri.Namespaced {
		listNS = ""
	}
	sel := selectorOrEverything(selector)
	names, err := p.objects.ListNames(ctx, ri.GR, listNS, sel)
	if err != nil {
		return nil, err
	}
	want := make(map[string]*agg, len(names))
	for _, n := range names {
		want[n] = nil
	}
	msel := selectorOrEverything(metricSelector)
	now := p.clock.Now().UnixNano()
	staleBefore := now - int64(p.maxAge)
	known := false
	p.store.view(info.Metric, func(f *family) {
		if f == nil || len(want) == 0 {
			known = f != nil
			return
		}
		known = true
		for _, sr := range f.list {
			if !p.store.live(sr, now) {
				continue
			}
			obj, ok := ri.objectName(sr, namespace)
			if !ok {
				continue
			}
			a, wanted := want[obj]
			if !wanted || !msel.Matches(sr) {
				continue
			}
			if a == nil {
				a = &agg{}
				want[obj] = a
			}
			a.add(sr, staleBefore)
		}
	})
	what := fmt.Sprintf("%s in namespace %q matching %q", ri.GR, namespace, sel.String())
	if !ri.Namespaced {
		what = fmt.Sprintf("%s matching %q", ri.GR, sel.String())
	}
	if !known {
		return nil, providers.NewUnknownMetric(ri.GR, info.Metric)
	}
	out := &custom_metrics.MetricValueList{}
	var newestStale int64
	staleObjects := 0
	for obj, a := range want {
		if a == nil {
			continue
		}
		if a.stale {
			staleObjects++
			newestStale = max(newestStale, a.newest)
			continue
		}
		out.Items = append(out.Items, p.metricValue(ri, namespace, obj, info.Metric, msel, a))
	}
	if len(out.Items) == 0 {
		if staleObjects > 0 {
			return nil, providers.NewStale(info.Metric, what, time.Unix(0, newestStale), p.maxAge)
		}
		if len(names) == 0 {
			return nil, providers.NewNoValue(info.Metric, what+" (no such objects)")
		}
		return nil, providers.NewNoValue(info.Metric, what)
	}
	sort.Slice(out.Items, func(i, j int) bool { return out.Items[i].DescribedObject.Name < out.Items[j].DescribedObject.Name })
	return out, nil
}

// GetExternalMetric implements providers.Provider: every live series of the
// metric visible from namespace and matching the selector, unsummed. If one
// of them is stale the whole answer is refused, since the HPA would sum the
// rest into a wrong number.
func (p *Provider) GetExternalMetric(ctx context.Context, namespace string, metricSelector labels.Selector, info providers.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	if err := p.done(ctx); err != nil {
		return nil, err
	}
	msel := selectorOrEverything(metricSelector)
	now := p.clock.Now().UnixNano()
	staleBefore := now - int64(p.maxAge)
	out := &external_metrics.ExternalMetricValueList{}
	known := false
	var stale *series
	tooMany := false
	p.store.view(info.Metric, func(f *family) {
		if f == nil {
			return
		}
		known = true
		for _, sr := range f.list {
			if !p.store.live(sr, now) {
				continue
			}
			if ns, ok := sr.lookup(namespaceLabel); ok && ns != namespace {
				continue
			}
			if !msel.Matches(sr) {
				continue
			}
			if sr.ts < staleBefore {
				if stale == nil || sr.ts > stale.ts {
					stale = sr
				}
				continue
			}
			if len(out.Items) >= p.maxExternalItems {
				tooMany = true
				return
			}
			out.Items = append(out.Items, external_metrics.ExternalMetricValue{
				MetricName:   info.Metric,
				MetricLabels: sr.labelMap(),
				Timestamp:    metav1.NewTime(time.Unix(0, sr.ts)),
				Value:        Quantity(sr.value),
			})
		}
	})
	what := fmt.Sprintf("namespace %q", namespace)
	if !msel.Empty() {
		what += fmt.Sprintf(" with selector %q", msel.String())
	}
	switch {
	case !known:
		return nil, providers.NewUnknownMetric(schema.GroupResource{}, info.Metric)
	case tooMany:
		return nil, providers.NewTooManyItems(info.Metric, what, p.maxExternalItems)
	case stale != nil:
		return nil, providers.NewStale(info.Metric, what+" (series "+formatLabels(stale)+")", time.Unix(0, stale.ts), p.maxAge)
	case len(out.Items) == 0:
		return nil, providers.NewNoValue(info.Metric, what)
	}
	return out, nil
}

func formatLabels(sr *series) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, l := range sr.labels {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(l.name.Value())
		b.WriteString("=")
		b.WriteString(strconv.Quote(l.value.Value()))
	}
	b.WriteByte('}')
	return b.String()
}

// Quantity is providers.Quantity, the memory store's conversion.
func Quantity(v float64) resource.Quantity { return providers.Quantity(v) }

// discovery caches the discovery lists.
type discovery struct {
	gen      uint64
	at       time.Time
	valid    bool
	custom   []providers.CustomMetricInfo
	external []providers.ExternalMetricInfo
}

// labelResource says which resource a label name names, if any.
func (p *Provider) labelResource(name string) (schema.GroupResource, bool, bool) {
	if p.resources == nil {
		return schema.GroupResource{}, false, false
	}
	res, err := p.resources.Resolve(schema.GroupResource{Resource: name})
	if err != nil {
		return schema.GroupResource{}, false, false
	}
	return res.GR, res.Namespaced, true
}

func (p *Provider) refreshDiscovery() {
	now := p.clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	gen := p.store.generation()
	if p.disc.valid && p.disc.gen == gen && now.Sub(p.disc.at) < discoveryTTL {
		return
	}
	fams, gen := p.store.snapshot()
	d := discovery{gen: gen, at: now, valid: true}
	for _, f := range fams {
		d.external = append(d.external, providers.ExternalMetricInfo{Metric: f.name})
		hasNS := false
		for _, ln := range f.labelNames {
			if ln == "namespace" {
				hasNS = true
			}
		}
		seen := map[schema.GroupResource]bool{}
		for _, ln := range f.labelNames {
			gr, namespaced, ok := p.labelResource(ln)
			if !ok || seen[gr] || (namespaced && !hasNS) {
				continue
			}
			seen[gr] = true
			d.custom = append(d.custom, providers.CustomMetricInfo{GroupResource: gr, Namespaced: namespaced, Metric: f.name})
		}
	}
	p.disc = d
}

// ListAllMetrics implements providers.Provider.
func (p *Provider) ListAllMetrics() []providers.CustomMetricInfo {
	p.refreshDiscovery()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.disc.custom
}

// ListAllExternalMetrics implements providers.Provider.
func (p *Provider) ListAllExternalMetrics() []providers.ExternalMetricInfo {
	p.refreshDiscovery()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.disc.external
}
