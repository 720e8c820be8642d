package validation

import (
	"encoding/json"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/metricscale/metricscale/autoscaler/defaults"
	"github.com/metricscale/metricscale/autoscaler/validation/validationtest"
)

func decode(t *testing.T, spec map[string]any) *autoscalingv2.HorizontalPodAutoscalerSpec {
	t.Helper()
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	var out autoscalingv2.HorizontalPodAutoscalerSpec
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	defaults.Spec(&out)
	return &out
}

// TestInvalidSpecs: every spec of the shared table is rejected at its field.
func TestInvalidSpecs(t *testing.T) {
	t.Parallel()
	table, err := validationtest.InvalidSpecs()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range table {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			errs := Spec(decode(t, tc.Spec), field.NewPath("spec"), Options{ScaleToZero: true})
			for _, e := range errs {
				if e.Field == tc.Field && strings.Contains(Describe(e), tc.Detail) {
					return
				}
			}
			t.Errorf("no error at %s containing %q; got %v", tc.Field, tc.Detail, errs)
		})
	}
}

// TestValidSpecs: the table's base, the defaults and scale to zero pass.
func TestValidSpecs(t *testing.T) {
	t.Parallel()
	table, err := validationtest.InvalidSpecs()
	if err != nil || len(table) == 0 {
		t.Fatal(err)
	}
	base := map[string]any{
		"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
		"maxReplicas":    3,
	}
	if errs := Spec(decode(t, base), field.NewPath("spec"), Options{}); len(errs) != 0 {
		t.Errorf("a defaulted minimal spec: %v", errs)
	}
	zero := decode(t, table[0].Spec)
	zero.MaxReplicas, zero.MinReplicas = 10, new(int32)
	if errs := Spec(zero, field.NewPath("spec"), Options{ScaleToZero: true}); len(errs) != 0 {
		t.Errorf("minReplicas 0 with an External metric and HPAScaleToZero: %v", errs)
	}
	if errs := Spec(zero, field.NewPath("spec"), Options{}); len(errs) != 1 || errs[0].Field != "spec.minReplicas" {
		t.Errorf("minReplicas 0 without HPAScaleToZero: %v, want one error at spec.minReplicas", errs)
	}
}
