// Package objects resolves label selectors to object names from shared
// metadata-only informers (client-go), so a Pods metric query never LISTs
// the API server. The allowed resources (pods, always, and the config's
// selectorResources, by default pods and namespaces: exactly what
// manifests/adapter/rbac.yaml grants list and watch on) get an informer the
// first time a selector query asks for them, so an adapter that serves only
// External metrics holds no pod in memory. That first query waits for the
// cache to fill, at most until its context is done (then a 503 carrying the
// last watch error). A query on any other resource is refused with a 400
// and starts nothing. When the adapter serves metrics.k8s.io, whose storage
// reads the pod and node caches through Pods and Nodes, pods and nodes are
// watched from the start (WatchPods, WatchNodes).
package objects

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/telemetry"
)

// PodsGVR is watched from the first selector query on pods, or from the
// start when metrics.k8s.io is served (WatchPods).
var PodsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// NodesGVR is watched only when metrics.k8s.io is served (WatchNodes).
var NodesGVR = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}

// DefaultSelectorResources are the resources selector queries may name when
// the config lists none. manifests/adapter/rbac.yaml grants list and watch
// on exactly these (a test checks it).
var DefaultSelectorResources = []schema.GroupResource{{Resource: "pods"}, {Resource: "namespaces"}}

// Lister is a providers.ObjectLister over metadata informers.
type Lister struct {
	factory metadatainformer.SharedInformerFactory
	mapper  apimeta.RESTMapper
	allowed map[schema.GroupResource]bool

	mu        sync.Mutex
	ctx       context.Context
	informers map[schema.GroupResource]*entry
}

type entry struct {
	gvr      schema.GroupVersionResource
	informer cache.SharedIndexInformer

	mu      sync.Mutex
	lastErr error
}

func (e *entry) setErr(err error) {
	e.mu.Lock()
	e.lastErr = err
	e.mu.Unlock()
}

func (e *entry) err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lastErr
}

var _ providers.ObjectLister = (*Lister)(nil)

// stripForCache keeps only what selector queries need.
func stripForCache(obj any) (any, error) {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		m.ManagedFields = nil
		m.Annotations = nil
		m.OwnerReferences = nil
	}
	return obj, nil
}

// New returns a Lister that watches nothing until a selector query asks
// (or WatchPods or WatchNodes). allowed are the resources selector queries
// may name (none: DefaultSelectorResources); pods are always allowed, since
// the manifests always grant list and watch on them.
func New(client metadata.Interface, mapper apimeta.RESTMapper, allowed ...schema.GroupResource) *Lister {
	if len(allowed) == 0 {
		allowed = DefaultSelectorResources
	}
	l := &Lister{
		factory:   metadatainformer.NewSharedInformerFactoryWithOptions(client, 0, metadatainformer.WithTransform(stripForCache)),
		mapper:    mapper,
		allowed:   map[schema.GroupResource]bool{PodsGVR.GroupResource(): true},
		informers: map[schema.GroupResource]*entry{},
	}
	for _, gr := range allowed {
		l.allowed[gr] = true
	}
	return l
}

// SetAllowed replaces the resources selector queries may name (a config
// reload of selectorResources; none: DefaultSelectorResources). An added
// resource is watched from its first query, as at start; a removed one is
// refused from now on, but its informer, if one started, keeps its watch
// until the adapter restarts: a shared informer factory cannot stop one.
func (l *Lister) SetAllowed(allowed ...schema.GroupResource) {
	if len(allowed) == 0 {
		allowed = DefaultSelectorResources
	}
	m := map[schema.GroupResource]bool{PodsGVR.GroupResource(): true}
	for _, gr := range allowed {
		m[gr] = true
	}
	l.mu.Lock()
	l.allowed = m
	l.mu.Unlock()
}

func (l *Lister) add(gvr schema.GroupVersionResource) *entry {
	e := &entry{gvr: gvr, informer: l.factory.ForResource(gvr).Informer()}
	_ = e.informer.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		e.setErr(err)
		klog.V(2).InfoS("Watch failed", "resource", gvr.GroupResource().String(), "err", err)
	})
	l.informers[gvr.GroupResource()] = e
	return e
}

// WatchPods watches pods from Start on rather than from the first selector
// query on them, for metrics.k8s.io's PodMetrics, which reads the cache
// through Pods; call it before Start (after, it starts the watch at once).
func (l *Lister) WatchPods() { l.watch(PodsGVR) }

// WatchNodes adds a metadata informer for nodes, for metrics.k8s.io's
// NodeMetrics; call it before Start (after, it starts the watch at once).
// It does not make nodes a resource selector queries may name.
func (l *Lister) WatchNodes() { l.watch(NodesGVR) }

// watch adds an informer for gvr if none exists, started with the others.
func (l *Lister) watch(gvr schema.GroupVersionResource) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.informers[gvr.GroupResource()]; ok {
		return
	}
	l.add(gvr)
	if l.ctx != nil {
		l.factory.Start(l.ctx.Done())
	}
}

