package convert

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
)

// scalingModifiers is spec.advanced.scalingModifiers.
type scalingModifiers struct {
	Formula          string                         `json:"formula"`
	Target           string                         `json:"target"`
	ActivationTarget string                         `json:"activationTarget,omitempty"`
	MetricType       autoscalingv2.MetricTargetType `json:"metricType,omitempty"`
}

// modifier is a formula a MetricAutoscaler expresses: the formula's
// triggers, each scaled on the formula's target. KEDA compares
// formula(values) with one target; for a single trigger or max(a, b, ...)
// that is the largest of each trigger against that target, which is how a
// MetricAutoscaler combines its metrics (the tolerance included: the
// largest ratio decides either way), and the formula's activation is
// each trigger's (max above A is one above A).
type modifier struct {
	triggers   []string
	target     resource.Quantity
	activation *resource.Quantity
	metricType autoscalingv2.MetricTargetType
}

var (
	formulaName = `[A-Za-z_][A-Za-z0-9_-]*`
	formulaOne  = regexp.MustCompile(`^\s*(` + formulaName + `)\s*$`)
	formulaMax  = regexp.MustCompile(`^\s*max\s*\(\s*(` + formulaName + `(?:\s*,\s*` + formulaName + `)*)\s*\)\s*$`)
)

// parseModifier reads spec.advanced.scalingModifiers; a nil modifier with
// no error when the formula is one a MetricAutoscaler cannot express (the
// reason says why), an error when KEDA would refuse it.
func parseModifier(raw json.RawMessage, triggers []KEDATrigger) (m *modifier, reason string, err error) {
	var sm scalingModifiers
	if err := json.Unmarshal(raw, &sm); err != nil {
		return nil, "", fmt.Errorf("spec.advanced.scalingModifiers: %w", err)
	}
	if strings.TrimSpace(sm.Formula) == "" || strings.TrimSpace(sm.Target) == "" {
		return nil, "", fmt.Errorf("spec.advanced.scalingModifiers: formula and target are required")
	}
	target, err := resource.ParseQuantity(strings.TrimSpace(sm.Target))
	if err != nil || target.Sign() <= 0 {
		return nil, "", fmt.Errorf("spec.advanced.scalingModifiers.target: %q is not a number above 0", sm.Target)
	}
	m = &modifier{target: target, metricType: sm.MetricType}
	switch m.metricType {
	case "":
		m.metricType = autoscalingv2.AverageValueMetricType
	case autoscalingv2.AverageValueMetricType, autoscalingv2.ValueMetricType:
	default:
		return nil, "", fmt.Errorf("spec.advanced.scalingModifiers.metricType: %q: want AverageValue or Value", sm.MetricType)
	}
	if a := strings.TrimSpace(sm.ActivationTarget); a != "" {
		q, err := resource.ParseQuantity(a)
		if err != nil {
			return nil, "", fmt.Errorf("spec.advanced.scalingModifiers.activationTarget: %q is not a number", sm.ActivationTarget)
		}
		if !q.IsZero() {
			m.activation = &q
		}
	}
	if g := formulaOne.FindStringSubmatch(sm.Formula); g != nil {
		m.triggers = []string{g[1]}
	} else if g := formulaMax.FindStringSubmatch(sm.Formula); g != nil {
		for _, n := range strings.Split(g[1], ",") {
			m.triggers = append(m.triggers, strings.TrimSpace(n))
		}
	} else {
		return nil, fmt.Sprintf("formula %q has no equivalent: a MetricAutoscaler takes the largest proposal of its metrics (convertible: one trigger's name, or max(a, b, ...))", sm.Formula), nil
	}
	var names []string
	for _, t := range triggers {
		names = append(names, t.Name)
	}
	for _, n := range m.triggers {
		if !slices.Contains(names, n) {
			return nil, "", fmt.Errorf("spec.advanced.scalingModifiers.formula: %q is not the name of a trigger", n)
		}
	}
	for _, t := range triggers {
		if !slices.Contains(m.triggers, t.Name) {
			return nil, fmt.Sprintf("trigger %q is not in the formula %q: only the formula's triggers scale", t.Name, sm.Formula), nil
		}
		if t.Type == "cpu" || t.Type == "memory" {
			return nil, fmt.Sprintf("trigger %q (%s) is in the formula: KEDA composes external metrics only", t.Name, t.Type), nil
		}
	}
	return m, "", nil
}

// apply sets the formula's target on every converted External metric.
func (m *modifier) apply(metrics []autoscalingv2.MetricSpec) {
	for i := range metrics {
		e := metrics[i].External
		if e == nil {
			continue
		}
		q := m.target.DeepCopy()
		e.Target = autoscalingv2.MetricTarget{Type: m.metricType}
		if m.metricType == autoscalingv2.ValueMetricType {
			e.Target.Value = &q
		} else {
			e.Target.AverageValue = &q
		}
	}
}
