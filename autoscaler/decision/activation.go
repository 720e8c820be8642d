package decision

import (
	"context"
	"fmt"
	"math"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/metricsource"
)

// ConditionActive is the MetricAutoscaler condition that says whether some
// metric is above its activation value (spec.scaleToZero).
const ConditionActive autoscalingv2.HorizontalPodAutoscalerConditionType = "Active"

// Reasons of the Active condition, of the events and of ScalingLimited
// when activation or the cooldown sets the size.
const (
	ReasonActivated       = "Activated"
	ReasonDeactivated     = "Deactivated"
	ReasonAboveActivation = "AboveActivation"
	ReasonBelowActivation = "BelowActivation"
	ReasonActivationRead  = "MetricFailed"
	ReasonCoolingDown     = "CoolingDown"
	ReasonCooldownElapsed = "CooldownElapsed"

	// DefaultCooldownPeriod is spec.scaleToZero.cooldownPeriod's default.
	DefaultCooldownPeriod = 5 * time.Minute
)

// activation is what one reconcile read of the metrics against their
// activation values.
type activation struct {
	// above: some metric read above its activation value (the first is
	// described in why); idle: every metric was read, and those that take
	// part are at or below theirs; cooled: idle, and for the whole cooldown.
	above, idle, cooled bool
	why                 string
	// failed describes the first metric that could not be read.
	failed     string
	inFallback bool
	// held is the HPA's proposal that activation held at zero.
	held     int32
	zeroAt   time.Time
	cooldown time.Duration
	// limited is the ScalingLimited condition before stabilization, whose
	// transition time stands when activation sets the same status again.
	limited *autoscalingv2.HorizontalPodAutoscalerCondition
}

// carryScaleToZero is the activation state a reconcile starts from: the
// stored one when the spec asks for scale to zero, none otherwise, so that
// removing spec.scaleToZero clears status.scaleToZero.
func carryScaleToZero(in Input) *v1alpha1.ScaleToZeroStatus {
	if in.ScaleToZero == nil {
		return nil
	}
	if in.ScaleToZeroState == nil {
		return &v1alpha1.ScaleToZeroStatus{}
	}
	return in.ScaleToZeroState.DeepCopy()
}

// scaleToZeroOn says whether activation and cooldown apply: spec.scaleToZero
// with minReplicas 0 (the CRD refuses it otherwise) and an Object or External
// metric, the only ones readable at zero replicas.
func (p *Plan) scaleToZeroOn(in Input) bool {
	return in.ScaleToZero != nil && p.specMinimum == 0 && p.hasObjExt
}

// watchValues returns the metrics source the calculator reads through: with
// scale to zero on, one that keeps the raw answers of External and Object
// queries, which activation compares (the average per pod the HPA derives
// from them means nothing at zero pods).
func (p *Plan) watchValues(in Input) metricsource.Source {
	if !p.scaleToZeroOn(in) || in.Metrics == nil {
		return in.Metrics
	}
	p.raw = &rawValues{Source: in.Metrics, external: map[string][]int64{}, object: map[string]int64{}, upstream: in.Settings.UpstreamArithmetic}
	return p.raw
}

