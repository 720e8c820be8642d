package validation

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/metricscale/metricscale/autoscaler/validation/validationtest"
)

// TestExtensions: every invalid spec.schedules and spec.formula of the
// shared tables is refused once, at its field (cron expressions, time
// zones and CEL expressions included); each table's base passes.
func TestExtensions(t *testing.T) {
	t.Parallel()
	path := field.NewPath("spec")
	for _, family := range validationtest.Families() {
		for _, tc := range family.Cases {
			t.Run(family.Name+"/"+tc.Name, func(t *testing.T) {
				t.Parallel()
				errs := MetricAutoscaler(decodeSpec(t, tc.Spec), path)
				if len(errs) != 1 || errs[0].Field != tc.Field {
					t.Errorf("errors %v, want one at %s", errs, tc.Field)
				}
			})
		}
		if errs := MetricAutoscaler(decodeSpec(t, family.Valid), path); len(errs) > 0 {
			t.Errorf("valid %s rejected: %v", family.Name, errs)
		}
	}
}
