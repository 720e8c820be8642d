// Package naming maps between metric series and Kubernetes resources, for
// every provider: resource normalization through the RESTMapper with one
// cache (Resolver), and prometheus-adapter's label ↔ resource mapping with a
// template and overrides (Converter).
package naming

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
)

// cacheTTL is how long a resolution is reused; the RESTMapper itself
// refreshes discovery on its own interval.
const cacheTTL = 30 * time.Second

// maxCached bounds the cache: resource names come from requests.
const maxCached = 4096

var namespacesGR = schema.GroupResource{Resource: "namespaces"}

// Resource is a resolved resource.
type Resource struct {
	// GR is canonical: plural resource, full group ("deployments.apps").
	GR         schema.GroupResource
	Namespaced bool
	// Singular is the singular resource name ("deployment").
	Singular string
	// APIVersion and Kind are the preferred version's, for object references.
	APIVersion string
	Kind       string
}

// IsNamespace tells whether the resource is namespaces.
func (r *Resource) IsNamespace() bool { return r.GR == namespacesGR }

// UnknownResourceError says the cluster serves no such resource; it is a
// 404 for API clients.
type UnknownResourceError struct{ GR schema.GroupResource }

func (e *UnknownResourceError) Error() string {
	return fmt.Sprintf("resource %q is not served by the cluster", e.GR.String())
}

// Status makes the error an apierrors.APIStatus (404).
func (e *UnknownResourceError) Status() metav1.Status {
	return metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound,
		Message: fmt.Sprintf("resource.meta.k8s.io %q not found", e.GR.String()),
		Details: &metav1.StatusDetails{Name: e.GR.String(), Group: "meta.k8s.io", Kind: "resource"},
	}
}

// Resolver normalizes resources through a RESTMapper and caches the answers,
// errors included, for every provider and the registry. It is safe for
// concurrent use.
type Resolver struct {
	mapper apimeta.RESTMapper
	clock  clock.PassiveClock

	mu    sync.Mutex
	cache map[schema.GroupResource]resolved
}

type resolved struct {
	res *Resource
	err error
	at  time.Time
}

// NewResolver returns a Resolver over mapper; clk may be nil (real clock).
func NewResolver(mapper apimeta.RESTMapper, clk clock.PassiveClock) *Resolver {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Resolver{mapper: mapper, clock: clk, cache: map[schema.GroupResource]resolved{}}
}

// Resolve normalizes gr, singular or plural, with or without its group. An
// unknown resource is an *UnknownResourceError.
func (r *Resolver) Resolve(gr schema.GroupResource) (*Resource, error) {
	now := r.clock.Now()
	r.mu.Lock()
	c, ok := r.cache[gr]
	r.mu.Unlock()
	if ok && now.Sub(c.at) < cacheTTL {
		return c.res, c.err
	}
	res, err := r.resolve(gr)
	r.mu.Lock()
	if len(r.cache) >= maxCached {
		r.cache = map[schema.GroupResource]resolved{}
	}
	r.cache[gr] = resolved{res: res, err: err, at: now}
	r.mu.Unlock()
	return res, err
}

// Hit tells whether gr's resolution is cached and fresh (for cache metrics).
func (r *Resolver) Hit(gr schema.GroupResource) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.cache[gr]
	return ok && r.clock.Since(c.at) < cacheTTL
}

func (r *Resolver) resolve(gr schema.GroupResource) (*Resource, error) {
	if r.mapper == nil {
		return nil, fmt.Errorf("resolving resource %s: no RESTMapper", gr)
	}
	gvr, err := r.mapper.ResourceFor(gr.WithVersion(""))
	if err != nil {
		if apimeta.IsNoMatchError(err) || apimeta.IsAmbiguousError(err) {
			return nil, &UnknownResourceError{GR: gr}
		}
		return nil, fmt.Errorf("resolving resource %s: %w", gr, err)
	}
	gvk, err := r.mapper.KindFor(gvr)
	if err != nil {
		return nil, fmt.Errorf("resolving the kind of %s: %w", gvr, err)
	}
	mapping, err := r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("mapping %s: %w", gvk, err)
	}
	singular, err := r.mapper.ResourceSingularizer(mapping.Resource.Resource)
	if err != nil || singular == "" {
		singular = strings.TrimSuffix(mapping.Resource.Resource, "s")
	}
	return &Resource{
		GR:         mapping.Resource.GroupResource(),
		Namespaced: mapping.Scope.Name() == apimeta.RESTScopeNameNamespace,
		Singular:   singular,
		APIVersion: gvk.GroupVersion().String(),
		Kind:       gvk.Kind,
	}, nil
}
