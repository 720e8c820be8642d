// Package decision is the autoscaler's decision core: one reconcile of a
// HorizontalPodAutoscaler-shaped spec as a pure function of the spec and
// status, the target's scale, the pods, the metrics, the history and the
// time, with the decisions of kube-controller-manager v1.37 (or v1.36's:
// KubeVersion.DefaultGates).
//
// A reconcile has two halves around the one write it may need: Decide says
// whether and where to rescale, and Plan.Finish takes the outcome of that
// write and returns the status, history and events to keep.
package decision

import (
	"context"
	"errors"
	"fmt"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/arith"
	"github.com/metricscale/metricscale/autoscaler/behavior"
	"github.com/metricscale/metricscale/autoscaler/defaults"
	"github.com/metricscale/metricscale/autoscaler/formula"
	"github.com/metricscale/metricscale/autoscaler/metricsource"
	"github.com/metricscale/metricscale/autoscaler/replicas"
	"github.com/metricscale/metricscale/autoscaler/schedule"
)

// Gates are the kube-controller-manager feature gates the algorithm reads.
type Gates struct {
	// HPAConfigurableTolerance: behavior.scaleUp/scaleDown.tolerance apply.
	ConfigurableTolerance bool
	// HPAScaleToZero: minReplicas 0 with Object/External metrics.
	ScaleToZero bool
	// PodLevelResources: pod-level requests count for utilization.
	PodLevelResources bool
	// HPAGeneration (v1.37): the status written carries
	// observedGeneration, the autoscaler's metadata.generation.
	Generation bool
}

// Settings are the controller-wide knobs, as kube-controller-manager's flags.
type Settings struct {
	Tolerance                    float64
	CPUInitializationPeriod      time.Duration
	InitialReadinessDelay        time.Duration
	DownscaleStabilizationWindow time.Duration
	Gates                        Gates
	// UpstreamArithmetic replays kube-controller-manager's int32/int64
	// wrapping and its reading of a negative External sum as an overflow,
	// and its int64(NaN) average at status.replicas 0, and reads a
	// resizing pod's requests from spec, for investigations. Off, counts
	// saturate, negatives stay negative and requests are the status' ones
	// (docs/scenarios.md, Deviations from upstream).
	UpstreamArithmetic bool
}

// DefaultSettings are kube-controller-manager's defaults, with the gates
// of DefaultKubeVersion.
func DefaultSettings() Settings {
	return Settings{
		Tolerance:                    0.1,
		CPUInitializationPeriod:      5 * time.Minute,
		InitialReadinessDelay:        30 * time.Second,
		DownscaleStabilizationWindow: 5 * time.Minute,
		Gates:                        DefaultKubeVersion.DefaultGates(),
	}
}

// Scale is the target's /scale subresource as read.
type Scale struct {
	Replicas       int32
	StatusReplicas int32
	Selector       string
}

// PodLister lists the pods of the autoscaler's namespace that a selector
// selects, from a cache: the core never lists from the API.
type PodLister interface {
	List(selector labels.Selector) ([]*corev1.Pod, error)
}

// Input is everything one reconcile looks at.
type Input struct {
	// Autoscaler is the object as stored: spec and the status last written.
	Autoscaler *autoscalingv2.HorizontalPodAutoscaler
	// Scale is the target's scale; ScaleErr is set when it could not be read.
	Scale    Scale
	ScaleErr error
	Pods     PodLister
	Metrics  metricsource.Source
	History  behavior.History
	Settings Settings
	Now      time.Time
	// Fallback is a MetricAutoscaler's spec.fallback and FallbackState its
	// status.fallback as last stored; nil Fallback decides as upstream.
	Fallback      *v1alpha1.Fallback
	FallbackState *v1alpha1.FallbackStatus
	// ScaleToZero is a MetricAutoscaler's spec.scaleToZero and
	// ScaleToZeroState its status.scaleToZero; nil ScaleToZero decides as
	// upstream.
	ScaleToZero      *v1alpha1.ScaleToZero
	ScaleToZeroState *v1alpha1.ScaleToZeroStatus
	// Schedules are a MetricAutoscaler's spec.schedules, compiled
	// (schedule.Compile), and ScheduleErr what did not compile; none
	// decides as upstream.
	Schedules   schedule.Set
	ScheduleErr error
	// Formula is a MetricAutoscaler's spec.formula, FormulaProgram its
	// compiled form (formula.Compile) and FormulaErr why it did not
	// compile (a failed metric); nil Formula decides as upstream.
	Formula        *v1alpha1.Formula
	FormulaProgram *formula.Program
	FormulaErr     error
}

// Event is what the controller reports on the object.
type Event struct {
	Type    string
	Reason  string
	Message string
}