// observeActivation compares each metric read in this reconcile with its
// activation value and carries status.scaleToZero one reconcile further:
// a metric above its value activates the target and sets lastActiveTime; all
// of them at or below deactivate it; a metric that failed proves neither, so
// the state stays as it was. A negative External (any series) or Object
// reading fails (NegativeReadingError), never reads as "at or below". It reports the Active condition and events.
func (p *Plan) observeActivation(in Input, current int32, inFallback bool) {
	if !p.scaleToZeroOn(in) || p.Metrics == nil {
		return
	}
	prev := p.scaleToZero
	a := &activation{inFallback: inFallback, cooldown: DefaultCooldownPeriod}
	if c := in.ScaleToZero.CooldownPeriod; c != nil {
		a.cooldown = max(c.Duration, 0)
	}
	specs := p.hpa.Spec.Metrics
	failedAny := false
	for i := range specs {
		threshold, takesPart := activationValue(&specs[i], in.ScaleToZero.Activation)
		if _, perPod := activationName(&specs[i]); perPod && current == 0 {
			// No pods, no value (a read of terminating pods is not one):
			// a per-pod metric never activates, and fails at zero anyway.
			continue
		}
		if p.Metrics[i].Err != nil {
			// Whether or not it takes part, a metric that failed may be busy:
			// the target does not go to zero on the strength of the others.
			if !failedAny {
				a.failed = fmt.Sprintf("spec.metrics[%d] (%s)", i, metricName(&specs[i]))
			}
			failedAny = true
			continue
		}
		if !takesPart {
			continue
		}
		value, ok := p.activationReading(i)
		if !ok {
			if !failedAny {
				a.failed = fmt.Sprintf("spec.metrics[%d] (%s, no value to compare)", i, metricName(&specs[i]))
			}
			failedAny = true
			continue
		}
		if value.Cmp(threshold) > 0 && !a.above {
			a.above = true
			a.why = fmt.Sprintf("spec.metrics[%d] (%s) is %s, above its activation value %s", i, metricName(&specs[i]), value.String(), threshold.String())
		}
	}
	a.idle = !a.above && !failedAny

	st := &v1alpha1.ScaleToZeroStatus{Active: prev.Active, LastActiveTime: prev.LastActiveTime}
	switch {
	case a.above:
		st.Active = true
		st.LastActiveTime = &metav1.Time{Time: in.Now}
	case a.idle:
		st.Active = false
	}
	if st.LastActiveTime == nil && current > 0 {
		// First seen running: the cooldown starts now rather than the
		// target going to zero at once.
		st.LastActiveTime = &metav1.Time{Time: in.Now}
	}
	if st.LastActiveTime != nil {
		a.zeroAt = st.LastActiveTime.Add(a.cooldown)
		a.cooled = a.idle && !in.Now.Before(a.zeroAt)
	}
	p.scaleToZero, p.activation = st, a

	zeroAt := a.zeroAt.UTC().Format(time.RFC3339)
	var reason, msg string
	status := corev1.ConditionFalse
	switch {
	case a.above:
		status, reason, msg = corev1.ConditionTrue, ReasonAboveActivation, a.why
	case !a.idle:
		if st.Active {
			status = corev1.ConditionTrue
		}
		reason, msg = ReasonActivationRead, a.failed+" could not be read: a failed read neither activates nor deactivates the target"
	case current == 0:
		reason, msg = ReasonBelowActivation, "every metric is at or below its activation value: the target stays at zero"
	case a.cooled:
		reason, msg = ReasonBelowActivation, fmt.Sprintf("every metric has been at or below its activation value for the cooldown (%s): the target goes to zero", a.cooldown)
	default:
		reason, msg = ReasonBelowActivation, fmt.Sprintf("every metric is at or below its activation value: the target goes to zero at %s (cooldown %s) unless one rises above it", zeroAt, a.cooldown)
	}
	if inFallback {
		msg += "; the fallback decides the size"
	}
	p.setCondition(ConditionActive, status, reason, msg)
	switch {
	case st.Active && !prev.Active:
		p.event(corev1.EventTypeNormal, ReasonActivated, a.why)
	case !st.Active && prev.Active:
		p.event(corev1.EventTypeNormal, ReasonDeactivated, msg)
	}
}

// activationProposal is the proposal that enters stabilization: held at
// zero while no metric is above its activation value, zero once the
// cooldown has elapsed; the HPA's own otherwise. The fallback, when in
// force, decides alone.
func (p *Plan) activationProposal(current, proposal int32) int32 {
	a := p.activation
	if a == nil || a.inFallback {
		return proposal
	}
	for _, c := range p.hpa.Status.Conditions {
		if c.Type == autoscalingv2.ScalingLimited {
			a.limited = c.DeepCopy()
		}
	}
	switch {
	case current == 0 && !a.above:
		a.held = proposal
		return 0
	case current > 0 && a.cooled:
		return 0
	}
	return proposal
}

