package validation

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/metricscale/metricscale/autoscaler/validation/validationtest"
)

// TestFormula: every invalid spec.formula of the shared table is refused
// once, at its field (expressions and reserved words included); the
// table's base passes.
func TestFormula(t *testing.T) {
	t.Parallel()
	path := field.NewPath("spec")
	for _, tc := range validationtest.InvalidFormulas() {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			errs := MetricAutoscaler(decodeSpec(t, tc.Spec), path)
			if len(errs) != 1 || errs[0].Field != tc.Field {
				t.Errorf("errors %v, want one at %s", errs, tc.Field)
			}
		})
	}
	if errs := MetricAutoscaler(decodeSpec(t, validationtest.FormulaSpec(nil)), path); len(errs) > 0 {
		t.Errorf("valid formula rejected: %v", errs)
	}
}