// MetricResult is one metric's outcome: its proposal, or why it has none.
type MetricResult struct {
	Proposal int32
	Err      error
	// Why is how the calculation made the proposal (for explanations).
	Why replicas.Trace
	// Input is the name spec.formula gives the metric, which then proposes
	// nothing (Proposal -1) and whose value as read is Value.
	Input string
	// Value is an input's value, or the formula's result.
	Value float64
}

// Plan is the first half of a reconcile: whether to rescale, and to what.
type Plan struct {
	// Rescale asks the caller to write DesiredReplicas to the target's scale
	// and to pass the write's error to Finish.
	Rescale         bool
	CurrentReplicas int32
	DesiredReplicas int32
	Reason          string
	// Metrics has one entry per spec metric when metrics were computed,
	// and one more, last, for spec.formula.
	Metrics []MetricResult
	// Explain is how the decision was reached.
	Explain Explanation

	hpa *autoscalingv2.HorizontalPodAutoscaler
	// statusSet: setStatus ran (status.currentMetrics is this reconcile's).
	statusSet bool
	history   behavior.History
	clock     behavior.Clock
	events    []Event
	statuses  []autoscalingv2.MetricStatus
	minimum   int32
	// specMinimum is spec.minReplicas, before the schedules' floor
	// (floor, when one raises minimum).
	specMinimum int32
	floor       schedule.Floor
	err         error
	done        bool
	gates       Gates
	hasObjExt   bool
	upstream    bool
	fallback    *v1alpha1.FallbackStatus

	scaleToZero *v1alpha1.ScaleToZeroStatus
	activation  *activation
	raw         *rawValues
	// formulaValue is spec.formula's result in this reconcile.
	formulaValue float64
}

// Result is a finished reconcile.
type Result struct {
	// Replicas is the target's spec.replicas afterwards; Rescaled says the
	// write happened.
	Replicas int32
	Rescaled bool
	Reason   string
	// Err is the reconcile's error, if any; a reconcile can rescale and
	// still report an error (a failing metric beside one that scaled up).
	Err error
	// Status is the status to store.
	Status autoscalingv2.HorizontalPodAutoscalerStatus
	// CurrentMetricsCarried says Status.CurrentMetrics is the input's, as
	// read (the reconcile ended before the metrics were computed).
	CurrentMetricsCarried bool
	History               behavior.History
	Events                []Event
	Metrics               []MetricResult
	Explain               Explanation
	// Fallback is the status.fallback to store (nil without spec.fallback).
	Fallback *v1alpha1.FallbackStatus
	// ScaleToZero is the status.scaleToZero to store (nil without
	// spec.scaleToZero).
	ScaleToZero *v1alpha1.ScaleToZeroStatus
}

// ticking returns a clock that starts at now and moves forward by a
// nanosecond at each reading, as a real clock moves during a reconcile.
func ticking(now time.Time) behavior.Clock {
	var n time.Duration
	return func() time.Time {
		n++
		return now.Add(n)
	}
}

