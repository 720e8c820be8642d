package validation

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/validation/validationtest"
)

func decodeSpec(t *testing.T, spec map[string]any) *v1alpha1.MetricAutoscalerSpec {
	t.Helper()
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	var s v1alpha1.MetricAutoscalerSpec
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

// TestScaleToZero: every invalid spec of the shared table is refused once,
// at its field; the valid ones pass.
func TestScaleToZero(t *testing.T) {
	t.Parallel()
	path := field.NewPath("spec")
	for _, tc := range validationtest.InvalidScaleToZeros() {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			errs := MetricAutoscaler(decodeSpec(t, tc.Spec), path)
			if len(errs) != 1 || errs[0].Field != tc.Field {
				t.Errorf("errors %v, want one at %s", errs, tc.Field)
			}
		})
	}
	for name, spec := range validationtest.ValidScaleToZeros() {
		if errs := MetricAutoscaler(decodeSpec(t, spec), path); len(errs) > 0 {
			t.Errorf("%s: rejected: %v", name, errs)
		}
	}
}
