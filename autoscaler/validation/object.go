package validation

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/defaults"
)

// Object is every check of a MetricAutoscaler's spec as written: the
// autoscaling/v2 part (Spec) once defaulted as the API server defaults it,
// then what MetricAutoscaler adds (the CRD's rules and what they cannot
// check: formulas, schedules). It is what the admission webhook refuses;
// spec is not modified. path is the spec's.
func Object(spec *v1alpha1.MetricAutoscalerSpec, path *field.Path, opts Options) field.ErrorList {
	hpa := spec.DeepCopy().HPASpec()
	defaults.Spec(&hpa)
	errs := Spec(&hpa, path, opts)
	return append(errs, MetricAutoscaler(spec, path)...)
}