// activationSize corrects the stabilized, rate-limited size: from zero a
// metric above its activation value brings at least one replica, and
// nothing else brings any; above zero the target goes to zero once the
// cooldown has elapsed, and not before (the HPA's size is floored at one).
// Between one and maxReplicas the HPA's size stands.
func (p *Plan) activationSize(current, desired int32) int32 {
	a := p.activation
	if a == nil || a.inFallback {
		return desired
	}
	switch {
	case current == 0 && !a.above:
		if desired != 0 || a.held > 0 {
			p.setLimitedBy(corev1.ConditionTrue, ReasonBelowActivation,
				fmt.Sprintf("the metrics ask for %s, but no metric is above its activation value: the target stays at zero", replicasString(max(desired, a.held))))
		}
		return 0
	case current == 0:
		if desired < 1 {
			p.setLimitedBy(corev1.ConditionTrue, ReasonAboveActivation, "a metric is above its activation value: at least one replica")
			desired = 1
		}
		p.Reason = a.why
		return desired
	case a.cooled:
		if desired != 0 {
			p.setLimitedBy(corev1.ConditionFalse, ReasonCooldownElapsed, "the cooldown has elapsed: the target goes to zero whatever stabilization and policies hold")
		}
		p.Reason = fmt.Sprintf("every metric at or below its activation value for the cooldown (%s)", a.cooldown)
		return 0
	case desired < 1:
		p.setLimitedBy(corev1.ConditionTrue, ReasonCoolingDown,
			fmt.Sprintf("the target keeps one replica until %s, when the cooldown (%s) ends", a.zeroAt.UTC().Format(time.RFC3339), a.cooldown))
		return 1
	}
	return desired
}

// activationValue is the activation value of a spec metric, and whether
// it takes part in activation at all: an Object or External metric always
// (0 without an entry, as KEDA's activationThreshold), a Pods, Resource or
// ContainerResource metric only with an entry and above zero replicas — it
// has no value at zero pods, and a CPU metric above 0 would otherwise keep
// every target up.
func activationValue(m *autoscalingv2.MetricSpec, entries []v1alpha1.MetricActivation) (resource.Quantity, bool) {
	name, perPod := activationName(m)
	for _, e := range entries {
		if e.Metric == name {
			return e.Value, true
		}
	}
	return resource.Quantity{}, !perPod
}

// activationName is the name spec.scaleToZero.activation gives a spec
// metric, and whether the metric is one per pod.
func activationName(m *autoscalingv2.MetricSpec) (string, bool) {
	switch {
	case m.Type == autoscalingv2.ObjectMetricSourceType && m.Object != nil:
		return m.Object.Metric.Name, false
	case m.Type == autoscalingv2.ExternalMetricSourceType && m.External != nil:
		return m.External.Metric.Name, false
	case m.Type == autoscalingv2.PodsMetricSourceType && m.Pods != nil:
		return m.Pods.Metric.Name, true
	case m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil:
		return string(m.Resource.Name), true
	case m.Type == autoscalingv2.ContainerResourceMetricSourceType && m.ContainerResource != nil:
		return string(m.ContainerResource.Name), true
	}
	return "", true
}

// activationReading is the value of spec metric i that activation compares:
// the raw value of an External (summed series) or Object metric, whatever
// its target type; a Pods metric's average per pod; a Resource or
// ContainerResource metric's utilization in percent for a Utilization
// target, its average per pod for an AverageValue one.
func (p *Plan) activationReading(i int) (resource.Quantity, bool) {
	m := &p.hpa.Spec.Metrics[i]
	st := &p.statuses[i]
	switch {
	case m.Type == autoscalingv2.ExternalMetricSourceType && m.External != nil:
		sel, err := metav1.LabelSelectorAsSelector(m.External.Metric.Selector)
		if err != nil || p.raw == nil {
			return resource.Quantity{}, false
		}
		values, ok := p.raw.external[externalKey(m.External.Metric.Name, sel)]
		if !ok {
			return resource.Quantity{}, false
		}
		return *resource.NewMilliQuantity(saturatingSum(values), resource.DecimalSI), true
	case m.Type == autoscalingv2.ObjectMetricSourceType && m.Object != nil:
		sel, err := metav1.LabelSelectorAsSelector(m.Object.Metric.Selector)
		if err != nil || p.raw == nil {
			return resource.Quantity{}, false
		}
		v, ok := p.raw.object[objectKey(m.Object.Metric.Name, &m.Object.DescribedObject, sel)]
		return *resource.NewMilliQuantity(v, resource.DecimalSI), ok
	case st.Pods != nil && st.Pods.Current.AverageValue != nil:
		return *st.Pods.Current.AverageValue, true
	case st.Resource != nil:
		return perPodReading(m.Resource.Target, st.Resource.Current)
	case st.ContainerResource != nil:
		return perPodReading(m.ContainerResource.Target, st.ContainerResource.Current)
	}
	return resource.Quantity{}, false
}

