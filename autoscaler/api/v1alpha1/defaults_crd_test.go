package v1alpha1_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/decision"
	"github.com/metricscale/metricscale/autoscaler/defaults"
)

// crdDefault is one default of the CRD and the Go constant the controller
// applies when the field is unset (an object stored before the default
// existed, a spec built in Go).
type crdDefault struct {
	// typ and field name the Go struct and JSON field carrying the
	// +kubebuilder:default marker.
	typ, field string
	// path is the field's path under the spec (spec.a.b).
	path string
	// want is the constant, as the CRD writes it; a duration, when
	// wantDuration is set, is compared as a duration ("5m" = "5m0s").
	want         string
	wantDuration time.Duration
}

var crdDefaults = []crdDefault{
	{typ: "MetricAutoscalerSpec", field: "minReplicas", path: "spec.minReplicas", want: fmt.Sprint(defaults.MinReplicas)},
	{typ: "MetricAutoscalerSpec", field: "syncPeriod", path: "spec.syncPeriod", wantDuration: defaults.SyncPeriod},
	{typ: "Fallback", field: "behavior", path: "spec.fallback.behavior", want: string(v1alpha1.FallbackStatic)},
	{typ: "ScaleToZero", field: "cooldownPeriod", path: "spec.scaleToZero.cooldownPeriod", wantDuration: decision.DefaultCooldownPeriod},
}

func (d crdDefault) check(got string) error {
	if d.wantDuration == 0 {
		if got != d.want {
			return fmt.Errorf("%q, want %q", got, d.want)
		}
		return nil
	}
	dur, err := time.ParseDuration(got)
	if err != nil || dur != d.wantDuration {
		return fmt.Errorf("%q, want %s", got, d.wantDuration)
	}
	return nil
}

// TestCRDDefaultsAreTheConstants: every default of the CRD, in the
// kubebuilder markers and in the generated manifests, is the Go constant
// the controller uses, and no default goes unchecked.
func TestCRDDefaultsAreTheConstants(t *testing.T) {
	t.Parallel()
	markers := markerDefaults(t, "types.go")
	if len(markers) != len(crdDefaults) {
		t.Errorf("types.go has %d +kubebuilder:default markers %v; the table checks %d: add the new one to crdDefaults", len(markers), markers, len(crdDefaults))
	}
	for _, file := range []string{"../../../manifests/autoscaler/crd.yaml", "../../../manifests/chart/files/crd-metricautoscalers.yaml"} {
		schema := specSchema(t, file)
		if n := countDefaults(schema); n != len(crdDefaults) {
			t.Errorf("%s: %d defaults in the spec's schema; the table checks %d", file, n, len(crdDefaults))
		}
		for _, d := range crdDefaults {
			got, ok := markers[d.typ+"."+d.field]
			if !ok {
				t.Errorf("types.go: %s.%s has no +kubebuilder:default marker", d.typ, d.field)
			} else if err := d.check(got); err != nil {
				t.Errorf("types.go: %s.%s: +kubebuilder:default=%v", d.typ, d.field, err)
			}
			v, err := defaultAt(schema, strings.Split(d.path, ".")[1:])
			if err != nil {
				t.Errorf("%s: %s: %v", file, d.path, err)
				continue
			}
			if err := d.check(fmt.Sprint(v)); err != nil {
				t.Errorf("%s: %s: default %v", file, d.path, err)
			}
		}
	}
}

// markerDefaults returns the +kubebuilder:default values of the fields of
// the structs of file, by "Type.jsonName", unquoted.
func markerDefaults(t *testing.T, file string) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			return false
		}
		for _, fld := range st.Fields.List {
			if fld.Doc == nil || fld.Tag == nil || len(fld.Names) == 0 {
				continue
			}
			tag, err := strconv.Unquote(fld.Tag.Value)
			if err != nil {
				t.Fatal(err)
			}
			name, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
			for _, c := range fld.Doc.List {
				v, ok := strings.CutPrefix(c.Text, "// +kubebuilder:default=")
				if !ok {
					continue
				}
				if u, err := strconv.Unquote(v); err == nil {
					v = u
				}
				out[ts.Name.Name+"."+name] = v
			}
		}
		return false
	})
	return out
}

// specSchema returns the OpenAPI schema of the spec of the CRD in file.
func specSchema(t *testing.T, file string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("%s: %d versions, want 1", file, len(crd.Spec.Versions))
	}
	spec, err := property(crd.Spec.Versions[0].Schema.OpenAPIV3Schema, "spec")
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return spec
}

// defaultAt returns the default of the property at path under schema.
func defaultAt(schema map[string]any, path []string) (any, error) {
	for _, p := range path {
		var err error
		if schema, err = property(schema, p); err != nil {
			return nil, err
		}
	}
	v, ok := schema["default"]
	if !ok {
		return nil, fmt.Errorf("no default")
	}
	return v, nil
}

// countDefaults counts the defaults anywhere under v.
func countDefaults(v any) int {
	n := 0
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if k == "default" {
				n++
			} else {
				n += countDefaults(e)
			}
		}
	case []any:
		for _, e := range v {
			n += countDefaults(e)
		}
	}
	return n
}

func property(schema map[string]any, name string) (map[string]any, error) {
	props, _ := schema["properties"].(map[string]any)
	p, ok := props[name].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("no property %q", name)
	}
	return p, nil
}
