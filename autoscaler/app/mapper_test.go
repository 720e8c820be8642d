package app

import (
	"fmt"
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// countingMapper is a fixed mapper that counts the lookups it answers and
// its resets.
type countingMapper struct {
	*apimeta.DefaultRESTMapper
	calls, resets int
}

func (c *countingMapper) RESTMapping(gk schema.GroupKind, v ...string) (*apimeta.RESTMapping, error) {
	c.calls++
	return c.DefaultRESTMapper.RESTMapping(gk, v...)
}

func (c *countingMapper) RESTMappings(gk schema.GroupKind, v ...string) ([]*apimeta.RESTMapping, error) {
	c.calls++
	return c.DefaultRESTMapper.RESTMappings(gk, v...)
}

func (c *countingMapper) ResourceFor(r schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	c.calls++
	return c.DefaultRESTMapper.ResourceFor(r)
}

func (c *countingMapper) Reset() { c.resets++ }

func TestMemoMapper(t *testing.T) {
	t.Parallel()
	apps := schema.GroupVersion{Group: "apps", Version: "v1"}
	deployment := schema.GroupKind{Group: "apps", Kind: "Deployment"}
	missing := schema.GroupKind{Group: "example.com", Kind: "Queue"}
	deployments := schema.GroupVersionResource{Group: "apps", Resource: "deployments"}
	for _, tc := range []struct {
		name      string
		lookup    func(m *memoMapper) (string, error)
		want      string
		wantErr   bool
		wantCalls int // of the wrapped mapper, for three lookups
	}{
		{"RESTMapping", func(m *memoMapper) (string, error) {
			r, err := m.RESTMapping(deployment)
			if err != nil {
				return "", err
			}
			return r.Resource.String(), nil
		}, "apps/v1, Resource=deployments", false, 1},
		{"RESTMappings", func(m *memoMapper) (string, error) {
			r, err := m.RESTMappings(deployment, "v1")
			if err != nil || len(r) != 1 || r[0] == nil {
				return fmt.Sprint(r), err
			}
			r[0] = nil // the caller's copy
			return "1", nil
		}, "1", false, 1},
		{"ResourceFor", func(m *memoMapper) (string, error) {
			r, err := m.ResourceFor(deployments)
			return r.String(), err
		}, "apps/v1, Resource=deployments", false, 1},
		{"no match is asked again", func(m *memoMapper) (string, error) {
			_, err := m.RESTMapping(missing)
			return "", err
		}, "", true, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fixed := apimeta.NewDefaultRESTMapper([]schema.GroupVersion{apps})
			fixed.Add(apps.WithKind("Deployment"), apimeta.RESTScopeNamespace)
			inner := &countingMapper{DefaultRESTMapper: fixed}
			m := newMemoMapper(inner)
			for range 3 {
				got, err := tc.lookup(m)
				if (err != nil) != tc.wantErr || got != tc.want {
					t.Fatalf("got %q, %v; want %q, error %v", got, err, tc.want, tc.wantErr)
				}
			}
			if inner.calls != tc.wantCalls {
				t.Errorf("the wrapped mapper answered %d lookups, want %d", inner.calls, tc.wantCalls)
			}
			m.Reset()
			if _, _ = tc.lookup(m); inner.resets != 1 || inner.calls != tc.wantCalls+1 {
				t.Errorf("after Reset: %d resets, %d lookups; want 1 and %d", inner.resets, inner.calls, tc.wantCalls+1)
			}
		})
	}
}
