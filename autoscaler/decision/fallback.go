package decision

import (
	"fmt"
	"math"
	"strings"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
)

// ConditionFallback is the MetricAutoscaler condition that says whether the
// fallback size is in force, and which metric failed since when.
const ConditionFallback autoscalingv2.HorizontalPodAutoscalerConditionType = "Fallback"

// Reasons of the Fallback condition and events.
const (
	ReasonFallback        = "Fallback"
	ReasonFallbackEnded   = "FallbackEnded"
	ReasonMetricsAnswer   = "MetricsAnswer"
	ReasonBelowThreshold  = "BelowFailureThreshold"
	maxStoredErrorLength  = 256
	fallbackProposalLabel = "fallback"
)

// carryFallback is the fallback state a reconcile starts from: the stored
// one when the spec asks for fallback, none otherwise, so that removing
// spec.fallback clears status.fallback.
func carryFallback(in Input) *v1alpha1.FallbackStatus {
	if in.Fallback == nil {
		return nil
	}
	if in.FallbackState == nil {
		return &v1alpha1.FallbackStatus{}
	}
	return in.FallbackState.DeepCopy()
}

// applyFallback counts this reconcile's failed metrics and, once one has
// failed FailureThreshold consecutive reconciles, returns the proposal the
// fallback makes in place of the metrics' one: the fallback size, or the
// largest proposal of the metrics that answered if that is higher (the
// fallback is a floor under the healthy metrics, as the HPA's "largest
// proposal wins" would make of a failing metric that proposed the fallback
// size). ok is false when fallback is not in force: the caller then decides
// exactly as without spec.fallback.
//
// It only runs when the metrics were read (p.Metrics is set); a reconcile
// that read none (the scale or the pods could not be read, or the target is
// left alone at zero) neither counts a failure nor ends a run.
func (p *Plan) applyFallback(in Input, current int32) (proposal int32, name string, ok bool) {
	if in.Fallback == nil || p.Metrics == nil {
		return 0, "", false
	}
	prev := p.fallback
	if prev == nil {
		prev = &v1alpha1.FallbackStatus{}
	}
	st := &v1alpha1.FallbackStatus{Metrics: countFailures(prev.Metrics, p.resultNames(in), p.Metrics, in.Now)}
	var over []v1alpha1.MetricFailure
	for _, f := range st.Metrics {
		if f.Failures >= in.Fallback.FailureThreshold {
			over = append(over, f)
		}
	}
	st.Active = len(over) > 0
	p.fallback = st

	if !st.Active {
		if prev.Active {
			p.event(corev1.EventTypeNormal, ReasonFallbackEnded, "every metric answers again: the metrics decide the size")
		}
		reason, msg := ReasonMetricsAnswer, "every metric answered"
		if len(st.Metrics) > 0 {
			reason, msg = ReasonBelowThreshold, describeFailures(st.Metrics, in.Fallback.FailureThreshold)
		}
		p.setCondition(ConditionFallback, corev1.ConditionFalse, reason, msg)
		return 0, "", false
	}

	since := metav1.NewTime(in.Now)
	if prev.Active && prev.Since != nil {
		since = *prev.Since
	}
	st.Since = &since
	size := fallbackSize(in.Fallback, current)
	proposal, name = size, fallbackProposalLabel
	names := p.resultNames(in)
	for i, m := range p.Metrics {
		if m.Err == nil && m.Proposal > proposal {
			proposal, name = m.Proposal, names[i]
		}
	}
	msg := fmt.Sprintf("fallback to %d replicas (%s) since %s: %s", size, behaviorOf(in.Fallback), since.UTC().Format(time.RFC3339), describeFailures(over, in.Fallback.FailureThreshold))
	if !prev.Active {
		p.event(corev1.EventTypeWarning, ReasonFallback, msg)
	}
	p.setCondition(ConditionFallback, corev1.ConditionTrue, ReasonFallback, msg)
	return proposal, name, true
}

