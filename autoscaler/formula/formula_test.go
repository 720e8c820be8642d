package formula

import (
	"math"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
)

func metrics() []autoscalingv2.MetricSpec {
	ext := func(name string) autoscalingv2.MetricSpec {
		return autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: name},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: resource.NewQuantity(5, resource.DecimalSI)},
		}}
	}
	cpu := int32(80)
	return []autoscalingv2.MetricSpec{ext("orders"), ext("payments"), {Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: "cpu", Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &cpu},
	}}}
}

func valid(expr string) *v1alpha1.Formula {
	q := resource.MustParse("10")
	return &v1alpha1.Formula{
		Name:       "backlog",
		Inputs:     []v1alpha1.FormulaInput{{Name: "orders", Metric: 0}, {Name: "payments", Metric: 1}},
		Expression: expr,
		Target:     autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &q},
	}
}

func TestEval(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		expr    string
		o, p    float64
		want    float64
		wantErr string
	}{
		{"orders + payments", 3, 4, 7, ""},
		{"orders + 2 * payments", 3, 4, 11, ""}, // integer literal read as a double
		{"(orders + payments) / 2", 3, 4, 3.5, ""},
		{"math.greatest(orders, payments)", 3, 4, 4, ""},
		{"math.least(orders, payments, 1.5)", 3, 4, 1.5, ""},
		{"orders > 100 ? orders : 0", 3, 4, 0, ""},
		{"orders > 2 ? orders : 0", 3, 4, 3, ""},
		{"math.ceil(orders)", 3.2, 0, 4, ""},
		{"orders - payments", 3, 4, 0, "negative"},
		{"orders / payments", 3, 0, 0, "not a finite number"},
		{"payments / orders", 0, 0, 0, "not a finite number"}, // NaN
	} {
		p, errs := Compile(valid(tc.expr), metrics(), field.NewPath("spec"))
		if len(errs) > 0 {
			t.Fatalf("%s: %v", tc.expr, errs.ToAggregate())
		}
		got, err := p.Eval(map[string]float64{"orders": tc.o, "payments": tc.p})
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "backlog") {
				t.Errorf("%s: got %v, %v; want an error naming the formula with %q", tc.expr, got, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.expr, err)
		case math.Abs(got-tc.want) > 1e-9:
			t.Errorf("%s = %v, want %v", tc.expr, got, tc.want)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("orders + ", 200) + "orders"
	list := "[" + strings.Repeat("orders,", 29) + "orders]"
	heavy := "double(" + list + ".map(x, " + list + ".map(y, " + list + ".map(z, x * y * z).size()).size()).size())"
	for _, tc := range []struct {
		name   string
		mutate func(f *v1alpha1.Formula)
		field  string
		says   string
	}{
		{"syntax", func(f *v1alpha1.Formula) { f.Expression = "orders +" }, "spec.formula.expression", "Syntax error"},
		{"unknown name", func(f *v1alpha1.Formula) { f.Expression = "orders + refunds" }, "spec.formula.expression", "refunds"},
		{"not a number", func(f *v1alpha1.Formula) { f.Expression = "orders > payments" }, "spec.formula.expression", "must evaluate to a number, not bool"},
		{"string", func(f *v1alpha1.Formula) { f.Expression = "'a'" }, "spec.formula.expression", "not string"},
		{"too long", func(f *v1alpha1.Formula) { f.Expression = long }, "spec.formula.expression", "longer than 1024"},
		{"too costly", func(f *v1alpha1.Formula) { f.Expression = heavy }, "spec.formula.expression", "exceeds the limit"},
		{"metric out of range", func(f *v1alpha1.Formula) { f.Inputs[1].Metric = 3 }, "spec.formula.inputs[1].metric", "0 to 2"},
		{"resource metric", func(f *v1alpha1.Formula) { f.Inputs[1].Metric = 2 }, "spec.formula.inputs[1].metric", "External or Object"},
		{"same metric twice", func(f *v1alpha1.Formula) { f.Inputs[1].Metric = 0 }, "spec.formula.inputs[1].metric", "Duplicate"},
		{"same name twice", func(f *v1alpha1.Formula) { f.Inputs[1].Name = "orders" }, "spec.formula.inputs[1].name", "Duplicate"},
		{"not an identifier", func(f *v1alpha1.Formula) { f.Inputs[0].Name = "2orders" }, "spec.formula.inputs[0].name", "CEL identifier"},
		{"reserved word", func(f *v1alpha1.Formula) { f.Inputs[0].Name = "in" }, "spec.formula.inputs[0].name", "reserved"},
		{"no inputs", func(f *v1alpha1.Formula) { f.Inputs = nil }, "spec.formula.inputs", "at least one"},
		{"utilization target", func(f *v1alpha1.Formula) {
			u := int32(50)
			f.Target = autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &u}
		}, "spec.formula.target", "Value"},
		{"zero target", func(f *v1alpha1.Formula) { q := resource.MustParse("0"); f.Target.AverageValue = &q }, "spec.formula.target.averageValue", "positive"},
	} {
		f := valid("orders + payments")
		tc.mutate(f)
		p, errs := Compile(f, metrics(), field.NewPath("spec"))
		if p != nil || len(errs) == 0 {
			t.Errorf("%s: compiled", tc.name)
			continue
		}
		found := false
		for _, e := range errs {
			found = found || (e.Field == tc.field && strings.Contains(e.Error(), tc.says))
		}
		if !found {
			t.Errorf("%s: %v; want an error at %s saying %q", tc.name, errs.ToAggregate(), tc.field, tc.says)
		}
	}
}