// Decide runs a reconcile up to the scale write.
func Decide(ctx context.Context, in Input) *Plan {
	hpa := in.Autoscaler.DeepCopy()
	defaults.Spec(&hpa.Spec)
	p := &Plan{
		hpa:      hpa,
		history:  in.History.DeepCopy(),
		clock:    ticking(in.Now),
		gates:    in.Settings.Gates,
		upstream: in.Settings.UpstreamArithmetic,
		// Until a rescale, the target keeps the size it has.
		CurrentReplicas: in.Scale.Replicas,
		fallback:        carryFallback(in),
		scaleToZero:     carryScaleToZero(in),
		Explain:         Explanation{Current: in.Scale.Replicas, Winner: -1, Desired: in.Scale.Replicas},
	}
	ref := hpa.Spec.ScaleTargetRef
	reference := fmt.Sprintf("%s/%s/%s", ref.Kind, hpa.Namespace, ref.Name)

	if _, err := schema.ParseGroupVersion(ref.APIVersion); err != nil {
		p.Explain.Skipped = SkipScaleUnreadable
		p.failGetScale(err)
		p.err = fmt.Errorf("invalid API version in scale target reference: %w", err)
		return p
	}
	if in.ScaleErr != nil {
		p.Explain.Skipped = SkipScaleUnreadable
		p.failGetScale(in.ScaleErr)
		p.err = fmt.Errorf("failed to query scale subresource for %s: %w", reference, in.ScaleErr)
		return p
	}
	p.setCondition(autoscalingv2.AbleToScale, corev1.ConditionTrue, "SucceededGetScale", "the HPA controller was able to get the target's current scale")
	current := in.Scale.Replicas
	p.history.RecordInitial(current, p.clock)

	p.minimum = 1
	if hpa.Spec.MinReplicas != nil {
		p.minimum = *hpa.Spec.MinReplicas
	}
	p.specMinimum = p.minimum
	p.applySchedules(in)
	p.hasObjExt = hasObjectOrExternalMetrics(hpa)
	scaledToZero := p.gates.ScaleToZero && conditionTrue(hpa, autoscalingv2.ScaledToZero)
	canScaleFromZero := scaledToZero && p.hasObjExt

	desired := int32(0)
	rescale := true
	compute := true
	switch {
	case current == 0:
		if (p.minimum != 0 && scaledToZero) || canScaleFromZero || p.scaleToZeroOn(in) {
			break
		}
		// A target scaled to zero by someone else is left alone (with
		// spec.scaleToZero, zero is a state the autoscaler manages).
		compute, rescale = false, false
		p.Explain.Skipped = SkipAtZero
		p.setCondition(autoscalingv2.ScalingActive, corev1.ConditionFalse, "ScalingDisabled", "scaling is disabled since the replica count of the target is zero")
		if !p.gates.ScaleToZero {
			p.removeCondition(autoscalingv2.ScaledToZero)
		}
	case current > hpa.Spec.MaxReplicas:
		p.Reason = "Current number of replicas above Spec.MaxReplicas"
		desired, compute = hpa.Spec.MaxReplicas, false
		p.Explain.Skipped = SkipAboveMax
	case current < p.minimum:
		p.Reason = "Current number of replicas below Spec.MinReplicas"
		desired, compute = p.minimum, false
		p.Explain.Skipped = SkipBelowMin
		if p.floor.Raised() && current < p.minimum {
			p.scheduleBinds()
		}
	}

	if compute {
		in.Metrics = p.watchValues(in)
		proposal, metricName, err := p.computeMetrics(ctx, in)
		fbProposal, fbName, inFallback := p.applyFallback(in, current)
		if inFallback {
			proposal, metricName = fbProposal, fbName
		}
		p.observeActivation(in, current, inFallback)
		p.Explain.Proposal, p.Explain.Fallback = max(proposal, 0), inFallback
		if err != nil && proposal == -1 {
			p.Explain.Blocked = p.Metrics != nil
			p.setStatus(current, hpa.Status.DesiredReplicas, false)
			p.event(corev1.EventTypeWarning, "FailedComputeMetricsReplicas", err.Error())
			p.err = fmt.Errorf("failed to compute desired number of replicas based on listed metrics for %s: %w", reference, err)
			p.done = true
			return p
		}
		// Some metrics failed but the others may still scale up.
		p.err = err

		rescaleMetric := ""
		if proposal > desired {
			desired, rescaleMetric = proposal, metricName
		}
		if desired > current {
			p.Reason = fmt.Sprintf("%s above target", rescaleMetric)
		}
		if desired < current {
			p.Reason = "All metrics below target"
		}
		if inFallback && desired != current {
			p.Reason = fallbackReason(metricName)
		}
		if d := p.activationProposal(current, desired); d != desired {
			desired, p.Explain.Activation = d, true
		}
		p.Explain.Behavior = hpa.Spec.Behavior != nil
		if hpa.Spec.Behavior == nil {
			desired = p.normalize(current, desired, in.Settings.DownscaleStabilizationWindow)
		} else {
			desired = p.normalizeWithBehavior(current, desired, in.Settings.DownscaleStabilizationWindow)
		}
		if d := p.activationSize(current, desired); d != desired {
			desired, p.Explain.Activation = d, true
		}
		// A schedule's floor holds whatever activation and the cooldown say.
		if p.floor.Raised() && desired < p.minimum {
			desired = p.minimum
			p.scheduleBinds()
		}
		// Coming back from zero honours a minReplicas raised meanwhile.
		if current == 0 && p.minimum != 0 && scaledToZero && desired < p.minimum {
			desired = p.minimum
			p.Explain.MinRaised = true
			if p.Reason == "" {
				p.Reason = "Current number of replicas below Spec.MinReplicas"
			}
		}
		rescale = desired != current
	}
	p.Rescale = rescale
	p.DesiredReplicas = desired
	if !rescale {
		p.DesiredReplicas = current
	}
	p.Explain.Desired = p.DesiredReplicas
	return p
}

