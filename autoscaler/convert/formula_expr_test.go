package convert

import (
	"errors"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/formula"
)

// TestTranslateFormula: each expr-lang formula of the subset becomes the CEL
// written, which compiles with formula.Compile and evaluates, at a=3 b=4
// c=10, to the value expr-lang gives (worked out by hand from expr-lang's
// precedences: / divides as floats, `not` binds looser than *, chained
// comparisons are a conjunction).
func TestTranslateFormula(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr, cel string
		want      float64
	}{
		{"(a + b)/2", "(a + b) / 2", 3.5},
		{"a + b / 2", "a + b / 2", 5},
		{"a - b - c", "a - b - c", -11}, // left-associative: (3-4)-10
		{"a - (b - c)", "a - (b - c)", 9},
		{"a / b * c", "a / b * c", 7.5},
		{"a / (b * c)", "a / (b * c)", 0.075},
		{"7 / 2", "7 / 2", 3.5},
		{"-a * b", "-a * b", -12},
		{"-(a * b) + c", "-(a * b) + c", -2},
		{"- -a", "-(-a)", 3},
		{"+a + 1", "a + 1", 4},
		{"1_000 + 0.5 + .25 + 1e1", "1000 + 0.5 + 0.25 + 10.0", 1010.75},
		{"max(a, b, c) - min(a, b)", "math.greatest(a, b, c) - math.least(a, b)", 7},
		{"max(a)", "math.greatest(a)", 3},
		{"abs(a - c)", "math.abs(a - c)", 7},
		{"ceil(a / b) + floor(c / b) + round(2.5)", "math.ceil(a / b) + math.floor(c / b) + math.round(2.5)", 6},
		{"round(-2.5) + 4", "math.round(-2.5) + 4", 1}, // half away from zero, as Go's math.Round
		{"float(a) + float(b * 2)", "a + b * 2", 11},
		{"a > b ? a : b", "a > b ? a : b", 4},
		{"a > 1 && b > 1 ? c : 0", "a > 1 && b > 1 ? c : 0", 10},
		{"a > 5 or b > 3 ? 1 : 2", "a > 5 || b > 3 ? 1 : 2", 1},
		{"a > 5 and b > 3 ? 1 : 2", "a > 5 && b > 3 ? 1 : 2", 2},
		{"not (a > b) ? 1 : 0", "!(a > b) ? 1 : 0", 1},
		{"!(a == 3) ? 1 : 0", "!(a == 3) ? 1 : 0", 0},
		{"a != b == true ? 1 : 0", "(a != b) == true ? 1 : 0", 1},
		{"a < b < c ? 1 : 0", "a < b && b < c ? 1 : 0", 1},
		{"c > b >= a ? 1 : 0", "c > b && b >= a ? 1 : 0", 1},
		{"a > b ? 1 : b > c ? 2 : 3", "a > b ? 1 : (b > c ? 2 : 3)", 3},
		{"(a > b ? a : b) * 2", "(a > b ? a : b) * 2", 8},
		{"max(a > b ? a : 0, c)", "math.greatest(a > b ? a : 0, c)", 10},
		{"a || b > 1 ? 1 : 0", "", 0}, // a is a number: CEL refuses as expr-lang does
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			t.Parallel()
			n, err := parseFormula(tt.expr)
			if err != nil {
				t.Fatal(err)
			}
			rename := map[string]string{"a": "a", "b": "b", "c": "c"}
			got := n.cel(rename)
			prg, errs := compileForTest(got)
			if tt.cel == "" {
				if len(errs) == 0 {
					t.Errorf("%q compiled: want a type error", got)
				}
				return
			}
			if got != tt.cel {
				t.Errorf("CEL %q, want %q", got, tt.cel)
			}
			if len(errs) > 0 {
				t.Fatalf("%q does not compile: %v", got, errs)
			}
			v, err := prg.Eval(map[string]float64{"a": 3, "b": 4, "c": 10})
			if tt.want < 0 {
				// spec.formula refuses negative results (a failed metric)
				if err == nil {
					t.Errorf("%q evaluated to %v: want the negative result refused", got, v)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if v != tt.want {
				t.Errorf("%q = %v, want %v", got, v, tt.want)
			}
		})
	}
}

