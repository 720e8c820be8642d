package validationtest

import (
	"fmt"
	"strings"
)

// InvalidFormula is a MetricAutoscaler spec, valid but for its
// spec.formula (or the metrics its inputs point at). Field is where the
// simulator's validation reports it; the CRD reports it there or at an
// enclosing field (a CEL rule on the inputs, the formula or the spec). CRD
// says whether the CRD can see it at all: an expression that does not
// compile, is not a number or costs too much, or an input named after a
// reserved word, has the right shape for the schema, and only the
// simulator's validation, the admission webhook and the controller
// (condition InvalidFormula) find it.
type InvalidFormula = Invalid

// FormulaSpec is a valid spec of two External metrics, orders and
// payments, and a formula over them, edited by mutate (nil deletes a key).
func FormulaSpec(mutate map[string]any) map[string]any {
	f := map[string]any{
		"name":       "backlog",
		"inputs":     []any{input("orders", 0), input("payments", 1)},
		"expression": "orders + 2 * payments",
		"target":     map[string]any{"type": "AverageValue", "averageValue": "10"},
	}
	for k, v := range mutate {
		if v == nil {
			delete(f, k)
			continue
		}
		f[k] = v
	}
	return map[string]any{
		"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
		"minReplicas":    1,
		"maxReplicas":    10,
		"metrics":        []any{external("orders"), external("payments")},
		"formula":        f,
	}
}

func input(name string, metric int) map[string]any {
	return map[string]any{"name": name, "metric": metric}
}

func external(name string) map[string]any {
	return map[string]any{"type": "External", "external": map[string]any{
		"metric": map[string]any{"name": name},
		"target": map[string]any{"type": "AverageValue", "averageValue": "5"},
	}}
}

// withMetric adds m to spec.metrics, at index 2.
func withMetric(spec map[string]any, m map[string]any) map[string]any {
	spec["metrics"] = append(spec["metrics"].([]any), m)
	return spec
}

// tooManyInputs is a spec of 33 External metrics, each an input of the
// formula: one input too many, and nothing else wrong.
func tooManyInputs() map[string]any {
	var metrics, inputs []any
	for i := range 33 {
		metrics = append(metrics, external(fmt.Sprintf("m%d", i)))
		inputs = append(inputs, input(fmt.Sprintf("m%d", i), i))
	}
	spec := FormulaSpec(map[string]any{"inputs": inputs, "expression": "m0 + m32"})
	spec["metrics"] = metrics
	return spec
}

// costly is an expression under the length bound whose estimated cost is
// far above the compiler's: three nested comprehensions over 30 items.
func costly() string {
	list := "[" + strings.Repeat("orders,", 29) + "orders]"
	return "double(" + list + ".map(x, " + list + ".map(y, " + list + ".map(z, x * y * z).size()).size()).size())"
}

// InvalidFormulas are the invalid spec.formula both must reject, and those
// only the simulator's validation (and the webhook and controller) can.
func InvalidFormulas() []InvalidFormula {
	return []InvalidFormula{
		{"name not a DNS label", FormulaSpec(map[string]any{"name": "Backlog"}), "spec.formula.name", true},
		{"no inputs", FormulaSpec(map[string]any{"inputs": []any{}}), "spec.formula.inputs", true},
		{"inputs missing", FormulaSpec(map[string]any{"inputs": nil}), "spec.formula.inputs", true},
		{"more than 32 inputs", tooManyInputs(), "spec.formula.inputs", true},
		{"duplicate input name", FormulaSpec(map[string]any{"inputs": []any{input("orders", 0), input("orders", 1)}}), "spec.formula.inputs[1].name", true},
		{"duplicate input metric", FormulaSpec(map[string]any{"inputs": []any{input("orders", 0), input("payments", 0)}}), "spec.formula.inputs[1].metric", true},
		{"input name not an identifier", FormulaSpec(map[string]any{"inputs": []any{input("2orders", 0), input("payments", 1)}}), "spec.formula.inputs[0].name", true},
		{"negative input metric", FormulaSpec(map[string]any{"inputs": []any{input("orders", -1), input("payments", 1)}}), "spec.formula.inputs[0].metric", true},
		{"input metric out of range", FormulaSpec(map[string]any{"inputs": []any{input("orders", 0), input("payments", 2)}}), "spec.formula.inputs[1].metric", true},
		{"input a Resource metric", withMetric(FormulaSpec(map[string]any{"inputs": []any{input("orders", 0), input("payments", 2)}}),
			map[string]any{"type": "Resource", "resource": map[string]any{"name": "cpu", "target": map[string]any{"type": "Utilization", "averageUtilization": 80}}}),
			"spec.formula.inputs[1].metric", true},
		{"input a Pods metric", withMetric(FormulaSpec(map[string]any{"inputs": []any{input("orders", 0), input("payments", 2)}}),
			map[string]any{"type": "Pods", "pods": map[string]any{"metric": map[string]any{"name": "rps"}, "target": map[string]any{"type": "AverageValue", "averageValue": "5"}}}),
			"spec.formula.inputs[1].metric", true},
		{"Utilization target", FormulaSpec(map[string]any{"target": map[string]any{"type": "Utilization", "averageUtilization": 50}}), "spec.formula.target", true},
		{"Value target without value", FormulaSpec(map[string]any{"target": map[string]any{"type": "Value", "averageValue": "10"}}), "spec.formula.target", true},
		{"target missing", FormulaSpec(map[string]any{"target": nil}), "spec.formula.target", true},
		{"zero averageValue target", FormulaSpec(map[string]any{"target": map[string]any{"type": "AverageValue", "averageValue": "0"}}), "spec.formula.target.averageValue", true},
		{"negative value target", FormulaSpec(map[string]any{"target": map[string]any{"type": "Value", "value": "-5"}}), "spec.formula.target.value", true},
		{"empty expression", FormulaSpec(map[string]any{"expression": ""}), "spec.formula.expression", true},
		{"expression over 1024 characters", FormulaSpec(map[string]any{"expression": strings.Repeat("orders + ", 114) + "orders"}), "spec.formula.expression", true},
		{"syntax error", FormulaSpec(map[string]any{"expression": "orders +"}), "spec.formula.expression", false},
		{"unknown variable", FormulaSpec(map[string]any{"expression": "orders + refunds"}), "spec.formula.expression", false},
		{"boolean result", FormulaSpec(map[string]any{"expression": "orders > payments"}), "spec.formula.expression", false},
		{"too costly", FormulaSpec(map[string]any{"expression": costly()}), "spec.formula.expression", false},
		{"reserved word as input name", FormulaSpec(map[string]any{"inputs": []any{input("in", 0), input("payments", 1)}}), "spec.formula.inputs[0].name", false},
	}
}