// Finish completes the reconcile with the outcome of the scale write
// (nil when none was asked for or it succeeded).
func (p *Plan) Finish(writeErr error) Result {
	res := Result{Replicas: p.CurrentReplicas, Reason: p.Reason, Err: p.err, Metrics: p.Metrics, Explain: p.Explain}
	if !p.done {
		switch {
		case !p.Rescale:
			p.setStatus(p.CurrentReplicas, p.CurrentReplicas, false)
		case writeErr != nil:
			p.event(corev1.EventTypeWarning, "FailedRescale", fmt.Sprintf("New size: %d; reason: %s; error: %v", p.DesiredReplicas, p.Reason, writeErr))
			p.setCondition(autoscalingv2.AbleToScale, corev1.ConditionFalse, "FailedUpdateScale", fmt.Sprintf("the HPA controller was unable to update the target scale: %v", writeErr))
			p.setStatus(p.CurrentReplicas, p.hpa.Status.DesiredReplicas, false)
			res.Err = fmt.Errorf("failed to rescale %s/%s/%s: %w", p.hpa.Spec.ScaleTargetRef.Kind, p.hpa.Namespace, p.hpa.Spec.ScaleTargetRef.Name, writeErr)
		default:
			p.setCondition(autoscalingv2.AbleToScale, corev1.ConditionTrue, "SucceededRescale", fmt.Sprintf("the HPA controller was able to update the target scale to %d", p.DesiredReplicas))
			p.event(corev1.EventTypeNormal, "SuccessfulRescale", fmt.Sprintf("New size: %d; reason: %s", p.DesiredReplicas, p.Reason))
			p.history.RecordScale(p.hpa.Spec.Behavior, p.CurrentReplicas, p.DesiredReplicas, p.clock)
			if p.gates.ScaleToZero {
				if p.CurrentReplicas > 0 && p.DesiredReplicas == 0 && p.minimum == 0 && p.hasObjExt {
					p.setCondition(autoscalingv2.ScaledToZero, corev1.ConditionTrue, "ScaledToZero", "the HPA controller scaled the workload to zero")
				} else {
					p.setCondition(autoscalingv2.ScaledToZero, corev1.ConditionFalse, "NotScaledToZero", "the HPA controller did not scale the workload to zero")
				}
			} else {
				p.removeCondition(autoscalingv2.ScaledToZero)
			}
			p.setStatus(p.CurrentReplicas, p.DesiredReplicas, true)
			res.Replicas, res.Rescaled = p.DesiredReplicas, true
		}
		p.done = true
	}
	return p.complete(res)
}

// FinishDryRun completes a reconcile whose rescale is reported but not
// written: the status shows the count it would scale to, lastScaleTime and
// the scale-event history stay as they were.
func (p *Plan) FinishDryRun() Result {
	if p.done || !p.Rescale {
		return p.Finish(nil)
	}
	msg := fmt.Sprintf("dry run: the target would be scaled from %d to %d", p.CurrentReplicas, p.DesiredReplicas)
	p.setCondition(autoscalingv2.AbleToScale, corev1.ConditionTrue, "DryRun", msg)
	p.event(corev1.EventTypeNormal, "DryRunRescale", fmt.Sprintf("New size: %d (dry run, not written); reason: %s", p.DesiredReplicas, p.Reason))
	p.setStatus(p.CurrentReplicas, p.DesiredReplicas, false)
	p.done = true
	return p.complete(Result{Replicas: p.CurrentReplicas, Reason: p.Reason, Err: p.err, Metrics: p.Metrics, Explain: p.Explain})
}

func (p *Plan) complete(res Result) Result {
	res.Status = p.hpa.Status
	res.CurrentMetricsCarried = !p.statusSet
	res.History = p.history
	res.Events = p.events
	res.Fallback = p.fallback
	res.ScaleToZero = p.scaleToZero
	return res
}

func (p *Plan) failGetScale(err error) {
	p.event(corev1.EventTypeWarning, "FailedGetScale", err.Error())
	p.setCondition(autoscalingv2.AbleToScale, corev1.ConditionFalse, "FailedGetScale", fmt.Sprintf("the HPA controller was unable to get the target's current scale: %v", err))
	p.done = true
}

