package validation

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/validation/validationtest"
)

func TestFallback(t *testing.T) {
	t.Parallel()
	path := field.NewPath("spec", "fallback")
	for _, tc := range validationtest.InvalidFallbacks() {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			data, err := json.Marshal(tc.Fallback)
			if err != nil {
				t.Fatal(err)
			}
			var f v1alpha1.Fallback
			if err := json.Unmarshal(data, &f); err != nil {
				t.Fatal(err)
			}
			errs := Fallback(&f, path)
			if len(errs) != 1 || errs[0].Field != tc.Field {
				t.Errorf("errors %v, want one at %s", errs, tc.Field)
			}
		})
	}
	for _, f := range []*v1alpha1.Fallback{
		nil,
		{FailureThreshold: 1},
		{FailureThreshold: 3, Replicas: 100, Behavior: v1alpha1.FallbackCurrentReplicasIfHigher},
		{FailureThreshold: 3, Replicas: 2, Behavior: v1alpha1.FallbackCurrentReplicas},
	} {
		if errs := Fallback(f, path); len(errs) > 0 {
			t.Errorf("%+v: rejected: %v", f, errs)
		}
	}
}
