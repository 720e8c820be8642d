package v1alpha1_test

import (
	"strings"
	"testing"

	"github.com/metricscale/metricscale/autoscaler/validation/validationtest"
)

// TestCRDValidatesFormula: the CRD rejects the invalid spec.formula it can
// see, at their field or an enclosing one and nowhere else, accepts those only the
// simulator, the webhook and the controller can find (an expression that
// does not compile, is not a number or costs too much, a reserved word),
// and accepts the valid one.
func TestCRDValidatesFormula(t *testing.T) {
	t.Parallel()
	v := loadCRD(t)
	for _, tc := range validationtest.InvalidFormulas() {
		errs := v.validate(t, tc.Spec)
		if !tc.CRD {
			if len(errs) > 0 {
				t.Errorf("%s: the CRD rejects it (%v): move it to the CRD's cases", tc.Name, errs.ToAggregate())
			}
			continue
		}
		// Every error at the field or an enclosing one: a rule failing to
		// evaluate (a missing key, an index out of bounds) reports at the
		// spec, and would add a misleading error to the schema's. The
		// schema validator's summary of a failing allOf (a target's
		// quantity pattern) names no field.
		want := index.ReplaceAllString(tc.Field, "")
		for _, e := range errs {
			if e.Field == "" || e.Field == "<nil>" {
				continue
			}
			if f := index.ReplaceAllString(e.Field, ""); f == "spec" || !strings.HasPrefix(want, f) {
				t.Errorf("%s: error %v, want errors at %s only", tc.Name, e, tc.Field)
			}
		}
		if len(errs) == 0 {
			t.Errorf("%s: accepted, want an error at %s", tc.Name, tc.Field)
		}
	}
	if errs := v.validate(t, validationtest.FormulaSpec(nil)); len(errs) > 0 {
		t.Errorf("valid formula rejected: %v", errs.ToAggregate())
	}
}
