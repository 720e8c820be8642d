// Command crdpatch adds to controller-gen's MetricAutoscaler CRD (stdin to
// stdout) the API server's validation of an autoscaling/v2 HPA spec on the
// fields of the upstream types it embeds, which take no kubebuilder
// markers: bounds, enums, patterns and per-object CEL rules that cost
// nothing per string (a rule over unbounded strings would exceed the CRD's
// CEL cost budget).
package main

import (
	"fmt"
	"io"
	"os"

	"sigs.k8s.io/yaml"
)

const (
	// A path segment name: not empty, no '/' or '%', not '.' or '..'.
	pathSegment = `^(\.\.[^/%]+|\.[^/%.][^/%]*|[^/%.][^/%]*)$`
	// A quantity string above zero: no '-', a non-zero digit in the mantissa.
	positiveQuantity = `^\+?([0-9]*[1-9][0-9]*(\.[0-9]*)?|[0-9]*\.[0-9]*[1-9][0-9]*)([^0-9.].*)?$`
	// A quantity string not below zero.
	nonNegativeQuantity = `^[^-]`
	dns1123Label        = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
)

type obj = map[string]any

func main() {
	data, err := io.ReadAll(os.Stdin)
	if err == nil {
		data, err = patch(data)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "crdpatch:", err)
		os.Exit(1)
	}
	os.Stdout.WriteString("---\n")
	os.Stdout.Write(data)
}

func patch(data []byte) ([]byte, error) {
	var crd obj
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return nil, err
	}
	versions, _ := at(crd, "spec", "versions").([]any)
	if len(versions) == 0 {
		return nil, fmt.Errorf("no versions in the CRD")
	}
	for _, v := range versions {
		spec, ok := at(v.(obj), "schema", "openAPIV3Schema", "properties", "spec").(obj)
		if !ok {
			return nil, fmt.Errorf("no spec schema")
		}
		if err := patchSpec(spec); err != nil {
			return nil, err
		}
	}
	return yaml.Marshal(crd)
}

// at walks properties-less paths of nested maps.
func at(o obj, path ...string) any {
	var cur any = o
	for _, p := range path {
		m, ok := cur.(obj)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}

type patcher struct{ err error }

// prop is the schema of a property path (items for "[]").
func (p *patcher) prop(s obj, path ...string) obj {
	cur := s
	for _, name := range path {
		var next any
		if name == "[]" {
			next = cur["items"]
		} else {
			next = at(cur, "properties", name)
		}
		m, ok := next.(obj)
		if !ok {
			if p.err == nil {
				p.err = fmt.Errorf("the schema has no %v", path)
			}
			return obj{}
		}
		cur = m
	}
	return cur
}

func set(s obj, kv ...any) {
	for i := 0; i < len(kv); i += 2 {
		s[kv[i].(string)] = kv[i+1]
	}
}

func rule(s obj, rule, message string) {
	rules, _ := s["x-kubernetes-validations"].([]any)
	s["x-kubernetes-validations"] = append(rules, obj{"rule": rule, "message": message})
}

func patchSpec(spec obj) error {
	var p patcher
	for _, f := range []string{"kind", "name"} {
		set(p.prop(spec, "scaleTargetRef", f), "pattern", pathSegment)
	}

	m := p.prop(spec, "metrics", "[]")
	set(p.prop(m, "type"), "enum", []any{"ContainerResource", "External", "Object", "Pods", "Resource"})
	rule(m, "(self.type == 'Object') == has(self.object) && (self.type == 'Pods') == has(self.pods) && (self.type == 'Resource') == has(self.resource) && (self.type == 'ContainerResource') == has(self.containerResource) && (self.type == 'External') == has(self.external)",
		"must populate the source of the metric's type, and only it")
	for _, src := range []string{"object", "pods", "resource", "containerResource", "external"} {
		t := p.prop(m, src, "target")
		set(p.prop(t, "type"), "enum", []any{"AverageValue", "Utilization", "Value"})
		set(p.prop(t, "averageUtilization"), "minimum", 1)
		for _, q := range []string{"value", "averageValue"} {
			set(p.prop(t, q), "minimum", 1, "allOf", []any{obj{"pattern": positiveQuantity}})
		}
	}
	// The formula's target is an External metric's: its quantities above
	// zero too (its type is checked by the Formula's CEL rule).
	for _, q := range []string{"value", "averageValue"} {
		set(p.prop(spec, "formula", "target", q), "minimum", 1, "allOf", []any{obj{"pattern": positiveQuantity}})
	}
	for _, src := range []string{"object", "pods", "external"} {
		set(p.prop(m, src, "metric", "name"), "pattern", pathSegment)
	}
	for _, f := range []string{"kind", "name"} {
		set(p.prop(m, "object", "describedObject", f), "pattern", pathSegment)
	}
	rule(p.prop(m, "object"), "has(self.target.value) || has(self.target.averageValue)", "target must set either value or averageValue")
	rule(p.prop(m, "pods"), "has(self.target.averageValue)", "target must set averageValue")
	rule(p.prop(m, "external"), "has(self.target.value) != has(self.target.averageValue)", "target must set exactly one of value and averageValue")
	for _, src := range []string{"resource", "containerResource"} {
		// A container's resource: standard, hugepages or qualified extended.
		set(p.prop(m, src, "name"), "pattern", `^(cpu|memory|ephemeral-storage|hugepages-.+|[^/]+/.+)$`)
		rule(p.prop(m, src), "has(self.target.averageUtilization) != has(self.target.averageValue)", "target must set exactly one of averageUtilization and averageValue")
	}
	set(p.prop(m, "containerResource", "container"), "pattern", dns1123Label, "maxLength", 63)

	for _, dir := range []string{"scaleUp", "scaleDown"} {
		r := p.prop(spec, "behavior", dir)
		set(p.prop(r, "stabilizationWindowSeconds"), "minimum", 0, "maximum", 3600)
		set(p.prop(r, "selectPolicy"), "enum", []any{"Disabled", "Max", "Min"})
		set(p.prop(r, "policies"), "minItems", 1)
		set(p.prop(r, "policies", "[]", "type"), "enum", []any{"Percent", "Pods"})
		set(p.prop(r, "policies", "[]", "value"), "minimum", 1)
		set(p.prop(r, "policies", "[]", "periodSeconds"), "minimum", 1, "maximum", 1800)
		set(p.prop(r, "tolerance"), "minimum", 0, "allOf", []any{obj{"pattern": nonNegativeQuantity}})
	}
	return p.err
}
