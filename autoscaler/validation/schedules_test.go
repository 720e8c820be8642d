package validation

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/metricscale/metricscale/autoscaler/validation/validationtest"
)

// TestSchedules: every invalid spec.schedules of the shared table is
// refused once, at its field (cron expressions and time zones included);
// the table's base passes.
func TestSchedules(t *testing.T) {
	t.Parallel()
	path := field.NewPath("spec")
	for _, tc := range validationtest.InvalidSchedules() {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			errs := MetricAutoscaler(decodeSpec(t, tc.Spec), path)
			if len(errs) != 1 || errs[0].Field != tc.Field {
				t.Errorf("errors %v, want one at %s", errs, tc.Field)
			}
		})
	}
	if errs := MetricAutoscaler(decodeSpec(t, validationtest.ScheduleSpec(nil)), path); len(errs) > 0 {
		t.Errorf("valid schedules rejected: %v", errs)
	}
}
