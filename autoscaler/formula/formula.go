// Package formula compiles and evaluates spec.formula, a composite metric
// computed by a CEL expression over named metrics of spec.metrics, with the
// cost bounded at compile time and at evaluation.
package formula

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
)

// Bounds the CRD's schema and the compiler both hold an expression to.
const (
	MaxInputs           = 32
	MaxExpressionLength = 1024
	// MaxCost bounds an expression's estimated worst-case cost and its
	// actual cost at evaluation, in CEL cost units (about one per
	// operation): far above any arithmetic over 32 inputs, far below what
	// would let a spec slow the controller down.
	MaxCost = 10_000
)

// Program is a compiled formula.
type Program struct {
	name   string
	inputs []v1alpha1.FormulaInput
	prg    cel.Program
}

// Name is the composite metric's name.
func (p *Program) Name() string { return p.name }

// Inputs are the bindings of the expression's names to spec.metrics.
func (p *Program) Inputs() []v1alpha1.FormulaInput { return p.inputs }

// Compile checks f against the spec's metrics and compiles it. path is the
// spec's; errors are located at the formula's fields.
func Compile(f *v1alpha1.Formula, metrics []autoscalingv2.MetricSpec, path *field.Path) (*Program, field.ErrorList) {
	if f == nil {
		return nil, nil
	}
	fp := path.Child("formula")
	errs := checkInputs(f, metrics, fp.Child("inputs"))
	errs = append(errs, checkTarget(f.Target, fp.Child("target"))...)
	if len(errs) > 0 {
		return nil, errs
	}
	prg, err := compile(f.Expression, f.Inputs)
	if err != nil {
		return nil, append(errs, field.Invalid(fp.Child("expression"), f.Expression, err.Error()))
	}
	return &Program{name: f.Name, inputs: append([]v1alpha1.FormulaInput(nil), f.Inputs...), prg: prg}, nil
}

func checkInputs(f *v1alpha1.Formula, metrics []autoscalingv2.MetricSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(f.Inputs) == 0 {
		errs = append(errs, field.Required(p, "a formula needs at least one input"))
	}
	if len(f.Inputs) > MaxInputs {
		errs = append(errs, field.TooMany(p, len(f.Inputs), MaxInputs))
	}
	names, indexes := map[string]bool{}, map[int32]bool{}
	for i, in := range f.Inputs {
		ip := p.Index(i)
		switch {
		case !identifier(in.Name):
			errs = append(errs, field.Invalid(ip.Child("name"), in.Name, "must be a CEL identifier: a letter or '_', then letters, digits or '_', at most 63"))
		case reserved[in.Name]:
			errs = append(errs, field.Invalid(ip.Child("name"), in.Name, "is a reserved word of CEL"))
		case names[in.Name]:
			errs = append(errs, field.Duplicate(ip.Child("name"), in.Name))
		}
		names[in.Name] = true
		switch {
		case in.Metric < 0 || int(in.Metric) >= len(metrics):
			errs = append(errs, field.Invalid(ip.Child("metric"), in.Metric, fmt.Sprintf("must be the index of a metric of spec.metrics (0 to %d)", len(metrics)-1)))
		case metrics[in.Metric].Type != autoscalingv2.ExternalMetricSourceType && metrics[in.Metric].Type != autoscalingv2.ObjectMetricSourceType:
			errs = append(errs, field.Invalid(ip.Child("metric"), in.Metric, fmt.Sprintf("must be an External or Object metric, not %s", metrics[in.Metric].Type)))
		case indexes[in.Metric]:
			errs = append(errs, field.Duplicate(ip.Child("metric"), in.Metric))
		}
		indexes[in.Metric] = true
	}
	return errs
}

func checkTarget(t autoscalingv2.MetricTarget, p *field.Path) field.ErrorList {
	switch {
	case t.Type == autoscalingv2.ValueMetricType && t.Value != nil && t.AverageValue == nil:
		if t.Value.Sign() <= 0 {
			return field.ErrorList{field.Invalid(p.Child("value"), t.Value.String(), "must be positive")}
		}
	case t.Type == autoscalingv2.AverageValueMetricType && t.AverageValue != nil && t.Value == nil:
		if t.AverageValue.Sign() <= 0 {
			return field.ErrorList{field.Invalid(p.Child("averageValue"), t.AverageValue.String(), "must be positive")}
		}
	default:
		return field.ErrorList{field.Invalid(p, t.Type, "must be of type Value with value set, or AverageValue with averageValue set")}
	}
	return nil
}

