package v1alpha1_test

import (
	"strings"
	"testing"

	"github.com/metricscale/metricscale/autoscaler/validation/validationtest"
)

// TestCRDValidatesScaleToZero: the CRD rejects the invalid spec.scaleToZero
// values the simulator's validation is tested with, at their field or at
// the list or spec whose CEL rule catches them, and accepts the valid ones.
func TestCRDValidatesScaleToZero(t *testing.T) {
	t.Parallel()
	v := loadCRD(t)
	for _, tc := range validationtest.InvalidScaleToZeros() {
		errs := v.validate(t, tc.Spec)
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
	for name, spec := range validationtest.ValidScaleToZeros() {
		if errs := v.validate(t, spec); len(errs) > 0 {
			t.Errorf("%s: rejected: %v", name, errs.ToAggregate())
		}
	}
}