func perPodReading(t autoscalingv2.MetricTarget, cur autoscalingv2.MetricValueStatus) (resource.Quantity, bool) {
	if t.AverageValue == nil && cur.AverageUtilization != nil {
		return *resource.NewQuantity(int64(*cur.AverageUtilization), resource.DecimalSI), true
	}
	if cur.AverageValue != nil {
		return *cur.AverageValue, true
	}
	return resource.Quantity{}, false
}

// saturatingSum adds milli-values, saturating at the int64 bounds.
func saturatingSum(values []int64) int64 {
	var s int64
	for _, v := range values {
		switch {
		case v > 0 && s > math.MaxInt64-v:
			s = math.MaxInt64
		case v < 0 && s < math.MinInt64-v:
			s = math.MinInt64
		default:
			s += v
		}
	}
	return s
}

// rawValues is a metrics source that keeps the External and Object answers
// it passes on, by query.
type rawValues struct {
	metricsource.Source
	external map[string][]int64
	object   map[string]int64
	// upstream passes negative readings on, as upstream reads them
	// (`simulate --upstream-arithmetic`).
	upstream bool
}

func externalKey(name string, sel labels.Selector) string {
	return name + "\x00" + sel.String()
}

func objectKey(name string, ref *autoscalingv2.CrossVersionObjectReference, sel labels.Selector) string {
	return name + "\x00" + ref.APIVersion + "\x00" + ref.Kind + "\x00" + ref.Name + "\x00" + sel.String()
}

func (r *rawValues) ExternalMetric(ctx context.Context, name, namespace string, sel labels.Selector) ([]int64, time.Time, error) {
	values, ts, err := r.Source.ExternalMetric(ctx, name, namespace, sel)
	if err != nil {
		return values, ts, err
	}
	for _, v := range values {
		if v < 0 && !r.upstream {
			return nil, time.Time{}, &NegativeReadingError{Metric: name, Value: v}
		}
	}
	r.external[externalKey(name, sel)] = values
	return values, ts, nil
}

func (r *rawValues) ObjectMetric(ctx context.Context, name, namespace string, ref *autoscalingv2.CrossVersionObjectReference, sel labels.Selector) (int64, time.Time, error) {
	v, ts, err := r.Source.ObjectMetric(ctx, name, namespace, ref, sel)
	if err != nil {
		return v, ts, err
	}
	if v < 0 && !r.upstream {
		return 0, time.Time{}, &NegativeReadingError{Metric: name, Value: v}
	}
	r.object[objectKey(name, ref, sel)] = v
	return v, ts, nil
}

// NegativeReadingError is an External series or Object value below zero
// read while scale to zero is on. Such a reading is invalid: a count, a
// lag or a length below zero is a backend bug or a wrapped sum, and taken
// for "at or below activation" it would let the cooldown take a loaded
// workload to zero. It is a failed read, with a failed read's
// consequences: the metric neither activates nor deactivates, and the HPA
// algorithm does not scale down while it fails (the fallback counts it).
// `simulate --upstream-arithmetic` passes the value on instead
// (docs/scenarios.md, deviation 6).
type NegativeReadingError struct {
	Metric string
	Value  int64 // milli-units
}

func (e *NegativeReadingError) Error() string {
	return fmt.Sprintf("metric %s read %s, a negative value: invalid while scale to zero is on (a failed read, neither activates nor deactivates the target)",
		e.Metric, resource.NewMilliQuantity(e.Value, resource.DecimalSI).String())
}

// setLimitedBy sets ScalingLimited where activation or the cooldown set the
// size, over what stabilization wrote in this reconcile: the transition
// time is the one stored when the status is the stored one.
func (p *Plan) setLimitedBy(status corev1.ConditionStatus, reason, message string) {
	p.setCondition(autoscalingv2.ScalingLimited, status, reason, message)
	old := p.activation.limited
	if old == nil || old.Status != status {
		return
	}
	for i := range p.hpa.Status.Conditions {
		if c := &p.hpa.Status.Conditions[i]; c.Type == autoscalingv2.ScalingLimited {
			c.LastTransitionTime = old.LastTransitionTime
		}
	}
}

func replicasString(n int32) string {
	if n == 1 {
		return "1 replica"
	}
	return fmt.Sprintf("%d replicas", n)
}
