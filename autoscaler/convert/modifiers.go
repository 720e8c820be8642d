package convert

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
)

// scalingModifiers is spec.advanced.scalingModifiers.
type scalingModifiers struct {
	Formula          string                         `json:"formula"`
	Target           string                         `json:"target"`
	ActivationTarget string                         `json:"activationTarget,omitempty"`
	MetricType       autoscalingv2.MetricTargetType `json:"metricType,omitempty"`
}

// modifier is spec.advanced.scalingModifiers, converted one of two ways.
//
// KEDA (2.21, controllers/keda/hpa.go getScaledObjectMetricSpecs) gives its
// HPA the composite metric "composite-metric" in place of every External
// metric of the triggers, keeping the cpu and memory ones; its value is the
// formula over every External trigger's value, read together
// (pkg/scaling/scale_handler.go GetScaledObjectMetrics: one trigger failing
// fails the composite), and activity is the composite above
// activationTarget alone (getScaledObjectState).
//
//   - perMetric: the formula is one trigger or max(a, b, ...) of every
//     External trigger: each trigger's metric scaled on the formula's
//     target. For a single trigger or max(a, b, ...) that is the largest of
//     each trigger against that target, which is how a MetricAutoscaler
//     combines its metrics (the tolerance included: the largest ratio
//     decides either way), and the formula's activation is each trigger's
//     (max above A is one above A).
//   - otherwise spec.formula "composite-metric": every External trigger is
//     an input (those the formula does not name too: KEDA reads them into
//     the composite, and their failure fails it), the formula translated to
//     CEL (formula_expr.go), the target the formula's.
//
// cpu and memory triggers stay metrics of their own either way, as KEDA
// keeps them in its HPA; cron triggers outside the formula are dropped, as
// KEDA's HPA never sees them.
type modifier struct {
	formula    string // as written
	expr       exprNode
	triggers   []string // the trigger names the formula reads
	perMetric  bool
	target     resource.Quantity
	activation *resource.Quantity
	metricType autoscalingv2.MetricTargetType
	// inputs are the External metrics of the triggers, in spec.metrics
	// order, as apply binds them.
	inputs []modifierInput
}

type modifierInput struct {
	trigger string // the trigger's name ("" when it has none)
	index   int    // its index in spec.triggers
	metric  int32  // its index in spec.metrics
}

// kedaCompositeMetricName is the metric KEDA's HPA scales on with a
// formula (kedav1alpha1.CompositeMetricName); the formula's name here, so
// that status and events name what KEDA's did.
const kedaCompositeMetricName = "composite-metric"

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
	m = &modifier{formula: sm.Formula, target: target, metricType: sm.MetricType}
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
	m.expr, err = parseFormula(sm.Formula)
	var unsupported *unsupportedExpr
	switch {
	case errors.As(err, &unsupported):
		return nil, fmt.Sprintf("formula %q: %s has no equivalent in spec.formula (translated: numbers, trigger names, + - * /, comparisons, && || !, c ? a : b, max, min, abs, ceil, floor, round, float)", sm.Formula, unsupported.what), nil
	case err != nil:
		return nil, fmt.Sprintf("formula %q: %v: expr-lang refuses it, as KEDA would", sm.Formula, err), nil
	}
	m.triggers = m.expr.identifiers()
	types := map[string]string{}
	for _, t := range triggers {
		if t.Name != "" {
			types[t.Name] = t.Type
		}
	}
	for _, n := range m.triggers {
		typ, ok := types[n]
		switch {
		case !ok:
			return nil, "", fmt.Errorf("spec.advanced.scalingModifiers.formula: %q is not the name of a trigger", n)
		case typ == "cpu" || typ == "memory":
			return nil, fmt.Sprintf("trigger %q (%s) is in the formula: KEDA composes external metrics only", n, typ), nil
		case typ == "cron":
			return nil, fmt.Sprintf("trigger %q (cron) is in the formula: a cron trigger converts to a window of spec.schedules, not a metric an expression reads", n), nil
		}
	}
	m.perMetric = m.expr.kind == exprIdent || m.expr.kind == exprCall && m.expr.op == "math.greatest" && allIdents(m.expr.args)
	for _, t := range triggers {
		if t.Type != "cpu" && t.Type != "memory" && t.Type != "cron" && !slices.Contains(m.triggers, t.Name) {
			m.perMetric = false
		}
	}
	return m, "", nil
}