// computeMetrics proposes a count per metric and returns the largest. It
// returns -1 and an error when no proposal may be acted on: every metric
// failed, or one failed and the others would scale down.
func (p *Plan) computeMetrics(ctx context.Context, in Input) (int32, string, error) {
	hpa := p.hpa
	selector, err := p.parseSelector(in.Scale.Selector)
	if err != nil {
		p.Explain.Skipped = SkipNoSelector
		return -1, "", err
	}
	calc := &replicas.Calculator{
		Source:                  in.Metrics,
		Namespace:               hpa.Namespace,
		Selector:                selector,
		ListPods:                func() ([]*corev1.Pod, error) { return in.Pods.List(selector) },
		Now:                     in.Now,
		CPUInitializationPeriod: in.Settings.CPUInitializationPeriod,
		InitialReadinessDelay:   in.Settings.InitialReadinessDelay,
		PodLevelResources:       in.Settings.Gates.PodLevelResources,
		UpstreamArithmetic:      in.Settings.UpstreamArithmetic,
	}
	tol := p.tolerances(in.Settings.Tolerance)
	specs := hpa.Spec.Metrics
	inputs := p.formulaInputs(in)
	results := len(specs)
	if in.Formula != nil {
		results++
	}
	p.statuses = make([]autoscalingv2.MetricStatus, results)
	p.Metrics = make([]MetricResult, results)

	var (
		best        int32
		bestName    string
		bestIndex   = -1
		invalid     int
		firstErr    error
		firstReason string
		firstMsg    string
		values      = map[string]float64{}
		inputErr    error
	)
	fail := func(i int, reason string, err error) {
		p.Metrics[i] = MetricResult{Proposal: -1, Err: err, Input: p.Metrics[i].Input}
		if invalid == 0 {
			firstErr, firstReason = err, reason
			firstMsg = fmt.Sprintf("the HPA was unable to compute the replica count: %v", err)
		}
		invalid++
	}
	for i := range specs {
		if name, ok := inputs[i]; ok {
			// An input proposes nothing: its value goes to the formula.
			p.Metrics[i] = MetricResult{Proposal: -1, Input: name}
			v, reason, err := p.readInput(ctx, in, hpa.Namespace, &specs[i], &p.statuses[i])
			if err != nil {
				p.Metrics[i].Err = err
				p.event(corev1.EventTypeWarning, reason, err.Error())
				if inputErr == nil {
					inputErr = fmt.Errorf("input %s (spec.metrics[%d]): %w", name, i, err)
				}
				continue
			}
			p.Metrics[i].Value, values[name] = v, v
			continue
		}
		proposal, name, reason, err := p.computeMetric(ctx, calc, &specs[i], in.Scale, tol, &p.statuses[i])
		if err != nil {
			p.event(corev1.EventTypeWarning, reason, err.Error())
			fail(i, reason, err)
			continue
		}
		p.Metrics[i] = MetricResult{Proposal: proposal, Why: calc.Trace()}
		if best == 0 || proposal > best {
			best, bestName, bestIndex = proposal, name, i
		}
	}
	if in.Formula != nil {
		i := len(specs)
		proposal, name, reason, err := p.computeFormula(ctx, calc, in, values, inputErr, in.Scale, tol, &p.statuses[i])
		switch {
		case err != nil:
			if inputErr == nil {
				// An input's failure has its own event already.
				p.event(corev1.EventTypeWarning, reason, err.Error())
			}
			fail(i, reason, err)
		default:
			p.Metrics[i] = MetricResult{Proposal: proposal, Why: calc.Trace(), Value: p.formulaValue}
			if best == 0 || proposal > best {
				best, bestName, bestIndex = proposal, name, i
			}
		}
	}
	// The proposers: the metrics the formula does not take, and the formula.
	proposers := results - len(inputs)
	if firstErr != nil {
		firstErr = fmt.Errorf("invalid metrics (%v invalid out of %v), first error is: %w", invalid, proposers, firstErr)
	}
	if invalid >= proposers || (invalid > 0 && best < in.Scale.Replicas) {
		p.setCondition(autoscalingv2.ScalingActive, corev1.ConditionFalse, firstReason, firstMsg)
		return -1, "", firstErr
	}
	p.setCondition(autoscalingv2.ScalingActive, corev1.ConditionTrue, "ValidMetricFound", "the HPA was able to successfully calculate a replica count from "+bestName)
	p.Explain.Winner = bestIndex
	return best, bestName, firstErr
}

func (p *Plan) parseSelector(s string) (labels.Selector, error) {
	if s == "" {
		p.event(corev1.EventTypeWarning, "SelectorRequired", "selector is required")
		p.setCondition(autoscalingv2.ScalingActive, corev1.ConditionFalse, "InvalidSelector", "the HPA target's scale is missing a selector")
		return nil, errors.New("selector is required")
	}
	sel, err := labels.Parse(s)
	if err != nil {
		msg := fmt.Sprintf("couldn't convert selector into a corresponding internal selector object: %v", err)
		p.event(corev1.EventTypeWarning, "InvalidSelector", msg)
		p.setCondition(autoscalingv2.ScalingActive, corev1.ConditionFalse, "InvalidSelector", msg)
		return nil, errors.New(msg)
	}
	return sel, nil
}

// tolerances are the controller's, or the behavior's per direction when
// the HPAConfigurableTolerance gate allows.
func (p *Plan) tolerances(global float64) replicas.Tolerances {
	t := replicas.Tolerances{ScaleDown: global, ScaleUp: global}
	b := p.hpa.Spec.Behavior
	if b == nil || !p.gates.ConfigurableTolerance {
		return t
	}
	if b.ScaleDown != nil && b.ScaleDown.Tolerance != nil {
		t.ScaleDown = b.ScaleDown.Tolerance.AsApproximateFloat64()
	}
	if b.ScaleUp != nil && b.ScaleUp.Tolerance != nil {
		t.ScaleUp = b.ScaleUp.Tolerance.AsApproximateFloat64()
	}
	return t
}

