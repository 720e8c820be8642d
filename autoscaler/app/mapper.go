package app

import (
	"errors"
	"slices"
	"sync"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// memoMapper remembers the mappings a RESTMapper found. A discovery mapper
// computes each one anew over every API group, making a "no match" error
// for each group that is not the kind's: every reconcile asks for the
// target's mapping (and the scale client for its resource), and at 1,000
// objects that was 3 % of the autoscaler's CPU and 5 % of its garbage.
// Reset (after a mapping failed: a new CRD or API version) forgets them.
// Callers get the mapper's own values: RESTMapping's result is shared, as
// the wrapped mappers share theirs, and RESTMappings' slice is a copy.
type memoMapper struct {
	apimeta.ResettableRESTMapper

	mu        sync.Mutex
	mapping   map[mappingKey]*apimeta.RESTMapping
	mappings  map[mappingKey][]*apimeta.RESTMapping
	resources map[schema.GroupVersionResource]schema.GroupVersionResource
}

type mappingKey struct {
	gk       schema.GroupKind
	versions string
}

func newMemoMapper(m apimeta.ResettableRESTMapper) *memoMapper {
	return &memoMapper{ResettableRESTMapper: m, mapping: map[mappingKey]*apimeta.RESTMapping{}, mappings: map[mappingKey][]*apimeta.RESTMapping{}, resources: map[schema.GroupVersionResource]schema.GroupVersionResource{}}
}

func key(gk schema.GroupKind, versions []string) mappingKey {
	k := mappingKey{gk: gk}
	for _, v := range versions {
		k.versions += v + ","
	}
	return k
}

func (m *memoMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*apimeta.RESTMapping, error) {
	return remember(&m.mu, m.mapping, key(gk, versions), func() (*apimeta.RESTMapping, error) {
		return m.ResettableRESTMapper.RESTMapping(gk, versions...)
	})
}

func (m *memoMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*apimeta.RESTMapping, error) {
	got, err := remember(&m.mu, m.mappings, key(gk, versions), func() ([]*apimeta.RESTMapping, error) {
		got, err := m.ResettableRESTMapper.RESTMappings(gk, versions...)
		if err == nil && len(got) == 0 {
			err = errNoMappings // returned as the wrapped mapper did, not kept
		}
		return got, err
	})
	if errors.Is(err, errNoMappings) {
		return got, nil
	}
	return slices.Clone(got), err
}

var errNoMappings = errors.New("no mappings")

func (m *memoMapper) ResourceFor(in schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	return remember(&m.mu, m.resources, in, func() (schema.GroupVersionResource, error) {
		return m.ResettableRESTMapper.ResourceFor(in)
	})
}

// remember returns cache[k], or what lookup finds, kept unless it failed.
func remember[K comparable, V any](mu *sync.Mutex, cache map[K]V, k K, lookup func() (V, error)) (V, error) {
	mu.Lock()
	v, ok := cache[k]
	mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := lookup()
	if err != nil {
		return v, err
	}
	mu.Lock()
	cache[k] = v
	mu.Unlock()
	return v, nil
}

func (m *memoMapper) Reset() {
	m.mu.Lock()
	clear(m.mapping)
	clear(m.mappings)
	clear(m.resources)
	m.mu.Unlock()
	m.ResettableRESTMapper.Reset()
}
