// Package behavior turns a raw replica proposal into the count to scale to:
// the stabilization windows over past recommendations, the scale-up cap and
// min/max clamp of an autoscaler without behavior, and the Pods/Percent
// policies over past scale events of one with behavior. It keeps the history
// those rules need, in the same shape and order as the upstream controller.
package behavior

import (
	"math"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"

	"github.com/metricscale/metricscale/autoscaler/arith"
)

// Clock returns the time of each reading. Within one reconcile every reading
// is later than the one before, as a real clock's would be.
type Clock func() time.Time

// Recommendation is a past unstabilized replica proposal.
type Recommendation struct {
	Replicas  int32     `json:"replicas"`
	Timestamp time.Time `json:"timestamp"`
}

// ScaleEvent is a past rescale: how many replicas it added or removed.
type ScaleEvent struct {
	Change    int32     `json:"change"`
	Timestamp time.Time `json:"timestamp"`
	// Outdated marks an event older than the longest policy period: its
	// slot is reused by the next event.
	Outdated bool `json:"outdated,omitempty"`
}

// History is what an autoscaler remembers between reconciles.
type History struct {
	Recommendations []Recommendation `json:"recommendations,omitempty"`
	ScaleUpEvents   []ScaleEvent     `json:"scaleUpEvents,omitempty"`
	ScaleDownEvents []ScaleEvent     `json:"scaleDownEvents,omitempty"`
}

// DeepCopy returns a history that shares no memory with h.
func (h History) DeepCopy() History {
	return History{
		Recommendations: append([]Recommendation(nil), h.Recommendations...),
		ScaleUpEvents:   append([]ScaleEvent(nil), h.ScaleUpEvents...),
		ScaleDownEvents: append([]ScaleEvent(nil), h.ScaleDownEvents...),
	}
}

// RecordInitial remembers the current size as the first recommendation of
// an autoscaler that has none, so that a first reconcile does not scale down
// at once.
func (h *History) RecordInitial(current int32, now Clock) {
	if len(h.Recommendations) == 0 {
		h.Recommendations = []Recommendation{{current, now()}}
	}
}

// record stores a recommendation in the slot of an expired one, if any.
func (h *History) record(replicas int32, oldIndex int, foundOld bool, now Clock) {
	rec := Recommendation{replicas, now()}
	if foundOld {
		h.Recommendations[oldIndex] = rec
		return
	}
	h.Recommendations = append(h.Recommendations, rec)
}

// Limit is a rule's verdict: the count it allows and, when it limited the
// proposal, why.
type Limit struct {
	Replicas int32
	Reason   string
	Message  string

	// What the explanation of a decision shows; no decision reads them.
	// Bound is the limit a rate rule set (the scale-up cap, or a policy's
	// bound) and Policy the index in the rules' policies of the policy that
	// set it (-1 when none did: no policies, or selectPolicy Disabled).
	// Window is the stabilization window that applied.
	Bound  int32
	Policy int
	Window time.Duration
}

// Stabilize applies the downscale stabilization of an autoscaler without
// behavior: the largest recommendation within window, this one included.
func (h *History) Stabilize(desired int32, window time.Duration, now Clock) int32 {
	highest := desired
	foundOld, oldIndex := false, 0
	cutoff := now().Add(-window)
	for i, rec := range h.Recommendations {
		if rec.Timestamp.Before(cutoff) {
			foundOld, oldIndex = true, i
		} else if rec.Replicas > highest {
			highest = rec.Replicas
		}
	}
	h.record(desired, oldIndex, foundOld, now)
	return highest
}

// ClampWithoutBehavior bounds desired by minReplicas, maxReplicas and the
// scale-up cap of max(2×current, 4). Upstream's cap wraps above 2^30
// replicas; upstream selects that arithmetic.
func ClampWithoutBehavior(current, desired, minReplicas, maxReplicas int32, upstream bool) Limit {
	upLimit := arith.ToInt32(math.Max(2.0*float64(current), 4.0), upstream)
	maxAllowed, reason, message := maxReplicas, "TooManyReplicas", "the desired replica count is more than the maximum replica count"
	if maxReplicas > upLimit {
		maxAllowed, reason, message = upLimit, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"
	}
	if desired < minReplicas {
		return Limit{Replicas: minReplicas, Reason: "TooFewReplicas", Message: "the desired replica count is less than the minimum replica count", Bound: minReplicas, Policy: -1}
	}
	if desired > maxAllowed {
		return Limit{Replicas: maxAllowed, Reason: reason, Message: message, Bound: upLimit, Policy: -1}
	}
	return withinRange(desired)
}

