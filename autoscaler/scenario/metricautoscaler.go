package scenario

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/validation"
)

const kindMetricAutoscaler = "MetricAutoscaler"

// maEdit is a step's edit of a MetricAutoscaler's spec.
type maEdit struct {
	APIVersion string                           `json:"apiVersion"`
	Kind       string                           `json:"kind"`
	Metadata   any                              `json:"metadata"`
	Spec       v1alpha1.MetricAutoscalerSpec    `json:"spec"`
	Status     *v1alpha1.MetricAutoscalerStatus `json:"status"`
}

// takeMetricAutoscaler decodes the autoscaler of a scenario whose kind is
// MetricAutoscaler, and its steps' edits, with the MetricAutoscaler's types,
// and removes them from generic so that the rest decodes as for an HPA.
// It returns nil when the scenario's autoscaler is not a MetricAutoscaler.
func takeMetricAutoscaler(generic any) (*v1alpha1.MetricAutoscaler, map[int]*v1alpha1.MetricAutoscalerSpec, error) {
	top, ok := generic.(map[string]any)
	if !ok {
		return nil, nil, nil
	}
	a, ok := top["autoscaler"].(map[string]any)
	if !ok || a["kind"] != kindMetricAutoscaler {
		return nil, nil, nil
	}
	if v := a["apiVersion"]; v != nil && v != v1alpha1.GroupVersion.String() {
		return nil, nil, fieldErr("autoscaler.apiVersion", "must be %s for a MetricAutoscaler, got %s", v1alpha1.GroupVersion, describe(v))
	}
	ma := &v1alpha1.MetricAutoscaler{}
	if err := decodeValue("autoscaler", a, reflect.ValueOf(ma).Elem()); err != nil {
		return nil, nil, err
	}
	if ma.Spec.Paused {
		return nil, nil, fieldErr("autoscaler.spec.paused", "a paused MetricAutoscaler makes no decisions to replay")
	}
	if err := validateMetricAutoscaler(&ma.Spec, field.NewPath("autoscaler", "spec")); err != nil {
		return nil, nil, err
	}
	delete(top, "autoscaler")
	edits := map[int]*v1alpha1.MetricAutoscalerSpec{}
	steps, _ := top["steps"].([]any)
	for i, st := range steps {
		m, ok := st.(map[string]any)
		if !ok || m["autoscaler"] == nil {
			continue
		}
		path := fmt.Sprintf("steps[%d].autoscaler", i)
		var e maEdit
		if err := decodeValue(path, m["autoscaler"], reflect.ValueOf(&e).Elem()); err != nil {
			return nil, nil, err
		}
		if e.Kind != "" && e.Kind != kindMetricAutoscaler {
			return nil, nil, fieldErr(path+".kind", "must be %s, as the scenario's autoscaler, got %q", kindMetricAutoscaler, e.Kind)
		}
		if e.Spec.Paused {
			return nil, nil, fieldErr(path+".spec.paused", "a paused MetricAutoscaler makes no decisions to replay")
		}
		if err := validateMetricAutoscaler(&e.Spec, field.NewPath("steps").Index(i).Child("autoscaler", "spec")); err != nil {
			return nil, nil, err
		}
		edits[i] = &e.Spec
		delete(m, "autoscaler")
	}
	return ma, edits, nil
}

// validateMetricAutoscaler refuses what the MetricAutoscaler CRD refuses
// beyond an HPA's validation (spec.fallback, spec.scaleToZero, the bound on
// metrics); path is the spec's.
func validateMetricAutoscaler(spec *v1alpha1.MetricAutoscalerSpec, path *field.Path) error {
	errs := validation.MetricAutoscaler(spec, path)
	if len(errs) == 0 {
		return nil
	}
	e := errs[0]
	return &FieldError{Path: e.Field, Err: errors.New(strings.TrimPrefix(validation.Describe(e), e.Field+": "))}
}