// computeMetric proposes a count for one metric and fills its status. On
// failure it returns the reason of the ScalingActive condition to report.
func (p *Plan) computeMetric(ctx context.Context, calc *replicas.Calculator, spec *autoscalingv2.MetricSpec, scale Scale, tol replicas.Tolerances, status *autoscalingv2.MetricStatus) (int32, string, string, error) {
	switch spec.Type {
	case autoscalingv2.ObjectMetricSourceType:
		const reason = "FailedGetObjectMetric"
		src := spec.Object
		if src == nil {
			return 0, "", reason, errors.New("failed to get object metric value: object metric source is not set")
		}
		metricSelector, err := metav1.LabelSelectorAsSelector(src.Metric.Selector)
		if err != nil {
			return 0, "", reason, fmt.Errorf("failed to get object metric value: %w", err)
		}
		st := autoscalingv2.MetricStatus{Type: spec.Type, Object: &autoscalingv2.ObjectMetricStatus{
			DescribedObject: src.DescribedObject,
			Metric:          autoscalingv2.MetricIdentifier{Name: src.Metric.Name, Selector: src.Metric.Selector},
		}}
		switch {
		case src.Target.Type == autoscalingv2.ValueMetricType && src.Target.Value != nil:
			proposal, usage, err := calc.ObjectValue(ctx, scale.Replicas, arith.MilliValue(*src.Target.Value, p.upstream), src.Metric.Name, tol, &src.DescribedObject, metricSelector)
			if err != nil {
				return 0, "", reason, fmt.Errorf("failed to get object metric value: %w", err)
			}
			st.Object.Current.Value = resource.NewMilliQuantity(usage, resource.DecimalSI)
			*status = st
			return proposal, fmt.Sprintf("%s metric %s", src.DescribedObject.Kind, src.Metric.Name), "", nil
		case src.Target.Type == autoscalingv2.AverageValueMetricType && src.Target.AverageValue != nil:
			proposal, usage, err := calc.ObjectAverageValue(ctx, scale.StatusReplicas, arith.MilliValue(*src.Target.AverageValue, p.upstream), src.Metric.Name, tol, &src.DescribedObject, metricSelector)
			if err != nil {
				return 0, "", reason, fmt.Errorf("failed to get object metric value: failed to get %s object metric: %w", src.Metric.Name, err)
			}
			if p.averageDefined(scale) {
				st.Object.Current.AverageValue = resource.NewMilliQuantity(usage, resource.DecimalSI)
			}
			*status = st
			return proposal, fmt.Sprintf("%s metric %s", src.DescribedObject.Kind, src.Metric.Name), "", nil
		}
		return 0, "", reason, errors.New("failed to get object metric value: invalid object metric source: neither a value target nor an average value target was set")

	case autoscalingv2.PodsMetricSourceType:
		const reason = "FailedGetPodsMetric"
		src := spec.Pods
		if src == nil || src.Target.AverageValue == nil {
			return 0, "", reason, errors.New("failed to get pods metric value: invalid pods metric source: no average value target was set")
		}
		metricSelector, err := metav1.LabelSelectorAsSelector(src.Metric.Selector)
		if err != nil {
			return 0, "", reason, fmt.Errorf("failed to get pods metric value: %w", err)
		}
		proposal, usage, err := calc.PodsAverageValue(ctx, scale.Replicas, arith.MilliValue(*src.Target.AverageValue, p.upstream), src.Metric.Name, tol, metricSelector)
		if err != nil {
			return 0, "", reason, fmt.Errorf("failed to get pods metric value: %w", err)
		}
		*status = autoscalingv2.MetricStatus{Type: spec.Type, Pods: &autoscalingv2.PodsMetricStatus{
			Metric:  autoscalingv2.MetricIdentifier{Name: src.Metric.Name, Selector: src.Metric.Selector},
			Current: autoscalingv2.MetricValueStatus{AverageValue: resource.NewMilliQuantity(usage, resource.DecimalSI)},
		}}
		return proposal, "pods metric " + src.Metric.Name, "", nil

	case autoscalingv2.ResourceMetricSourceType:
		const reason = "FailedGetResourceMetric"
		src := spec.Resource
		if src == nil {
			return 0, "", reason, errors.New("failed to get resource metric value: resource metric source is not set")
		}
		proposal, current, name, err := p.resourceMetric(ctx, calc, scale.Replicas, src.Target, src.Name, "", tol)
		if err != nil {
			return 0, "", reason, fmt.Errorf("failed to get %s resource metric value: %w", src.Name, err)
		}
		*status = autoscalingv2.MetricStatus{Type: spec.Type, Resource: &autoscalingv2.ResourceMetricStatus{Name: src.Name, Current: current}}
		return proposal, name, "", nil

	case autoscalingv2.ContainerResourceMetricSourceType:
		const reason = "FailedGetContainerResourceMetric"
		src := spec.ContainerResource
		if src == nil {
			return 0, "", reason, errors.New("failed to get container resource metric value: container resource metric source is not set")
		}
		proposal, current, name, err := p.resourceMetric(ctx, calc, scale.Replicas, src.Target, src.Name, src.Container, tol)
		if err != nil {
			return 0, "", reason, fmt.Errorf("failed to get %s container metric value: %w", src.Container, err)
		}
		*status = autoscalingv2.MetricStatus{Type: spec.Type, ContainerResource: &autoscalingv2.ContainerResourceMetricStatus{Name: src.Name, Container: src.Container, Current: current}}
		return proposal, name, "", nil

	case autoscalingv2.ExternalMetricSourceType:
		const reason = "FailedGetExternalMetric"
		src := spec.External
		if src == nil {
			return 0, "", reason, errors.New("failed to get external metric value: external metric source is not set")
		}
		name := fmt.Sprintf("external metric %s(%+v)", src.Metric.Name, src.Metric.Selector)
		st := autoscalingv2.MetricStatus{Type: spec.Type, External: &autoscalingv2.ExternalMetricStatus{
			Metric: autoscalingv2.MetricIdentifier{Name: src.Metric.Name, Selector: src.Metric.Selector},
		}}
		switch {
		case src.Target.AverageValue != nil:
			proposal, usage, err := calc.ExternalAverageValue(ctx, scale.StatusReplicas, arith.MilliValue(*src.Target.AverageValue, p.upstream), src.Metric.Name, tol, src.Metric.Selector)
			if err != nil {
				return 0, "", reason, fmt.Errorf("failed to get %s external metric value: %w", src.Metric.Name, err)
			}
			if p.averageDefined(scale) {
				st.External.Current.AverageValue = resource.NewMilliQuantity(usage, resource.DecimalSI)
			}
			*status = st
			return proposal, name, "", nil
		case src.Target.Value != nil:
			proposal, usage, err := calc.ExternalValue(ctx, scale.Replicas, arith.MilliValue(*src.Target.Value, p.upstream), src.Metric.Name, tol, src.Metric.Selector)
			if err != nil {
				return 0, "", reason, fmt.Errorf("failed to get %s external metric value: %w", src.Metric.Name, err)
			}
			st.External.Current.Value = resource.NewMilliQuantity(usage, resource.DecimalSI)
			*status = st
			return proposal, name, "", nil
		}
		return 0, "", reason, fmt.Errorf("failed to get %s external metric value: invalid external metric source: neither a value target nor an average value target was set", src.Metric.Name)
	}
	return 0, "", "InvalidMetricSourceType", fmt.Errorf("unknown metric source type %q", string(spec.Type))
}