func withinRange(replicas int32) Limit {
	return Limit{Replicas: replicas, Reason: "DesiredWithinRange", Message: "the desired count is within the acceptable range", Policy: -1}
}

// Rules are an autoscaler's defaulted behavior for one reconcile.
type Rules struct {
	ScaleUp, ScaleDown *autoscalingv2.HPAScalingRules
	Min, Max           int32
	// UpstreamArithmetic computes policy limits in int32 as upstream does,
	// wrapping on overflow (a Pods value near 2^31 then blocks every
	// scale-up); off, they are computed exactly and saturate.
	UpstreamArithmetic bool
}

// clamp32 saturates an exact int64 result to int32.
func clamp32(v int64) int32 {
	return int32(max(math.MinInt32, min(math.MaxInt32, v)))
}

// windowOf is a rule's stabilization window; a rule without one takes the
// controller's window in whole seconds, as the upstream controller fills it.
func windowOf(r *autoscalingv2.HPAScalingRules, fallback time.Duration) time.Duration {
	seconds := int32(fallback.Seconds())
	if r.StabilizationWindowSeconds != nil {
		seconds = *r.StabilizationWindowSeconds
	}
	return time.Second * time.Duration(seconds)
}

// StabilizeWithBehavior keeps desired between the lowest recommendation of
// the scale-up window and the highest of the scale-down window (a scale-down
// rule without its own window uses downscaleWindow), records desired, and
// says which way it held the count back.
func (h *History) StabilizeWithBehavior(r Rules, current, desired int32, downscaleWindow time.Duration, now Clock) Limit {
	t := now()
	upWindow, downWindow := windowOf(r.ScaleUp, downscaleWindow), windowOf(r.ScaleDown, downscaleWindow)
	upCutoff := t.Add(-upWindow)
	downCutoff := t.Add(-downWindow)
	up, down := desired, desired
	foundOld, oldIndex := false, 0
	for i, rec := range h.Recommendations {
		if rec.Timestamp.After(upCutoff) {
			up = min(rec.Replicas, up)
		}
		if rec.Timestamp.After(downCutoff) {
			down = max(rec.Replicas, down)
		}
		if rec.Timestamp.Before(upCutoff) && rec.Timestamp.Before(downCutoff) {
			foundOld, oldIndex = true, i
		}
	}
	stabilized := current
	if stabilized < up {
		stabilized = up
	}
	if stabilized > down {
		stabilized = down
	}
	h.record(desired, oldIndex, foundOld, now)
	if desired >= current {
		return Limit{Replicas: stabilized, Reason: "ScaleUpStabilized", Message: "recent recommendations were lower than current one, applying the lowest recent recommendation", Policy: -1, Window: upWindow}
	}
	return Limit{Replicas: stabilized, Reason: "ScaleDownStabilized", Message: "recent recommendations were higher than current one, applying the highest recent recommendation", Policy: -1, Window: downWindow}
}

// LimitByRate bounds desired by min/max and by the policies of the
// direction it moves in, counting the changes of each policy's period.
func (h *History) LimitByRate(r Rules, current, desired int32, now Clock) Limit {
	switch {
	case desired > current:
		upLimit, policy := h.scaleUpLimit(current, r.ScaleUp, r.UpstreamArithmetic, now)
		if upLimit < current {
			// No further scale-up until past events leave their periods.
			upLimit = current
		}
		maxAllowed, reason, message := r.Max, "TooManyReplicas", "the desired replica count is more than the maximum replica count"
		bound := maxAllowed
		if maxAllowed > upLimit {
			maxAllowed, reason, message, bound = upLimit, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate", upLimit
		} else {
			policy = -1
		}
		if desired > maxAllowed {
			return Limit{Replicas: maxAllowed, Reason: reason, Message: message, Bound: bound, Policy: policy}
		}
	case desired < current:
		downLimit, policy := h.scaleDownLimit(current, r.ScaleDown, r.UpstreamArithmetic, now)
		if downLimit > current {
			downLimit = current
		}
		minAllowed, reason, message := r.Min, "TooFewReplicas", "the desired replica count is less than the minimum replica count"
		bound := minAllowed
		if minAllowed < downLimit {
			minAllowed, reason, message, bound = downLimit, "ScaleDownLimit", "the desired replica count is decreasing faster than the maximum scale rate", downLimit
		} else {
			policy = -1
		}
		if desired < minAllowed {
			return Limit{Replicas: minAllowed, Reason: reason, Message: message, Bound: bound, Policy: policy}
		}
	}
	return withinRange(desired)
}

