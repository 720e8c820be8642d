package scenario

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
//
// A step's status (the status a recorded reconcile read, when it is not the
// one the step before wrote) is a MetricAutoscaler's only; it is taken out
// into statuses.
func takeMetricAutoscaler(generic any) (*v1alpha1.MetricAutoscaler, map[int]*v1alpha1.MetricAutoscalerSpec, map[int]*v1alpha1.MetricAutoscalerStatus, error) {
	top, ok := generic.(map[string]any)
	if !ok {
		return nil, nil, nil, nil
	}
	a, ok := top["autoscaler"].(map[string]any)
	if !ok || a["kind"] != kindMetricAutoscaler {
		return nil, nil, nil, nil
	}
	if v := a["apiVersion"]; v != nil && v != v1alpha1.GroupVersion.String() {
		return nil, nil, nil, fieldErr("autoscaler.apiVersion", "must be %s for a MetricAutoscaler, got %s", v1alpha1.GroupVersion, describe(v))
	}
	seed, err := takeHistory(a, "autoscaler.status")
	if err != nil {
		return nil, nil, nil, err
	}
	ma := &v1alpha1.MetricAutoscaler{}
	if err := decodeValue("autoscaler", a, reflect.ValueOf(ma).Elem()); err != nil {
		return nil, nil, nil, err
	}
	if seed != nil {
		ma.Status.History = seed
	}
	if ma.Spec.Paused {
		return nil, nil, nil, fieldErr("autoscaler.spec.paused", "a paused MetricAutoscaler makes no decisions to replay")
	}
	if err := validateMetricAutoscaler(&ma.Spec, field.NewPath("autoscaler", "spec")); err != nil {
		return nil, nil, nil, err
	}
	delete(top, "autoscaler")
	edits := map[int]*v1alpha1.MetricAutoscalerSpec{}
	statuses := map[int]*v1alpha1.MetricAutoscalerStatus{}
	steps, _ := top["steps"].([]any)
	for i, st := range steps {
		m, ok := st.(map[string]any)
		if !ok {
			continue
		}
		if raw, ok := m["status"]; ok {
			path := fmt.Sprintf("steps[%d].status", i)
			h, err := takeHistory(map[string]any{"status": raw}, path)
			if err != nil {
				return nil, nil, nil, err
			}
			status := &v1alpha1.MetricAutoscalerStatus{}
			if err := decodeValue(path, raw, reflect.ValueOf(status).Elem()); err != nil {
				return nil, nil, nil, err
			}
			status.History = h
			statuses[i] = status
			delete(m, "status")
		}
		if m["autoscaler"] == nil {
			continue
		}
		path := fmt.Sprintf("steps[%d].autoscaler", i)
		var e maEdit
		if err := decodeValue(path, m["autoscaler"], reflect.ValueOf(&e).Elem()); err != nil {
			return nil, nil, nil, err
		}
		if e.Kind != "" && e.Kind != kindMetricAutoscaler {
			return nil, nil, nil, fieldErr(path+".kind", "must be %s, as the scenario's autoscaler, got %q", kindMetricAutoscaler, e.Kind)
		}
		if e.Spec.Paused {
			return nil, nil, nil, fieldErr(path+".spec.paused", "a paused MetricAutoscaler makes no decisions to replay")
		}
		if err := validateMetricAutoscaler(&e.Spec, field.NewPath("steps").Index(i).Child("autoscaler", "spec")); err != nil {
			return nil, nil, nil, err
		}
		edits[i] = &e.Spec
		delete(m, "autoscaler")
	}
	return ma, edits, statuses, nil
}

// preciseHistory is status.history with its times read to the
// nanosecond: a recording of a live controller gives them so, since its
// memory is exact (an API server keeps microseconds).
type preciseHistory struct {
	Recommendations []struct {
		Replicas int32     `json:"replicas"`
		Time     time.Time `json:"time"`
	} `json:"recommendations"`
	ScaleUpEvents   []preciseEvent `json:"scaleUpEvents"`
	ScaleDownEvents []preciseEvent `json:"scaleDownEvents"`
}

type preciseEvent struct {
	Change   int32     `json:"change"`
	Time     time.Time `json:"time"`
	Outdated bool      `json:"outdated"`
}

// takeHistory decodes and removes the history of the status in obj (a
// generic object with a "status" key), keeping its times' nanoseconds in
// the Time of each entry (the status types' MicroTime would drop them).
func takeHistory(obj map[string]any, path string) (*v1alpha1.History, error) {
	status, ok := obj["status"].(map[string]any)
	if !ok || status["history"] == nil {
		return nil, nil
	}
	var ph preciseHistory
	if err := decodeValue(path+".history", status["history"], reflect.ValueOf(&ph).Elem()); err != nil {
		return nil, err
	}
	delete(status, "history")
	out := &v1alpha1.History{}
	for _, r := range ph.Recommendations {
		out.Recommendations = append(out.Recommendations, v1alpha1.Recommendation{Replicas: r.Replicas, Time: metav1.MicroTime{Time: r.Time}})
	}
	events := func(in []preciseEvent) []v1alpha1.ScaleEvent {
		var out []v1alpha1.ScaleEvent
		for _, e := range in {
			out = append(out, v1alpha1.ScaleEvent{Change: e.Change, Time: metav1.MicroTime{Time: e.Time}, Outdated: e.Outdated})
		}
		return out
	}
	out.ScaleUpEvents, out.ScaleDownEvents = events(ph.ScaleUpEvents), events(ph.ScaleDownEvents)
	return out, nil
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
