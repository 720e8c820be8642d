package v1alpha1_test

import (
	"strings"
	"testing"

	"github.com/metricscale/metricscale/autoscaler/validation/validationtest"
)

// TestCRDValidatesExtensions: the CRD rejects the invalid spec.schedules
// and spec.formula it can see, at their field or an enclosing one and
// nowhere else; accepts those only the simulator, the webhook and the
// controller can find (a cron field out of range, an unknown time zone, an
// expression that does not compile, is not a number or costs too much, a
// reserved word); and accepts the valid ones.
func TestCRDValidatesExtensions(t *testing.T) {
	t.Parallel()
	v := loadCRD(t)
	for _, family := range validationtest.Families() {
		for _, tc := range family.Cases {
			errs := v.validate(t, tc.Spec)
			if !tc.CRD {
				if len(errs) > 0 {
					t.Errorf("%s/%s: the CRD rejects it (%v): move it to the CRD's cases", family.Name, tc.Name, errs.ToAggregate())
				}
				continue
			}
			// Every error at the field or an enclosing one: a rule failing
			// to evaluate (a missing key, an index out of bounds) reports at
			// the spec, and would add a misleading error to the schema's.
			// The schema validator's summary of a failing allOf (a target's
			// quantity pattern) names no field.
			want := index.ReplaceAllString(tc.Field, "")
			at := 0
			for _, e := range errs {
				if e.Field == "" || e.Field == "<nil>" {
					continue
				}
				if f := index.ReplaceAllString(e.Field, ""); f == "spec" || !strings.HasPrefix(want, f) {
					t.Errorf("%s/%s: error %v, want errors at %s only", family.Name, tc.Name, e, tc.Field)
					continue
				}
				at++
			}
			if at == 0 {
				t.Errorf("%s/%s: errors %v, want one at %s", family.Name, tc.Name, errs.ToAggregate(), tc.Field)
			}
		}
		if errs := v.validate(t, family.Valid); len(errs) > 0 {
			t.Errorf("valid %s rejected: %v", family.Name, errs.ToAggregate())
		}
	}
}