// fallbackReason is the rescale reason while the fallback decides.
func fallbackReason(name string) string {
	if name == fallbackProposalLabel {
		return "metrics failed: fallback size"
	}
	return fmt.Sprintf("metrics failed: %s above the fallback size", name)
}

// resultNames names each entry of p.Metrics: the spec metrics as
// metricName does, then spec.formula ("formula NAME"), whose index is
// len(spec.metrics).
func (p *Plan) resultNames(in Input) []string {
	specs := p.hpa.Spec.Metrics
	names := make([]string, len(specs), len(specs)+1)
	for i := range specs {
		names[i] = metricName(&specs[i])
	}
	if in.Formula != nil {
		names = append(names, "formula "+in.Formula.Name)
	}
	return names
}

// countFailures carries each result's run of failures one reconcile
// further: a failed read extends it, an answer ends it. A stored run counts
// only for the metric it was counted for (same index and name), so editing
// spec.metrics starts the edited metrics afresh. An input of spec.formula
// counts, and so does the formula it fails.
func countFailures(prev []v1alpha1.MetricFailure, names []string, results []MetricResult, now time.Time) []v1alpha1.MetricFailure {
	var out []v1alpha1.MetricFailure
	for i, r := range results {
		if r.Err == nil || i >= len(names) {
			continue
		}
		name := names[i]
		f := v1alpha1.MetricFailure{Index: int32(i), Name: name, Since: &metav1.Time{Time: now}}
		for _, old := range prev {
			if old.Index == int32(i) && old.Name == name {
				f = *old.DeepCopy()
				break
			}
		}
		if f.Since == nil {
			f.Since = &metav1.Time{Time: now}
		}
		if f.Failures < math.MaxInt32 {
			f.Failures++
		}
		f.LastError = truncate(r.Err.Error(), maxStoredErrorLength)
		out = append(out, f)
	}
	return out
}

// fallbackSize is the size the behavior asks for at the current size.
func fallbackSize(f *v1alpha1.Fallback, current int32) int32 {
	switch behaviorOf(f) {
	case v1alpha1.FallbackCurrentReplicas:
		return current
	case v1alpha1.FallbackCurrentReplicasIfHigher:
		return max(current, f.Replicas)
	case v1alpha1.FallbackCurrentReplicasIfLower:
		return min(current, f.Replicas)
	}
	return f.Replicas
}

func behaviorOf(f *v1alpha1.Fallback) v1alpha1.FallbackBehavior {
	if f.Behavior == "" {
		return v1alpha1.FallbackStatic
	}
	return f.Behavior
}

// metricName names a spec metric as spec.scaleToZero.activation does:
// metric.name for Object, Pods and External metrics, the resource name for
// Resource and ContainerResource ones; with the type, for reading.
func metricName(m *autoscalingv2.MetricSpec) string {
	switch {
	case m.Type == autoscalingv2.ObjectMetricSourceType && m.Object != nil:
		return "Object " + m.Object.Metric.Name
	case m.Type == autoscalingv2.PodsMetricSourceType && m.Pods != nil:
		return "Pods " + m.Pods.Metric.Name
	case m.Type == autoscalingv2.ExternalMetricSourceType && m.External != nil:
		return "External " + m.External.Metric.Name
	case m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil:
		return "Resource " + string(m.Resource.Name)
	case m.Type == autoscalingv2.ContainerResourceMetricSourceType && m.ContainerResource != nil:
		return "ContainerResource " + string(m.ContainerResource.Name)
	}
	return string(m.Type)
}

func describeFailures(fs []v1alpha1.MetricFailure, threshold int32) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		since := ""
		if f.Since != nil {
			since = " since " + f.Since.UTC().Format(time.RFC3339)
		}
		where := fmt.Sprintf("spec.metrics[%d] (%s)", f.Index, f.Name)
		if name, ok := strings.CutPrefix(f.Name, "formula "); ok {
			where = fmt.Sprintf("spec.formula (%s)", name)
		}
		parts[i] = fmt.Sprintf("%s failed %d consecutive reconciles (threshold %d)%s: %s", where, f.Failures, threshold, since, f.LastError)
	}
	return strings.Join(parts, "; ")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}
