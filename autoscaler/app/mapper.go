package app

import (
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
	k := key(gk, versions)
	m.mu.Lock()
	got, ok := m.mapping[k]
	m.mu.Unlock()
	if ok {
		return got, nil
	}
	got, err := m.ResettableRESTMapper.RESTMapping(gk, versions...)
	if err != nil {
		return got, err
	}
	m.mu.Lock()
	m.mapping[k] = got
	m.mu.Unlock()
	return got, nil
}

func (m *memoMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*apimeta.RESTMapping, error) {
	k := key(gk, versions)
	m.mu.Lock()
	got, ok := m.mappings[k]
	m.mu.Unlock()
	if ok {
		return slices.Clone(got), nil
	}
	got, err := m.ResettableRESTMapper.RESTMappings(gk, versions...)
	if err != nil || len(got) == 0 {
		return got, err
	}
	m.mu.Lock()
	m.mappings[k] = slices.Clone(got)
	m.mu.Unlock()
	return got, nil
}

func (m *memoMapper) ResourceFor(in schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	m.mu.Lock()
	got, ok := m.resources[in]
	m.mu.Unlock()
	if ok {
		return got, nil
	}
	got, err := m.ResettableRESTMapper.ResourceFor(in)
	if err != nil {
		return got, err
	}
	m.mu.Lock()
	m.resources[in] = got
	m.mu.Unlock()
	return got, nil
}

func (m *memoMapper) Reset() {
	m.mu.Lock()
	clear(m.mapping)
	clear(m.mappings)
	clear(m.resources)
	m.mu.Unlock()
	m.ResettableRESTMapper.Reset()
}
