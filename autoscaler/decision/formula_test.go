package decision

import (
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/formula"
)

// TestFormulaFailures: what fails a formula fails it as a failed metric
// fails: the count stays rather than going down, ScalingActive says why,
// and spec.fallback counts the formula by its name.
func TestFormulaFailures(t *testing.T) {
	t.Parallel()
	target := resource.MustParse("10")
	spec := func(expr string) *v1alpha1.Formula {
		return &v1alpha1.Formula{
			Name: "backlog", Inputs: []v1alpha1.FormulaInput{{Name: "queue", Metric: 0}}, Expression: expr,
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &target},
		}
	}
	cases := []struct {
		name       string
		formula    *v1alpha1.Formula
		compileErr bool
		failRead   bool
		fallback   *v1alpha1.Fallback
		want       int32
		reason     string
		says       string
	}{
		// The queue holds 20 at 4 replicas: 2 is the answer when it works.
		{name: "works", formula: spec("queue"), want: 2, reason: "ValidMetricFound"},
		{name: "negative result", formula: spec("queue - 100"), want: 4, reason: ReasonFailedFormula, says: "a negative value"},
		{name: "division by zero", formula: spec("queue / (queue - 20)"), want: 4, reason: ReasonFailedFormula, says: "not a finite number"},
		{name: "input fails", formula: spec("queue"), failRead: true, want: 4, reason: ReasonFailedFormula, says: "input queue (spec.metrics[0])"},
		{name: "does not compile", formula: spec("queue +"), compileErr: true, want: 4, reason: ReasonInvalidFormula, says: "invalid formula backlog"},
		{
			name: "fallback counts the formula", formula: spec("queue - 100"), want: 7, reason: ReasonFailedFormula, says: "a negative value",
			fallback: &v1alpha1.Fallback{FailureThreshold: 1, Replicas: 7},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := anyScaleDown(hpa(nil, 20, externalMetric("5")))
			prog, errs := formula.Compile(tc.formula, h.Spec.Metrics, field.NewPath("spec"))
			if (len(errs) > 0) != tc.compileErr {
				t.Fatalf("compile errors %v", errs)
			}
			src := &source{external: []int64{20_000}, failExternal: tc.failRead}
			res := run(Input{
				Autoscaler: h, Scale: Scale{Replicas: 4, StatusReplicas: 4, Selector: "app=web"},
				Pods: makePods(4), Metrics: src, Settings: DefaultSettings(), Now: now,
				Formula: tc.formula, FormulaProgram: prog, FormulaErr: errs.ToAggregate(), Fallback: tc.fallback,
			}, nil)
			if res.Replicas != tc.want {
				t.Errorf("%d replicas, want %d (reason %q, err %v)", res.Replicas, tc.want, res.Reason, res.Err)
			}
			active := condition(res.Status, autoscalingv2.ScalingActive)
			if !strings.HasSuffix(active, "/"+tc.reason) {
				t.Errorf("ScalingActive %s, want reason %s", active, tc.reason)
			}
			if tc.says != "" && (res.Err == nil || !strings.Contains(res.Err.Error(), tc.says)) {
				t.Errorf("error %v, want one saying %q", res.Err, tc.says)
			}
			if got := res.Metrics[0]; got.Proposal != -1 || got.Input != "queue" {
				t.Errorf("input proposed %d (input %q): an input proposes nothing", got.Proposal, got.Input)
			}
			if tc.fallback != nil {
				if res.Fallback == nil || !res.Fallback.Active || len(res.Fallback.Metrics) != 1 || res.Fallback.Metrics[0].Name != "formula backlog" {
					t.Fatalf("fallback %+v, want it active on formula backlog", res.Fallback)
				}
				msg := condition(res.Status, ConditionFallback)
				if !strings.HasPrefix(msg, "True/") {
					t.Errorf("Fallback condition %s", msg)
				}
			}
		})
	}
}
