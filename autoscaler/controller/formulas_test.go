package controller

import (
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
)

// TestFormulasCompileOncePerGeneration: the compiled program is reused
// while the generation stays, and compiled again when the spec changes.
func TestFormulasCompileOncePerGeneration(t *testing.T) {
	t.Parallel()
	q := resource.MustParse("10")
	ma := &v1alpha1.MetricAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "shop", UID: "u1", Generation: 1},
		Spec: v1alpha1.MetricAutoscalerSpec{
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "queue"},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &q},
			}}},
			Formula: &v1alpha1.Formula{Name: "backlog", Inputs: []v1alpha1.FormulaInput{{Name: "queue", Metric: 0}}, Expression: "queue * 2",
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &q}},
		},
	}
	var f formulas
	p1, err := f.compile(ma)
	if err != nil || p1 == nil {
		t.Fatalf("compile: %v", err)
	}
	if p2, _ := f.compile(ma); p2 != p1 {
		t.Error("the same generation was compiled again")
	}
	ma.Generation, ma.Spec.Formula.Expression = 2, "queue *"
	if p3, err := f.compile(ma); p3 != nil || err == nil || !strings.Contains(err.Error(), "spec.formula.expression") {
		t.Errorf("generation 2: %v, %v; want an error at spec.formula.expression", p3, err)
	}
	ma.Spec.Formula = nil
	if p4, err := f.compile(ma); p4 != nil || err != nil || len(f.byKey) != 0 {
		t.Errorf("without a formula: %v, %v, %d entries kept", p4, err, len(f.byKey))
	}
}
