package validation

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
)

// Fallback validates a MetricAutoscaler's spec.fallback as its CRD schema
// does (autoscaler/api/v1alpha1), for the simulator, which reads
// MetricAutoscalers without an API server. A fallback size outside
// min/maxReplicas is valid: the decision clamps it, as any proposal.
func Fallback(f *v1alpha1.Fallback, path *field.Path) field.ErrorList {
	if f == nil {
		return nil
	}
	var errs field.ErrorList
	if f.FailureThreshold < 1 {
		errs = append(errs, field.Invalid(path.Child("failureThreshold"), f.FailureThreshold, "must be greater than or equal to 1"))
	}
	if f.Replicas < 0 {
		errs = append(errs, field.Invalid(path.Child("replicas"), f.Replicas, "must be greater than or equal to 0"))
	}
	switch f.Behavior {
	case "", v1alpha1.FallbackStatic, v1alpha1.FallbackCurrentReplicas, v1alpha1.FallbackCurrentReplicasIfHigher, v1alpha1.FallbackCurrentReplicasIfLower:
	default:
		errs = append(errs, field.NotSupported(path.Child("behavior"), f.Behavior, []string{
			string(v1alpha1.FallbackStatic), string(v1alpha1.FallbackCurrentReplicas),
			string(v1alpha1.FallbackCurrentReplicasIfHigher), string(v1alpha1.FallbackCurrentReplicasIfLower),
		}))
	}
	return errs
}