func allIdents(ns []exprNode) bool {
	for _, n := range ns {
		if n.kind != exprIdent {
			return false
		}
	}
	return true
}

// bind records that trigger i (t) converted to the External metric at
// index metric of spec.metrics.
func (m *modifier) bind(t *KEDATrigger, i int, metric int) {
	m.inputs = append(m.inputs, modifierInput{trigger: t.Name, index: i, metric: int32(metric)})
}

// targetOf is the formula's target as a MetricTarget.
func (m *modifier) targetOf() autoscalingv2.MetricTarget {
	q := m.target.DeepCopy()
	t := autoscalingv2.MetricTarget{Type: m.metricType}
	if m.metricType == autoscalingv2.ValueMetricType {
		t.Value = &q
	} else {
		t.AverageValue = &q
	}
	return t
}

// apply sets the formula on spec: its target on every bound metric
// (perMetric), or spec.formula over them.
func (m *modifier) apply(spec *v1alpha1.MetricAutoscalerSpec) {
	if m.perMetric {
		for _, in := range m.inputs {
			spec.Metrics[in.metric].External.Target = m.targetOf()
		}
		return
	}
	f := &v1alpha1.Formula{Name: kedaCompositeMetricName, Target: m.targetOf()}
	rename := map[string]string{}
	used := map[string]bool{}
	for _, in := range m.inputs {
		base := in.trigger
		if base == "" {
			base = fmt.Sprintf("trigger_%d", in.index)
		}
		name := celName(base)
		for k := 2; used[name]; k++ {
			name = fmt.Sprintf("%s_%d", celName(base), k)
		}
		used[name] = true
		if in.trigger != "" {
			rename[in.trigger] = name
		}
		f.Inputs = append(f.Inputs, v1alpha1.FormulaInput{Name: name, Metric: in.metric})
	}
	f.Expression = m.expr.cel(rename)
	spec.Formula = f
}

// celReserved are the words CEL keeps (and "math", ext.Math's namespace),
// which cannot name an input (as autoscaler/formula refuses them).
var celReserved = map[string]bool{
	"true": true, "false": true, "null": true, "in": true, "as": true, "break": true, "const": true,
	"continue": true, "else": true, "for": true, "function": true, "if": true, "import": true,
	"let": true, "loop": true, "package": true, "namespace": true, "return": true, "var": true,
	"void": true, "while": true, "math": true,
}

// celName is a trigger's name as a CEL identifier: characters other than
// letters, digits and '_' become '_', a reserved word or a leading digit
// gets a '_' in front, at most 63 characters.
func celName(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r == '_' || r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	n := b.String()
	if n == "" || celReserved[n] || n[0] >= '0' && n[0] <= '9' {
		n = "_" + n
	}
	if len(n) > 60 {
		n = n[:60]
	}
	return n
}

// activationNote says how the target activates from zero with spec.formula:
// a MetricAutoscaler's activation is per metric (each input above zero, as
// an External metric without an activation value), KEDA's the formula's
// value above activationTarget (0 when unset).
func (m *modifier) activationNote(f *v1alpha1.Formula) string {
	var names []string
	for _, in := range f.Inputs {
		names = append(names, in.Name)
	}
	at := "0"
	if m.activation != nil {
		at = m.activation.String()
	}
	return fmt.Sprintf("no equivalent for scaling from zero on the formula: KEDA activates the target when the formula's value is above %s, a MetricAutoscaler when one of its inputs (%s) is above zero (scaleToZero.activation names metrics, not the formula)", at, strings.Join(names, ", "))
}
