// Package validationtest holds the table of invalid autoscaler specs that
// the simulator's validation and the MetricAutoscaler CRD must both reject.
package validationtest

import (
	_ "embed"
	"encoding/json"
	"fmt"

	"sigs.k8s.io/yaml"
)

// invalidSpecsYAML is embedded rather than found next to this file, so the
// table loads wherever the package was built (-trimpath included).
//
//go:embed invalid-specs.yaml
var invalidSpecsYAML []byte

// InvalidSpec is one entry of invalid-specs.yaml: a spec as
// generic JSON, and where and why the API server rejects it.
type InvalidSpec struct {
	Name   string
	Spec   map[string]any
	Field  string
	Detail string
}

// InvalidSpecs reads the table of invalid specs shared by the tests of the
// simulator's validation and of the MetricAutoscaler CRD.
func InvalidSpecs() ([]InvalidSpec, error) {
	data := invalidSpecsYAML
	var table struct {
		Base  map[string]any `json:"base"`
		Cases []struct {
			Name   string         `json:"name"`
			Patch  map[string]any `json:"patch"`
			Field  string         `json:"field"`
			Detail string         `json:"detail"`
		} `json:"cases"`
	}
	if err := yaml.Unmarshal(data, &table); err != nil {
		return nil, fmt.Errorf("invalid-specs.yaml: %w", err)
	}
	out := make([]InvalidSpec, 0, len(table.Cases))
	for _, c := range table.Cases {
		spec, _ := mergePatch(deepCopy(table.Base), c.Patch).(map[string]any)
		out = append(out, InvalidSpec{Name: c.Name, Spec: spec, Field: c.Field, Detail: c.Detail})
	}
	return out, nil
}

// mergePatch applies an RFC 7386 JSON merge patch.
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
			continue
		}
		t[k] = mergePatch(t[k], v)
	}
	return t
}

func deepCopy(v map[string]any) map[string]any {
	data, _ := json.Marshal(v)
	var out map[string]any
	_ = json.Unmarshal(data, &out)
	return out
}

// Family is one extension of the spec with its table of invalid specs and
// a valid one.
type Family struct {
	Name  string
	Cases []Invalid
	Valid map[string]any
}

// Families are the extensions whose tables both the CRD's test and the
// validation's test run (spec.schedules, spec.formula).
func Families() []Family {
	return []Family{
		{"schedules", InvalidSchedules(), ScheduleSpec(nil)},
		{"formula", InvalidFormulas(), FormulaSpec(nil)},
	}
}
