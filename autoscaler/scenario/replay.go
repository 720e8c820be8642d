package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/behavior"
	"github.com/metricscale/metricscale/autoscaler/decision"
	"github.com/metricscale/metricscale/autoscaler/defaults"
	"github.com/metricscale/metricscale/autoscaler/formula"
	hist "github.com/metricscale/metricscale/autoscaler/history"
	"github.com/metricscale/metricscale/autoscaler/schedule"
)

// StepResult is what the controller did at one step: the replay's output
// line, in the JSON form of docs/scenarios.md.
type StepResult struct {
	At       string                                      `json:"at"`
	Replicas int32                                       `json:"replicas"`
	Rescaled bool                                        `json:"rescaled"`
	Error    string                                      `json:"error"`
	Status   autoscalingv2.HorizontalPodAutoscalerStatus `json:"status"`
	// Fallback is a MetricAutoscaler's status.fallback after the step.
	Fallback *v1alpha1.FallbackStatus `json:"fallback,omitempty"`
	// ScaleToZero is a MetricAutoscaler's status.scaleToZero after the step.
	ScaleToZero *v1alpha1.ScaleToZeroStatus `json:"scaleToZero,omitempty"`

	// What the table and the plot show besides.
	Time            time.Time                  `json:"-"`
	CurrentReplicas int32                      `json:"-"`
	Reason          string                     `json:"-"`
	Spec            []autoscalingv2.MetricSpec `json:"-"`
	Metrics         []decision.MetricResult    `json:"-"`
	// Formula is the MetricAutoscaler's spec.formula: Metrics' last entry.
	Formula *v1alpha1.Formula `json:"-"`
	// Behavior is the defaulted spec.behavior and Explain how the step
	// decided, for `simulate --explain`.
	Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"-"`
	Explain  decision.Explanation                           `json:"-"`
	// Explanation is set by `simulate --explain` only.
	Explanation *Explained `json:"explanation,omitempty"`
}

var errScaleUpdate = errors.New("the server is currently unable to handle the request (put scale)")

// Replay runs every step through the decision core, as one controller that
// keeps its memory between reconciles, and returns one result per step.
func Replay(ctx context.Context, s *Scenario) ([]StepResult, error) {
	settings := s.Settings()
	hpa := s.Autoscaler.DeepCopy()
	var ma *v1alpha1.MetricAutoscaler
	if s.MetricAutoscaler != nil {
		ma = s.MetricAutoscaler.DeepCopy()
	}
	var (
		history  behavior.History
		fallback *v1alpha1.FallbackStatus
		zero     *v1alpha1.ScaleToZeroStatus
		scale    decision.Scale
		pods     []corev1.Pod
		w        world
		rescaled bool
		out      = make([]StepResult, 0, len(s.Steps))
	)
	w.namespace = hpa.Namespace
	w.upstream = s.UpstreamArithmetic
	if settings.Gates.Generation && hpa.Generation == 0 {
		// With HPAGeneration (v1.37) the API server creates the object at
		// generation 1 and bumps it at each change of its spec.
		hpa.Generation = 1
	}
	if ma != nil {
		// A MetricAutoscaler's status carries the history it decided on.
		history = hist.FromStatus(ma.Status.History)
		fallback = ma.Status.Fallback
		zero = ma.Status.ScaleToZero
	}
	for i := range s.Steps {
		st := &s.Steps[i]
		now := s.Start.Add(time.Duration(st.At))
		if st.Autoscaler != nil {
			if settings.Gates.Generation && !apiequality.Semantic.DeepEqual(hpa.Spec, st.Autoscaler.Spec) {
				hpa.Generation++
			}
			hpa.Spec = *st.Autoscaler.Spec.DeepCopy()
			if ma != nil && st.Autoscaler.MetricAutoscalerSpec != nil {
				ma.Spec = *st.Autoscaler.MetricAutoscalerSpec.DeepCopy()
			}
		}
		if ma != nil && st.Status != nil {
			// What the recorded reconcile read replaces what the replay
			// carried over.
			ma.Status = *st.Status.DeepCopy()
			hpa.Status = ma.HPA().Status
			fallback, zero = ma.Status.Fallback, ma.Status.ScaleToZero
			if ma.Status.History != nil {
				history = hist.FromStatus(ma.Status.History)
			}
		}
		switch {
		case st.Scale != nil:
			scale = decision.Scale{Replicas: *st.Scale.Replicas, StatusReplicas: *st.Scale.Replicas, Selector: st.Scale.Selector}
			if st.Scale.StatusReplicas != nil {
				scale.StatusReplicas = *st.Scale.StatusReplicas
			}
		case rescaled:
			scale.StatusReplicas = scale.Replicas
		}
		if st.Pods != nil {
			pods = *st.Pods
			w.pods = w.pods[:0]
			for j := range pods {
				if pods[j].Namespace == "" || pods[j].Namespace == hpa.Namespace {
					w.pods = append(w.pods, &pods[j])
				}
			}
		}
		if st.PodMetrics != nil {
			w.podM = *st.PodMetrics
		}
		if st.CustomMetrics != nil {
			w.custom = *st.CustomMetrics
		}
		if st.ExternalMetrics != nil {
			w.external = *st.ExternalMetrics
		}
		if st.Failures != nil {
			w.failures = *st.Failures
		}
		w.now = now

		in := decision.Input{
			Autoscaler: hpa,
			Scale:      scale,
			Pods:       &w,
			Metrics:    &w,
			History:    history,
			Settings:   settings,
			Now:        now,
		}
		if ma != nil {
			in.Fallback, in.FallbackState = ma.Spec.Fallback, fallback
			in.ScaleToZero, in.ScaleToZeroState = ma.Spec.ScaleToZero, zero
			// Validation refused what does not compile.
			in.Schedules, _ = schedule.Compile(ma.Spec.Schedules, field.NewPath("spec"))
			if f := ma.Spec.Formula; f != nil {
				var errs field.ErrorList
				in.Formula = f
				in.FormulaProgram, errs = formula.Compile(f, ma.Spec.Metrics, field.NewPath("spec"))
				in.FormulaErr = errs.ToAggregate()
			}
		}
		plan := decision.Decide(ctx, in)
		var writeErr error
		if plan.Rescale && w.scaleFails() {
			writeErr = errScaleUpdate
		}
		var res decision.Result
		if plan.Rescale && ma != nil && ma.Spec.DryRun {
			res = plan.FinishDryRun()
		} else {
			res = plan.Finish(writeErr)
		}
		history = res.History
		status, err := storedStatus(res.Status)
		if err != nil {
			return nil, fmt.Errorf("steps[%d]: %w", i, err)
		}
		if fallback, err = stored(res.Fallback); err != nil {
			return nil, fmt.Errorf("steps[%d]: %w", i, err)
		}
		if zero, err = stored(res.ScaleToZero); err != nil {
			return nil, fmt.Errorf("steps[%d]: %w", i, err)
		}
		hpa.Status = status
		rescaled = res.Rescaled
		current := scale.Replicas
		scale.Replicas = res.Replicas

		r := StepResult{
			At:              time.Duration(st.At).String(),
			Replicas:        res.Replicas,
			Rescaled:        res.Rescaled,
			Status:          status,
			Fallback:        fallback,
			ScaleToZero:     zero,
			Time:            now,
			CurrentReplicas: current,
			Reason:          res.Reason,
			Spec:            hpa.Spec.Metrics,
			Metrics:         res.Metrics,
			Formula:         in.Formula,
			Behavior:        defaultedBehavior(&hpa.Spec),
			Explain:         res.Explain,
		}
		if res.Err != nil {
			r.Error = res.Err.Error()
		}
		out = append(out, r)
	}
	return out, nil
}

// defaultedBehavior is spec.behavior as the decision core sees it.
func defaultedBehavior(spec *autoscalingv2.HorizontalPodAutoscalerSpec) *autoscalingv2.HorizontalPodAutoscalerBehavior {
	if spec.Behavior == nil {
		return nil
	}
	c := spec.DeepCopy()
	defaults.Spec(c)
	return c.Behavior
}

func (w *world) scaleFails() bool {
	for _, f := range w.failures {
		if f.API == APIScale {
			return true
		}
	}
	return false
}

// storedStatus is the status as the API server keeps it: times in whole
// seconds, as the next reconcile reads them back.
func storedStatus(s autoscalingv2.HorizontalPodAutoscalerStatus) (autoscalingv2.HorizontalPodAutoscalerStatus, error) {
	var out autoscalingv2.HorizontalPodAutoscalerStatus
	data, err := json.Marshal(s)
	if err != nil {
		return out, err
	}
	err = json.Unmarshal(data, &out)
	return out, err
}

// stored is a part of a MetricAutoscaler's status (status.fallback,
// status.scaleToZero) as the API server keeps it: times in whole seconds.
func stored[T any](s *T) (*T, error) {
	if s == nil {
		return nil, nil
	}
	data, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	out := new(T)
	return out, json.Unmarshal(data, out)
}
