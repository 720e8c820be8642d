package validation

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/formula"
)

// Formula validates spec.formula: its name, what the CRD's schema and CEL
// rules check of its inputs and target, and what they cannot, which the
// admission webhook refuses and the controller reports as the
// InvalidFormula condition: an expression that does not compile, is not a
// number or costs too much. path is the spec's.
func Formula(spec *v1alpha1.MetricAutoscalerSpec, path *field.Path) field.ErrorList {
	f := spec.Formula
	if f == nil {
		return nil
	}
	var errs field.ErrorList
	if len(f.Name) > 63 || !scheduleName.MatchString(f.Name) {
		errs = append(errs, field.Invalid(path.Child("formula", "name"), f.Name, "must be a DNS label (lower-case letters, digits and '-', at most 63)"))
	}
	_, ferrs := formula.Compile(f, spec.Metrics, path)
	return append(errs, ferrs...)
}
