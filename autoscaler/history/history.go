// Package history converts the decision core's history to and from the
// bounded form a MetricAutoscaler keeps in its status.
package history

import (
	"slices"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/behavior"
	"github.com/metricscale/metricscale/autoscaler/defaults"
)

// FromStatus restores the core's history from a status.
func FromStatus(h *v1alpha1.History) behavior.History {
	var out behavior.History
	if h == nil {
		return out
	}
	for _, r := range h.Recommendations {
		out.Recommendations = append(out.Recommendations, behavior.Recommendation{Replicas: r.Replicas, Timestamp: r.Time.Time})
	}
	events := func(in []v1alpha1.ScaleEvent) []behavior.ScaleEvent {
		var ev []behavior.ScaleEvent
		for _, e := range in {
			ev = append(ev, behavior.ScaleEvent{Change: e.Change, Timestamp: e.Time.Time, Outdated: e.Outdated})
		}
		return ev
	}
	out.ScaleUpEvents = events(h.ScaleUpEvents)
	out.ScaleDownEvents = events(h.ScaleDownEvents)
	return out
}

// ToStatus keeps what the next decisions can still use: the
// recommendations within the longest stabilization window and the scale
// events within the longest policy period of their direction.
//
// The windows and periods are those of the spec as the core defaults it: a
// behavior without scaleUp still has the default scale-up policies, whose
// events must be kept.
func ToStatus(h behavior.History, spec *autoscalingv2.HorizontalPodAutoscalerSpec, downscaleWindow time.Duration, now time.Time) *v1alpha1.History {
	window, upPeriod, downPeriod := downscaleWindow, time.Duration(0), time.Duration(0)
	if spec.Behavior != nil {
		// The core decides with the defaulted rules: a behavior that omits
		// scaleUp still limits scale-ups by the default policies' periods,
		// whose events must then survive a restart too.
		defaulted := autoscalingv2.HorizontalPodAutoscalerSpec{Behavior: spec.Behavior.DeepCopy(), Metrics: spec.Metrics}
		defaults.Spec(&defaulted)
		b := defaulted.Behavior
		window = 0
		for _, r := range []*autoscalingv2.HPAScalingRules{b.ScaleUp, b.ScaleDown} {
			if r == nil {
				continue
			}
			w := downscaleWindow
			if r.StabilizationWindowSeconds != nil {
				w = time.Duration(*r.StabilizationWindowSeconds) * time.Second
			}
			window = max(window, w)
		}
		upPeriod, downPeriod = longestPeriod(b.ScaleUp), longestPeriod(b.ScaleDown)
	}
	out := &v1alpha1.History{}
	// Of each size only the newest: the core stabilizes on the largest (or
	// smallest) recommendation newer than a cutoff, and an older one of
	// the same size is newer than no cutoff that the newest is not. At a
	// 15 s sync this keeps a few entries, not 20, in every status write
	// and every watch event of the object.
	newest := map[int32]int{}
	for _, r := range h.Recommendations {
		if r.Timestamp.Before(now.Add(-window)) {
			continue
		}
		if i, ok := newest[r.Replicas]; ok {
			if r.Timestamp.After(out.Recommendations[i].Time.Time) {
				out.Recommendations[i].Time = metav1.NewMicroTime(r.Timestamp)
			}
			continue
		}
		newest[r.Replicas] = len(out.Recommendations)
		out.Recommendations = append(out.Recommendations, v1alpha1.Recommendation{Replicas: r.Replicas, Time: metav1.NewMicroTime(r.Timestamp)})
	}
	if len(out.Recommendations) == 0 && len(h.Recommendations) > 0 {
		// The newest is kept even when expired: it marks the history as begun.
		r := slices.MaxFunc(h.Recommendations, func(a, b behavior.Recommendation) int { return a.Timestamp.Compare(b.Timestamp) })
		out.Recommendations = []v1alpha1.Recommendation{{Replicas: r.Replicas, Time: metav1.NewMicroTime(r.Timestamp)}}
	}
	keep := func(in []behavior.ScaleEvent, period time.Duration) []v1alpha1.ScaleEvent {
		var out []v1alpha1.ScaleEvent
		for _, e := range in {
			if !e.Timestamp.Before(now.Add(-period)) {
				out = append(out, v1alpha1.ScaleEvent{Change: e.Change, Time: metav1.NewMicroTime(e.Timestamp), Outdated: e.Outdated})
			}
		}
		return out
	}
	out.ScaleUpEvents = keep(h.ScaleUpEvents, upPeriod)
	out.ScaleDownEvents = keep(h.ScaleDownEvents, downPeriod)
	return out
}

func longestPeriod(r *autoscalingv2.HPAScalingRules) time.Duration {
	var longest int32
	if r != nil {
		for _, p := range r.Policies {
			longest = max(longest, p.PeriodSeconds)
		}
	}
	return time.Duration(longest) * time.Second
}
