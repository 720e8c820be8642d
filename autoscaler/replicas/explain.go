package replicas

import "fmt"

// Rule names the step of the calculation that produced a metric's proposal.
type Rule uint8

// The rules, in the order the calculation meets them.
const (
	// RuleNone: no proposal (the metric failed before the calculation).
	RuleNone Rule = iota
	// RuleTolerance: the usage ratio is within the tolerance; the current
	// count is proposed.
	RuleTolerance
	// RuleRatio: the usage ratio times the ready pods (or, for an Object or
	// External Value metric, times the running and ready pods), rounded up.
	RuleRatio
	// RuleAverage: an Object or External AverageValue metric: the usage
	// divided by the target per pod, rounded up.
	RuleAverage
	// RuleFromZero: scaling from zero replicas: the usage ratio rounded up,
	// without pods or tolerance.
	RuleFromZero
	// RuleRebalanced: missing pods (counted at the target on a scale-down,
	// at zero on a scale-up) and unready pods (at zero on a scale-up) were
	// filled in, and the new ratio times every counted pod decided.
	RuleRebalanced
	// RuleRebalancedHold: once missing or unready pods were filled in, the
	// ratio fell within the tolerance or would have scaled the other way:
	// the current count is proposed.
	RuleRebalancedHold
)

func (r Rule) String() string {
	switch r {
	case RuleTolerance:
		return "tolerance"
	case RuleRatio:
		return "ratio"
	case RuleAverage:
		return "average"
	case RuleFromZero:
		return "from zero"
	case RuleRebalanced:
		return "missing/unready pods"
	case RuleRebalancedHold:
		return "missing/unready pods hold"
	}
	return "none"
}

// Trace is how the last calculation arrived at its proposal, from values
// it computed anyway: no decision depends on it.
type Trace struct {
	Rule Rule
	// Ratio is the usage ratio compared with the tolerance; NewRatio the
	// ratio once missing and unready pods were filled in.
	Ratio, NewRatio float64
	// Usage and Target are in milli-units (a utilization in percent).
	Usage, Target int64
	// Ready, Unready, Missing and Ignored count the pods by what their
	// samples may say (pod-based metrics), or Ready the running and ready
	// pods an Object or External Value ratio applies to.
	Ready, Unready, Missing, Ignored int
	// Counted is how many samples the rebalanced ratio was multiplied by.
	Counted int
	// Tolerance is the band the ratio was compared with.
	Tolerance Tolerances
}

// Trace returns how the last calculation made its proposal.
func (c *Calculator) Trace() Trace { return c.trace }

func (t Trace) String() string {
	switch t.Rule {
	case RuleTolerance:
		return fmt.Sprintf("ratio %.3f within tolerance %s: keep the current count", t.Ratio, t.Tolerance)
	case RuleRatio:
		return fmt.Sprintf("ratio %.3f × %d ready pods", t.Ratio, t.Ready)
	case RuleAverage:
		return fmt.Sprintf("ratio %.3f outside tolerance %s: usage / target per pod", t.Ratio, t.Tolerance)
	case RuleFromZero:
		return fmt.Sprintf("from zero replicas: ratio %.3f rounded up", t.Ratio)
	case RuleRebalanced:
		return fmt.Sprintf("ratio %.3f; with %d missing and %d unready pods filled in %.3f × %d pods", t.Ratio, t.Missing, t.Unready, t.NewRatio, t.Counted)
	case RuleRebalancedHold:
		return fmt.Sprintf("ratio %.3f; with %d missing and %d unready pods filled in %.3f, within tolerance or the other way: keep the current count", t.Ratio, t.Missing, t.Unready, t.NewRatio)
	}
	return "no proposal"
}
