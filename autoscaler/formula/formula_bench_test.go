package formula

import (
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
)

// benchFormula is a realistic formula of three External inputs: a backlog
// weighted by its kind, floored by the arrival rate.
func benchFormula() (*v1alpha1.Formula, []autoscalingv2.MetricSpec) {
	var metrics []autoscalingv2.MetricSpec
	for _, name := range []string{"orders", "payments", "arrivals"} {
		metrics = append(metrics, autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: name},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: resource.NewQuantity(5, resource.DecimalSI)},
		}})
	}
	q := resource.MustParse("10")
	return &v1alpha1.Formula{
		Name:       "backlog",
		Inputs:     []v1alpha1.FormulaInput{{Name: "orders", Metric: 0}, {Name: "payments", Metric: 1}, {Name: "arrivals", Metric: 2}},
		Expression: "math.greatest(orders + 2 * payments, arrivals > 100 ? arrivals / 2 : 0)",
		Target:     autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &q},
	}, metrics
}

// BenchmarkCompile is what the controller pays at each reconcile as long
// as it compiles the formula there.
func BenchmarkCompile(b *testing.B) {
	f, metrics := benchFormula()
	path := field.NewPath("spec")
	b.ReportAllocs()
	for b.Loop() {
		if _, errs := Compile(f, metrics, path); len(errs) > 0 {
			b.Fatal(errs.ToAggregate())
		}
	}
}

func BenchmarkEval(b *testing.B) {
	f, metrics := benchFormula()
	p, errs := Compile(f, metrics, field.NewPath("spec"))
	if len(errs) > 0 {
		b.Fatal(errs.ToAggregate())
	}
	values := map[string]float64{"orders": 30, "payments": 12, "arrivals": 150}
	b.ReportAllocs()
	for b.Loop() {
		v, err := p.Eval(values)
		// max(30 + 2*12, 150/2)
		if err != nil || v != 75 {
			b.Fatalf("got %v, %v; want 75", v, err)
		}
	}
}
