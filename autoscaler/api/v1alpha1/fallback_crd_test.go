package v1alpha1_test

import (
	"strings"
	"testing"

	"github.com/metricscale/metricscale/autoscaler/validation/validationtest"
)

// TestCRDValidatesFallback: the CRD rejects the invalid spec.fallback values
// the simulator's validation is tested with, and accepts each behavior.
func TestCRDValidatesFallback(t *testing.T) {
	t.Parallel()
	v := loadCRD(t)
	spec := func(fb map[string]any) map[string]any {
		return map[string]any{
			"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
			"maxReplicas":    5,
			"fallback":       fb,
		}
	}
	for _, tc := range validationtest.InvalidFallbacks() {
		errs := v.validate(t, spec(tc.Fallback))
		found := false
		for _, e := range errs {
			found = found || strings.HasPrefix(e.Field, tc.Field)
		}
		if !found {
			t.Errorf("%s: errors %v, want one at %s", tc.Name, errs.ToAggregate(), tc.Field)
		}
	}
	for _, b := range []string{"static", "currentReplicas", "currentReplicasIfHigher", "currentReplicasIfLower"} {
		if errs := v.validate(t, spec(map[string]any{"failureThreshold": 3, "replicas": 0, "behavior": b})); len(errs) > 0 {
			t.Errorf("behavior %s: rejected: %v", b, errs.ToAggregate())
		}
	}
}