// Cache is one resource's metadata cache, for callers that need objects
// (names with labels) rather than names.
type Cache struct {
	// Lister reads *metav1.PartialObjectMetadata from the cache; Get of a
	// missing object is a 404 naming it.
	Lister cache.GenericLister
	// HasSynced reports whether the cache is filled.
	HasSynced func() bool
}

// Pods returns the pod cache; WatchPods must have been called.
func (l *Lister) Pods() Cache { return l.cacheOf(PodsGVR) }

// Nodes returns the node cache; WatchNodes must have been called.
func (l *Lister) Nodes() Cache { return l.cacheOf(NodesGVR) }

func (l *Lister) cacheOf(gvr schema.GroupVersionResource) Cache {
	l.mu.Lock()
	e := l.informers[gvr.GroupResource()]
	l.mu.Unlock()
	if e == nil {
		panic(fmt.Sprintf("objects: %s is not watched", gvr.GroupResource()))
	}
	return Cache{Lister: cache.NewGenericLister(e.informer.GetIndexer(), gvr.GroupResource()), HasSynced: e.informer.HasSynced}
}

// NodesSynced reports whether the node cache is filled (for /readyz); false
// if nodes are not watched.
func (l *Lister) NodesSynced() bool {
	l.mu.Lock()
	e := l.informers[NodesGVR.GroupResource()]
	l.mu.Unlock()
	return e != nil && e.informer.HasSynced()
}

// Start starts the informers added so far (WatchPods, WatchNodes) and lets
// selector queries start theirs; they all stop when ctx is done.
func (l *Lister) Start(ctx context.Context) {
	l.mu.Lock()
	l.ctx = ctx
	l.mu.Unlock()
	l.factory.Start(ctx.Done())
}

// PodsSynced reports whether the pod cache is filled (for /readyz when
// WatchPods was called); false if pods are not watched (yet).
func (l *Lister) PodsSynced() bool {
	l.mu.Lock()
	e := l.informers[PodsGVR.GroupResource()]
	l.mu.Unlock()
	return e != nil && e.informer.HasSynced()
}

// informerFor returns the entry of gr, creating and starting an informer if
// needed.
func (l *Lister) informerFor(gr schema.GroupResource) (*entry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// Watched is not allowed: nodes are watched for metrics.k8s.io only.
	if e, ok := l.informers[gr]; ok && l.allowed[gr] {
		return e, nil
	}
	if l.ctx == nil {
		return nil, fmt.Errorf("object lister for %s is not started", gr)
	}
	// pods, always allowed, need no discovery (as when they were watched
	// from the start)
	gvr := PodsGVR
	if gr != PodsGVR.GroupResource() {
		var err error
		if gvr, err = l.mapper.ResourceFor(gr.WithVersion("")); err != nil {
			return nil, providers.NewUnknownResource(gr)
		}
	}
	if !l.allowed[gvr.GroupResource()] {
		klog.V(2).InfoS("Selector query on a resource that is not allowed", "resource", gvr.GroupResource().String())
		return nil, providers.NewResourceNotAllowed(gvr.GroupResource(), l.allowedNames())
	}
	if e, ok := l.informers[gvr.GroupResource()]; ok {
		return e, nil
	}
	klog.InfoS("Watching a new resource for selector queries", "resource", gr.String(), "version", gvr.Version)
	e := l.add(gvr)
	l.factory.Start(l.ctx.Done())
	return e, nil
}

// allowedNames lists the allowed resources, sorted.
func (l *Lister) allowedNames() []string {
	out := make([]string, 0, len(l.allowed))
	for gr := range l.allowed {
		out = append(out, gr.String())
	}
	sort.Strings(out)
	return out
}

// ListNames implements providers.ObjectLister. If the resource's cache is
// not filled yet it waits, at most until ctx is done, then fails with a 503
// that carries the last watch error.
func (l *Lister) ListNames(ctx context.Context, gr schema.GroupResource, namespace string, selector labels.Selector) ([]string, error) {
	e, err := l.informerFor(gr)
	if err != nil {
		return nil, err
	}
	if e.informer.HasSynced() {
		telemetry.CacheHit("objects")
	} else {
		telemetry.CacheMiss("objects")
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for !e.informer.HasSynced() {
			select {
			case <-ctx.Done():
				cause := e.err()
				if cause == nil {
					cause = ctx.Err()
				}
				return nil, providers.NewBackendError("objects", fmt.Errorf("the watch cache of %s is not filled: %w", gr, cause))
			case <-t.C:
			}
		}
	}
	var objs []any
	if namespace != "" {
		objs, err = e.informer.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
		if err != nil {
			return nil, providers.NewBackendError("objects", fmt.Errorf("indexing %s in namespace %s: %w", gr, namespace, err))
		}
	} else {
		objs = e.informer.GetStore().List()
	}
	names := make([]string, 0, len(objs))
	for _, o := range objs {
		m, ok := o.(*metav1.PartialObjectMetadata)
		if !ok {
			continue
		}
		if selector.Matches(labels.Set(m.Labels)) {
			names = append(names, m.Name)
		}
	}
	return names, nil
}