func identifier(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i, r := range s {
		letter := r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
		if !letter && (i == 0 || r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// reserved are CEL's reserved words and its literals' names, which cannot
// name a variable.
var reserved = map[string]bool{
	"true": true, "false": true, "null": true, "in": true, "as": true, "break": true, "const": true,
	"continue": true, "else": true, "for": true, "function": true, "if": true, "import": true,
	"let": true, "loop": true, "package": true, "namespace": true, "return": true, "var": true,
	"void": true, "while": true, "math": true,
}

func compile(expr string, inputs []v1alpha1.FormulaInput) (cel.Program, error) {
	if len(expr) > MaxExpressionLength {
		return nil, fmt.Errorf("longer than %d characters", MaxExpressionLength)
	}
	opts := []cel.EnvOption{ext.Math(), cel.CrossTypeNumericComparisons(true)}
	for _, in := range inputs {
		opts = append(opts, cel.Variable(in.Name, cel.DoubleType))
	}
	env, err := cel.NewEnv(opts...)
	if err != nil {
		return nil, fmt.Errorf("building the CEL environment: %w", err)
	}
	parsed, iss := env.Parse(expr)
	if iss.Err() != nil {
		return nil, issues(iss)
	}
	doubleLiterals(parsed)
	checked, iss := env.Check(parsed)
	if iss.Err() != nil {
		return nil, issues(iss)
	}
	switch t := checked.OutputType(); {
	case t.IsExactType(cel.DoubleType), t.IsExactType(cel.IntType), t.IsExactType(cel.UintType):
	default:
		return nil, fmt.Errorf("must evaluate to a number, not %s", t)
	}
	est, err := env.EstimateCost(checked, noSizes{})
	if err != nil {
		return nil, fmt.Errorf("estimating its cost: %w", err)
	}
	if est.Max > MaxCost {
		return nil, fmt.Errorf("its estimated cost %d exceeds the limit of %d", est.Max, MaxCost)
	}
	prg, err := env.Program(checked, cel.CostLimit(MaxCost), cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, err
	}
	return prg, nil
}

// doubleLiterals rewrites integer literals as doubles: CEL has no implicit
// conversion, and `2 * orders` over a double would not type-check.
func doubleLiterals(a *cel.Ast) {
	fac := ast.NewExprFactory()
	ast.PostOrderVisit(a.NativeRep().Expr(), ast.NewExprVisitor(func(e ast.Expr) {
		if e.Kind() != ast.LiteralKind {
			return
		}
		switch v := e.AsLiteral().(type) {
		case types.Int:
			e.SetKindCase(fac.NewLiteral(e.ID(), types.Double(v)))
		case types.Uint:
			e.SetKindCase(fac.NewLiteral(e.ID(), types.Double(v)))
		}
	}))
}

// noSizes estimates with no size hints: the inputs are numbers.
type noSizes struct{}

func (noSizes) EstimateSize(checker.AstNode) *checker.SizeEstimate { return nil }
func (noSizes) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// issues renders CEL's errors as "line:column: message", without the
// source excerpt, which the field error already carries.
func issues(iss *cel.Issues) error {
	var parts []string
	for _, e := range iss.Errors() {
		parts = append(parts, fmt.Sprintf("%d:%d: %s", e.Location.Line(), e.Location.Column()+1, e.Message))
	}
	return errors.New(strings.Join(parts, "; "))
}

// Eval computes the formula over the inputs' values, by input name. A
// result that is not a finite number at or above zero is an error: a
// composite below zero or undefined must not read as "no load".
func (p *Program) Eval(values map[string]float64) (float64, error) {
	act := make(map[string]any, len(values))
	for k, v := range values {
		act[k] = v
	}
	out, _, err := p.prg.Eval(act)
	if err != nil {
		return 0, fmt.Errorf("formula %s: %w", p.name, err)
	}
	var v float64
	switch x := out.Value().(type) {
	case float64:
		v = x
	case int64:
		v = float64(x)
	case uint64:
		v = float64(x)
	default:
		return 0, fmt.Errorf("formula %s: evaluated to %v, not a number", p.name, out)
	}
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return 0, fmt.Errorf("formula %s: evaluated to %v, not a finite number", p.name, v)
	case v < 0:
		return 0, fmt.Errorf("formula %s: evaluated to %v, a negative value", p.name, v)
	}
	return v, nil
}