// averageDefined says whether an Object or External average per pod can be
// reported: with status.replicas 0 upstream writes int64(usage/0), which is
// platform-defined garbage (-9223372036854775808m on amd64).
func (p *Plan) averageDefined(scale Scale) bool {
	return scale.StatusReplicas != 0 || p.upstream
}

// resourceMetric proposes a count for a Resource or ContainerResource
// metric; an AverageValue target wins over a Utilization one.
func (p *Plan) resourceMetric(ctx context.Context, calc *replicas.Calculator, current int32, target autoscalingv2.MetricTarget, name corev1.ResourceName, container string, tol replicas.Tolerances) (int32, autoscalingv2.MetricValueStatus, string, error) {
	if target.AverageValue != nil {
		proposal, raw, err := calc.ResourceAverageValue(ctx, current, arith.MilliValue(*target.AverageValue, p.upstream), name, tol, container)
		if err != nil {
			return 0, autoscalingv2.MetricValueStatus{}, "", fmt.Errorf("failed to get %s usage: %w", name, err)
		}
		q := quantity(name, raw)
		return proposal, autoscalingv2.MetricValueStatus{AverageValue: &q}, fmt.Sprintf("%s resource", name), nil
	}
	if target.AverageUtilization == nil {
		return 0, autoscalingv2.MetricValueStatus{}, "", errors.New("invalid resource metric source: neither an average utilization target nor an average value (usage) target was set")
	}
	proposal, utilization, raw, err := calc.ResourceUtilization(ctx, current, *target.AverageUtilization, name, tol, container)
	if err != nil {
		return 0, autoscalingv2.MetricValueStatus{}, "", fmt.Errorf("failed to get %s utilization: %w", name, err)
	}
	metricName := fmt.Sprintf("%s resource utilization (percentage of request)", name)
	if container != "" {
		metricName = fmt.Sprintf("%s container resource utilization (percentage of request)", name)
	}
	q := quantity(name, raw)
	return proposal, autoscalingv2.MetricValueStatus{AverageUtilization: &utilization, AverageValue: &q}, metricName, nil
}

// quantity formats a raw milli-value as metrics-server does: memory in
// binary units, everything else in decimal ones.
func quantity(name corev1.ResourceName, milli int64) resource.Quantity {
	format := resource.DecimalSI
	if name == corev1.ResourceMemory {
		format = resource.BinarySI
	}
	return *resource.NewMilliQuantity(milli, format)
}