// changeInPeriod sums the changes of the events inside the last period,
// exactly; upstream sums them in int32.
func changeInPeriod(periodSeconds int32, events []ScaleEvent, now Clock) int64 {
	cutoff := now().Add(-time.Second * time.Duration(periodSeconds))
	var sum int64
	for _, e := range events {
		if e.Timestamp.After(cutoff) {
			sum += int64(e.Change)
		}
	}
	return sum
}

// periodStart is the size the target had when a policy's period began:
// exact, or wrapped to int32 as upstream computes it.
func (h *History) periodStart(current, periodSeconds int32, upstream bool, now Clock) int64 {
	added := changeInPeriod(periodSeconds, h.ScaleUpEvents, now)
	removed := changeInPeriod(periodSeconds, h.ScaleDownEvents, now)
	if upstream {
		return int64(current - int32(added) + int32(removed))
	}
	return int64(current) - added + removed
}

func (h *History) scaleUpLimit(current int32, rules *autoscalingv2.HPAScalingRules, upstream bool, now Clock) (int32, int) {
	var result int32
	var pick func(a, b int32) int32
	switch *rules.SelectPolicy {
	case autoscalingv2.DisabledPolicySelect:
		return current, -1
	case autoscalingv2.MinChangePolicySelect:
		result, pick = math.MaxInt32, minInt32
	default:
		result, pick = math.MinInt32, maxInt32
	}
	var proposed int32
	chosen := -1
	for i, p := range rules.Policies {
		start := h.periodStart(current, p.PeriodSeconds, upstream, now)
		switch p.Type {
		case autoscalingv2.PodsScalingPolicy:
			if upstream {
				proposed = int32(start) + p.Value
			} else {
				proposed = clamp32(start + int64(p.Value))
			}
		case autoscalingv2.PercentScalingPolicy:
			// Rounded up, or a small target could never grow.
			proposed = arith.ToInt32(math.Ceil(float64(start)*(1+float64(p.Value)/100)), upstream)
		}
		if next := pick(result, proposed); next != result || chosen < 0 {
			result, chosen = next, i
		}
	}
	return result, chosen
}

func (h *History) scaleDownLimit(current int32, rules *autoscalingv2.HPAScalingRules, upstream bool, now Clock) (int32, int) {
	var result int32
	var pick func(a, b int32) int32
	switch *rules.SelectPolicy {
	case autoscalingv2.DisabledPolicySelect:
		return current, -1
	case autoscalingv2.MinChangePolicySelect:
		result, pick = math.MinInt32, maxInt32
	default:
		result, pick = math.MaxInt32, minInt32
	}
	var proposed int32
	chosen := -1
	for i, p := range rules.Policies {
		start := h.periodStart(current, p.PeriodSeconds, upstream, now)
		switch p.Type {
		case autoscalingv2.PodsScalingPolicy:
			if upstream {
				proposed = int32(start) - p.Value
			} else {
				proposed = clamp32(start - int64(p.Value))
			}
		case autoscalingv2.PercentScalingPolicy:
			proposed = arith.ToInt32(math.Trunc(float64(start)*(1-float64(p.Value)/100)), upstream)
		}
		if next := pick(result, proposed); next != result || chosen < 0 {
			result, chosen = next, i
		}
	}
	return result, chosen
}

func minInt32(a, b int32) int32 { return min(a, b) }
func maxInt32(a, b int32) int32 { return max(a, b) }

// RecordScale remembers a rescale from prev to next for the policies of an
// autoscaler with behavior (one without keeps no events). The new event
// takes the slot of one older than the direction's longest policy period.
func (h *History) RecordScale(b *autoscalingv2.HorizontalPodAutoscalerBehavior, prev, next int32, now Clock) {
	if b == nil {
		return
	}
	events, rules, change := &h.ScaleDownEvents, b.ScaleDown, prev-next
	if next > prev {
		events, rules, change = &h.ScaleUpEvents, b.ScaleUp, next-prev
	}
	var longest int32
	for _, p := range rules.Policies {
		longest = max(longest, p.PeriodSeconds)
	}
	cutoff := now().Add(-time.Second * time.Duration(longest))
	foundOld, oldIndex := false, 0
	for i := range *events {
		if (*events)[i].Timestamp.Before(cutoff) {
			(*events)[i].Outdated = true
		}
	}
	for i, e := range *events {
		if e.Outdated {
			foundOld, oldIndex = true, i
		}
	}
	event := ScaleEvent{Change: change, Timestamp: now()}
	if foundOld {
		(*events)[oldIndex] = event
		return
	}
	*events = append(*events, event)
}
