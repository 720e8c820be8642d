package v1alpha1_test

import (
	"strings"
	"testing"

	"github.com/metricscale/metricscale/autoscaler/validation/validationtest"
)

// TestCRDValidatesSchedules: the CRD rejects the invalid spec.schedules it
// can see, at their field or an enclosing one, accepts those only the
// simulator and the controller can find (a cron field out of range, an
// unknown time zone), and accepts the valid ones.
func TestCRDValidatesSchedules(t *testing.T) {
	t.Parallel()
	v := loadCRD(t)
	for _, tc := range validationtest.InvalidSchedules() {
		errs := v.validate(t, tc.Spec)
		if !tc.CRD {
			if len(errs) > 0 {
				t.Errorf("%s: the CRD rejects it (%v): move it to the CRD's cases", tc.Name, errs.ToAggregate())
			}
			continue
		}
		want := index.ReplaceAllString(tc.Field, "")
		found := false
		for _, e := range errs {
			f := index.ReplaceAllString(e.Field, "")
			found = found || (f != "spec" && strings.HasPrefix(want, f))
		}
		if !found {
			t.Errorf("%s: errors %v, want one at %s", tc.Name, errs.ToAggregate(), tc.Field)
		}
	}
	if errs := v.validate(t, validationtest.ScheduleSpec(nil)); len(errs) > 0 {
		t.Errorf("valid schedules rejected: %v", errs.ToAggregate())
	}
}