// normalize applies the rules of an autoscaler without behavior.
func (p *Plan) normalize(current, desired int32, window time.Duration) int32 {
	stabilized := p.history.Stabilize(desired, window, p.clock)
	p.setStabilized(stabilized, desired, "ScaleDownStabilized", "recent recommendations were higher than current one, applying the highest recent recommendation")
	lim := behavior.ClampWithoutBehavior(current, stabilized, p.minimum, p.hpa.Spec.MaxReplicas, p.upstream)
	p.setLimited(lim, stabilized)
	p.scheduleLimited(lim, stabilized)
	p.Explain.Stabilized, p.Explain.Limit = stabilized, lim
	p.Explain.Stabilization = behavior.Limit{Replicas: stabilized, Reason: "ScaleDownStabilized", Policy: -1, Window: window}
	return lim.Replicas
}

// normalizeWithBehavior applies the stabilization windows and policies.
func (p *Plan) normalizeWithBehavior(current, desired int32, window time.Duration) int32 {
	rules := behavior.Rules{
		ScaleUp:   p.hpa.Spec.Behavior.ScaleUp,
		ScaleDown: p.hpa.Spec.Behavior.ScaleDown,
		Min:       p.minimum,
		Max:       p.hpa.Spec.MaxReplicas,

		UpstreamArithmetic: p.upstream,
	}
	st := p.history.StabilizeWithBehavior(rules, current, desired, window, p.clock)
	p.setStabilized(st.Replicas, desired, st.Reason, st.Message)
	lim := p.history.LimitByRate(rules, current, st.Replicas, p.clock)
	p.setLimited(lim, st.Replicas)
	p.scheduleLimited(lim, st.Replicas)
	p.Explain.Stabilized, p.Explain.Stabilization, p.Explain.Limit = st.Replicas, st, lim
	return lim.Replicas
}

// setStabilized reports whether stabilization held the proposal back.
func (p *Plan) setStabilized(stabilized, desired int32, reason, message string) {
	if stabilized != desired {
		p.setCondition(autoscalingv2.AbleToScale, corev1.ConditionTrue, reason, message)
		return
	}
	p.setCondition(autoscalingv2.AbleToScale, corev1.ConditionTrue, "ReadyForNewScale", "recommended size matches current size")
}

func (p *Plan) setLimited(lim behavior.Limit, before int32) {
	status := corev1.ConditionFalse
	if lim.Replicas != before {
		status = corev1.ConditionTrue
	}
	p.setCondition(autoscalingv2.ScalingLimited, status, lim.Reason, lim.Message)
}

// setStatus rewrites the status around its conditions and last scale time.
func (p *Plan) setStatus(current, desired int32, rescaled bool) {
	s := &p.hpa.Status
	p.statusSet = true
	*s = autoscalingv2.HorizontalPodAutoscalerStatus{
		CurrentReplicas: current,
		DesiredReplicas: desired,
		LastScaleTime:   s.LastScaleTime,
		CurrentMetrics:  p.statuses,
		Conditions:      s.Conditions,
	}
	if p.gates.Generation {
		g := p.hpa.Generation
		s.ObservedGeneration = &g
	}
	if rescaled {
		t := metav1.NewTime(p.clock())
		s.LastScaleTime = &t
	}
}

func (p *Plan) event(eventType, reason, message string) {
	p.events = append(p.events, Event{Type: eventType, Reason: reason, Message: message})
}

// setCondition sets a condition in place, adding it at the end when new;
// its transition time moves only when its status does.
func (p *Plan) setCondition(t autoscalingv2.HorizontalPodAutoscalerConditionType, status corev1.ConditionStatus, reason, message string) {
	conds := p.hpa.Status.Conditions
	var c *autoscalingv2.HorizontalPodAutoscalerCondition
	for i := range conds {
		if conds[i].Type == t {
			c = &conds[i]
			break
		}
	}
	if c == nil {
		conds = append(conds, autoscalingv2.HorizontalPodAutoscalerCondition{Type: t})
		c = &conds[len(conds)-1]
	}
	if c.Status != status {
		c.LastTransitionTime = metav1.NewTime(p.clock())
	}
	c.Status, c.Reason, c.Message = status, reason, message
	p.hpa.Status.Conditions = conds
}

func (p *Plan) removeCondition(t autoscalingv2.HorizontalPodAutoscalerConditionType) {
	kept := p.hpa.Status.Conditions[:0]
	for _, c := range p.hpa.Status.Conditions {
		if c.Type != t {
			kept = append(kept, c)
		}
	}
	p.hpa.Status.Conditions = kept
}

func hasObjectOrExternalMetrics(hpa *autoscalingv2.HorizontalPodAutoscaler) bool {
	for _, m := range hpa.Spec.Metrics {
		if m.Type == autoscalingv2.ObjectMetricSourceType || m.Type == autoscalingv2.ExternalMetricSourceType {
			return true
		}
	}
	return false
}

func conditionTrue(hpa *autoscalingv2.HorizontalPodAutoscaler, t autoscalingv2.HorizontalPodAutoscalerConditionType) bool {
	for _, c := range hpa.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
