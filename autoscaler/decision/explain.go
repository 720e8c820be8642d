package decision

import (
	"github.com/metricscale/metricscale/autoscaler/behavior"
	"github.com/metricscale/metricscale/autoscaler/replicas"
)

// Skip says why a reconcile read no metric.
type Skip uint8

// The reasons to read no metric.
const (
	SkipNone Skip = iota
	// SkipScaleUnreadable: the target's scale could not be read.
	SkipScaleUnreadable
	// SkipAtZero: the target is at zero and not scaled there by the
	// autoscaler: scaling is disabled.
	SkipAtZero
	// SkipAboveMax and SkipBelowMin: the current size is outside
	// minReplicas..maxReplicas and goes to the nearest bound.
	SkipAboveMax
	SkipBelowMin
	// SkipNoSelector: the scale has no selector, or one that does not parse.
	SkipNoSelector
)

// Rule names what produced a reconcile's final count (Explanation.Rule).
type Rule string

// The rules, as `simulate --explain` prints them.
const (
	RuleScaleUnreadable Rule = "scale unreadable"
	RuleScalingDisabled Rule = "scaling disabled at zero"
	RuleNoSelector      Rule = "no selector"
	RuleMetricsFailed   Rule = "metrics failed"
	RuleMinMax          Rule = "min/max clamp"
	RuleScaleUpLimit    Rule = "scale-up limit"
	RuleScaleUpPolicy   Rule = "scale-up policy"
	RuleScaleDownPolicy Rule = "scale-down policy"
	RuleStabilization   Rule = "stabilization window"
	RuleFallback        Rule = "fallback"
	RuleActivation      Rule = "activation/cooldown"
	RuleSchedule        Rule = "schedule"
	RuleTolerance       Rule = "tolerance"
	RuleMissingPods     Rule = "missing/unready pods"
	RuleMetric          Rule = "metric"
)

// Explanation is how one reconcile went from its metrics to its count. It
// is filled from values the decision computes anyway; nothing reads it
// back, so it changes no decision.
type Explanation struct {
	// Current is the target's size as read.
	Current int32
	// Skipped says why no metric was read (SkipNone when they were).
	Skipped Skip
	// Winner is the index in spec.metrics of the metric whose proposal was
	// the largest (-1 when none answered), and Proposal the proposal the
	// rules started from: that metric's, or the fallback's when Fallback.
	Winner   int
	Proposal int32
	Fallback bool
	// Blocked: a metric failed and the others would not scale up (or every
	// metric failed): the count stays.
	Blocked bool
	// Behavior says the spec has behavior (policies) rather than the older
	// algorithm (a scale-up cap of max(2×current, 4)).
	Behavior bool
	// Stabilized is the count after the stabilization window, and
	// Stabilization that rule's verdict (its Window).
	Stabilized    int32
	Stabilization behavior.Limit
	// Limit is the verdict of min/max and the rate rules on Stabilized.
	Limit behavior.Limit
	// Activation: spec.scaleToZero changed the count (held at zero below
	// the activation values, at least one above them, one until the
	// cooldown ends, zero after it).
	Activation bool
	// MinRaised: coming back from zero, minReplicas raised the count.
	MinRaised bool
	// Schedule is set when a window of spec.schedules set the count: which
	// one raised the floor to what.
	Schedule string
	// Desired is the count decided.
	Desired int32
}

// Rule names what produced the final count, looking from the last rule
// that changed it back to the metric that proposed it.
func (e *Explanation) Rule(metrics []MetricResult) Rule {
	switch e.Skipped {
	case SkipScaleUnreadable:
		return RuleScaleUnreadable
	case SkipAtZero:
		return RuleScalingDisabled
	case SkipAboveMax, SkipBelowMin:
		if e.Schedule != "" {
			return RuleSchedule
		}
		return RuleMinMax
	case SkipNoSelector:
		return RuleNoSelector
	}
	switch {
	case e.Blocked:
		return RuleMetricsFailed
	case e.Schedule != "":
		return RuleSchedule
	case e.MinRaised:
		return RuleMinMax
	case e.Activation:
		return RuleActivation
	case e.Limit.Replicas != e.Stabilized:
		switch e.Limit.Reason {
		case "ScaleUpLimit":
			if e.Behavior {
				return RuleScaleUpPolicy
			}
			return RuleScaleUpLimit
		case "ScaleDownLimit":
			return RuleScaleDownPolicy
		}
		return RuleMinMax
	case e.Stabilized != e.Proposal:
		return RuleStabilization
	case e.Fallback:
		return RuleFallback
	}
	if e.Winner >= 0 && e.Winner < len(metrics) {
		switch metrics[e.Winner].Why.Rule {
		case replicas.RuleTolerance:
			return RuleTolerance
		case replicas.RuleRebalanced, replicas.RuleRebalancedHold:
			return RuleMissingPods
		}
	}
	return RuleMetric
}
