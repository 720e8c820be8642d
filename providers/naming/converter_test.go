package naming

import (
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func testMapper() apimeta.RESTMapper {
	core := schema.GroupVersion{Version: "v1"}
	apps := schema.GroupVersion{Group: "apps", Version: "v1"}
	netw := schema.GroupVersion{Group: "networking.k8s.io", Version: "v1"}
	m := apimeta.NewDefaultRESTMapper([]schema.GroupVersion{core, apps, netw})
	for _, k := range []string{"Pod", "Service"} {
		m.Add(core.WithKind(k), apimeta.RESTScopeNamespace)
	}
	for _, k := range []string{"Node", "Namespace", "PersistentVolume"} {
		m.Add(core.WithKind(k), apimeta.RESTScopeRoot)
	}
	m.Add(apps.WithKind("Deployment"), apimeta.RESTScopeNamespace)
	m.Add(netw.WithKind("Ingress"), apimeta.RESTScopeNamespace)
	return m
}

func TestConverterLabelForResource(t *testing.T) {
	t.Parallel()
	res := NewResolver(testMapper(), nil)
	tests := []struct {
		name    string
		mapping ResourceMapping
		gr      schema.GroupResource
		want    string
		wantErr bool
	}{
		{"template singularizes", ResourceMapping{Template: "<<.Resource>>"}, schema.GroupResource{Resource: "pods"}, "pod", false},
		{"template with prefix", ResourceMapping{Template: "kube_<<.Resource>>"}, schema.GroupResource{Resource: "namespaces"}, "kube_namespace", false},
		{"group sanitized", ResourceMapping{Template: "<<.Group>>_<<.Resource>>"}, schema.GroupResource{Group: "networking.k8s.io", Resource: "ingresses"}, "networking_k8s_io_ingress", false},
		{"override first", ResourceMapping{Template: "<<.Resource>>", Overrides: map[string]GroupResource{"instance": {Resource: "node"}}}, schema.GroupResource{Resource: "nodes"}, "instance", false},
		{"override singular group-less", ResourceMapping{Overrides: map[string]GroupResource{"deploy": {Resource: "deployment"}}}, schema.GroupResource{Group: "apps", Resource: "deployments"}, "deploy", false},
		{"no template no override", ResourceMapping{Overrides: map[string]GroupResource{"pod": {Resource: "pod"}}}, schema.GroupResource{Resource: "namespaces"}, "", true},
		{"unknown resource", ResourceMapping{Template: "<<.Resource>>"}, schema.GroupResource{Resource: "widgets"}, "", true},
		{"non-canonical input", ResourceMapping{Template: "<<.Resource>>"}, schema.GroupResource{Resource: "deployment"}, "deployment", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := NewConverter(tc.mapping, res)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 { // second time from the cache
				got, err := c.LabelForResource(tc.gr)
				if (err != nil) != tc.wantErr {
					t.Fatalf("err = %v, want error %v", err, tc.wantErr)
				}
				if got != tc.want {
					t.Fatalf("label = %q, want %q", got, tc.want)
				}
			}
		})
	}
}

func TestConverterResourceForLabel(t *testing.T) {
	t.Parallel()
	res := NewResolver(testMapper(), nil)
	tests := []struct {
		name    string
		mapping ResourceMapping
		label   string
		want    schema.GroupResource
		ok      bool
	}{
		{"plain template", ResourceMapping{Template: "<<.Resource>>"}, "pod", schema.GroupResource{Resource: "pods"}, true},
		{"plural label", ResourceMapping{Template: "<<.Resource>>"}, "pods", schema.GroupResource{Resource: "pods"}, true},
		{"not a resource", ResourceMapping{Template: "<<.Resource>>"}, "instance", schema.GroupResource{}, false},
		{"prefix", ResourceMapping{Template: "kube_<<.Resource>>"}, "kube_deployment", schema.GroupResource{Group: "apps", Resource: "deployments"}, true},
		{"prefix mismatch", ResourceMapping{Template: "kube_<<.Resource>>"}, "deployment", schema.GroupResource{}, false},
		{"group and resource", ResourceMapping{Template: "<<.Group>>_<<.Resource>>"}, "apps_deployment", schema.GroupResource{Group: "apps", Resource: "deployments"}, true},
		{"override", ResourceMapping{Overrides: map[string]GroupResource{"instance": {Resource: "node"}}}, "instance", schema.GroupResource{Resource: "nodes"}, true},
		{"override only", ResourceMapping{Overrides: map[string]GroupResource{"instance": {Resource: "node"}}}, "pod", schema.GroupResource{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := NewConverter(tc.mapping, res)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				r, ok := c.ResourceForLabel(tc.label)
				if ok != tc.ok {
					t.Fatalf("ok = %v, want %v", ok, tc.ok)
				}
				if ok && r.GR != tc.want {
					t.Fatalf("resource = %v, want %v", r.GR, tc.want)
				}
			}
		})
	}
}

func TestNewConverterErrors(t *testing.T) {
	t.Parallel()
	for name, m := range map[string]ResourceMapping{
		"unparsable":      {Template: "<<.Resource"},
		"no resource":     {Template: "<<.Group>>_x"},
		"unknown field":   {Template: "<<.Foo>>"},
		"empty override":  {Overrides: map[string]GroupResource{"x": {}}},
		"empty label out": {Template: `<<if false>><<.Resource>><<end>>`},
	} {
		if _, err := NewConverter(m, nil); err == nil {
			t.Errorf("%s: NewConverter(%+v) succeeded", name, m)
		}
	}
}

func TestMayMapNamespaces(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		m    ResourceMapping
		want bool
	}{
		{ResourceMapping{}, false},
		{ResourceMapping{Template: "<<.Resource>>"}, true},
		{ResourceMapping{Overrides: map[string]GroupResource{"ns": {Resource: "namespace"}}}, true},
		{ResourceMapping{Overrides: map[string]GroupResource{"queue": {Resource: "service"}}}, false},
	} {
		c, err := NewConverter(tc.m, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.MayMapNamespaces(); got != tc.want {
			t.Errorf("MayMapNamespaces(%+v) = %v, want %v", tc.m, got, tc.want)
		}
	}
}