func compileForTest(expr string) (*formula.Program, field.ErrorList) {
	q := resource.MustParse("1")
	var metrics []autoscalingv2.MetricSpec
	var inputs []v1alpha1.FormulaInput
	for i, n := range []string{"a", "b", "c"} {
		metrics = append(metrics, autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: n}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &q},
		}})
		inputs = append(inputs, v1alpha1.FormulaInput{Name: n, Metric: int32(i)})
	}
	f := &v1alpha1.Formula{Name: "composite-metric", Inputs: inputs, Expression: expr,
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: &q}}
	return formula.Compile(f, metrics, field.NewPath("spec"))
}

// TestTranslateFormulaRefused: what is not translated is refused naming
// the construct; what expr-lang itself refuses is an invalid formula.
func TestTranslateFormulaRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr, what string
		invalid    bool
	}{
		{"a % 2", "remainder operator %", false},
		{"a ** 2", "power operator **", false},
		{"a ^ 2", "power operator ^", false},
		{"a ?? 0", "nil-coalescing operator ??", false},
		{"(a ?? 0) + b", "nil-coalescing operator ??", false},
		{"a ?: b", "Elvis operator", false},
		{"a?.b", "optional chaining", false},
		{"a.b", "member access", false},
		{"a[0]", "array or index", false},
		{"[a, b]", "array or index", false},
		{"{x: a}", "map or predicate", false},
		{`a + len("x")`, "a string", false},
		{"int(a)", "the function int()", false},
		{"sum([a])", "the function sum()", false},
		{"let x = a; x", "let declaration", false},
		{"if a > 1 { a } else { b }", "if expression", false},
		{"a; b", "sequence", false},
		{"a | max(b)", "pipe operator", false},
		{"1..3", "range operator", false},
		{"a in [1]", "operator in", false},
		{"a not in [1]", "negated operator", false},
		{"a == nil ? 0 : a", "nil", false},
		{"$env.a", "$env", false},
		{"0x10 + a", "the number \"0x10\"", false},
		{"a // comment", "a comment", false},
		{"a #", "predicate pointer", false},
		{"max()", "needs an argument", true},
		{"abs(a, b)", "takes one argument", true},
		{"(a + b", "unexpected end", true},
		{"a b", `unexpected "b"`, true},
		{"a + @", "unrecognized character", true},
		{"99999999999999999999", "invalid integer literal", true},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			t.Parallel()
			_, err := parseFormula(tt.expr)
			if err == nil || !strings.Contains(err.Error(), tt.what) {
				t.Fatalf("error %v, want one saying %q", err, tt.what)
			}
			var inv *invalidExpr
			if errors.As(err, &inv) != tt.invalid {
				t.Errorf("error %T %v: invalid %v, want %v", err, err, !tt.invalid, tt.invalid)
			}
		})
	}
}

func TestFormulaIdentifiers(t *testing.T) {
	t.Parallel()
	n, err := parseFormula("max(b, a) + b * c_2 - $x")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(n.identifiers(), ","); got != "b,a,c_2,$x" {
		t.Errorf("identifiers %s, want b,a,c_2,$x (first use order, once each)", got)
	}
	if got := n.cel(map[string]string{"a": "a", "b": "b", "c_2": "c_2", "$x": "_x"}); got != "math.greatest(b, a) + b * c_2 - _x" {
		t.Errorf("CEL %q: want the names renamed", got)
	}
}

func TestCELName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"orders": "orders", "trig_one": "trig_one", "in-flight": "in_flight", "math": "_math", "as": "_as",
		"$q": "_q", "äpfel": "_pfel", "": "_", strings.Repeat("x", 70): strings.Repeat("x", 60),
	} {
		got := celName(in)
		if got != want {
			t.Errorf("celName(%q) = %q, want %q", in, got, want)
		}
		if _, errs := compileNamed(got); len(errs) > 0 {
			t.Errorf("celName(%q) = %q: not an input name formula.Compile takes: %v", in, got, errs)
		}
	}
}

func compileNamed(name string) (*formula.Program, field.ErrorList) {
	q := resource.MustParse("1")
	metrics := []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "m"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &q},
	}}}
	f := &v1alpha1.Formula{Name: "composite-metric", Inputs: []v1alpha1.FormulaInput{{Name: name}}, Expression: name + " * 2",
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: &q}}
	return formula.Compile(f, metrics, field.NewPath("spec"))
}
