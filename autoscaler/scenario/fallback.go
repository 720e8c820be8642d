package scenario

import (
	"errors"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/validation"
)

// validateFallback refuses a spec.fallback the MetricAutoscaler CRD would
// refuse; path is the spec's.
func validateFallback(f *v1alpha1.Fallback, path *field.Path) error {
	errs := validation.Fallback(f, path.Child("fallback"))
	if len(errs) == 0 {
		return nil
	}
	e := errs[0]
	return &FieldError{Path: e.Field, Err: errors.New(strings.TrimPrefix(validation.Describe(e), e.Field+": "))}
}
