package scenario

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"

	"github.com/metricscale/metricscale/autoscaler/decision"
	"github.com/metricscale/metricscale/autoscaler/metrictarget"
)

// Explained is a step's explanation in the JSON output of
// `simulate --explain`: each metric's proposal and how it was made, then
// each rule the largest proposal went through, and the rule that
// produced the final count.
type Explained struct {
	// Rule is what produced the final count (decision.Rule).
	Rule    string            `json:"rule"`
	Skipped string            `json:"skipped,omitempty"`
	Metrics []ExplainedMetric `json:"metrics,omitempty"`
	// Proposal is the count the rules started from: the largest metric
	// proposal (From names the metric), or the fallback's.
	Proposal *int32 `json:"proposal,omitempty"`
	From     string `json:"from,omitempty"`
	// Stabilized is the count after the stabilization window (Window).
	Stabilized *int32 `json:"stabilized,omitempty"`
	Window     string `json:"window,omitempty"`
	// Limited is the count after min/max and the rate rules; Limit is the
	// ScalingLimited reason when it changed the count, Policy the policy
	// (or cap) that set the bound.
	Limited *int32 `json:"limited,omitempty"`
	Limit   string `json:"limit,omitempty"`
	Policy  string `json:"policy,omitempty"`
	// Schedule says which window of spec.schedules set the count, and the
	// floor it raised.
	Schedule string `json:"schedule,omitempty"`
	Desired  int32  `json:"desired"`
}

// ExplainedMetric is one spec metric's proposal.
type ExplainedMetric struct {
	Name     string `json:"name"`
	Proposal int32  `json:"proposal"`
	// Rule is how the proposal was made (replicas.Rule), or "failed".
	Rule   string `json:"rule"`
	Detail string `json:"detail"`
}

// Explain describes a step's decision.
func Explain(r *StepResult) *Explained {
	e := &r.Explain
	out := &Explained{Rule: string(e.Rule(r.Metrics)), Desired: e.Desired, Schedule: e.Schedule}
	switch e.Skipped {
	case decision.SkipScaleUnreadable:
		out.Skipped = "the target's scale could not be read"
	case decision.SkipAtZero:
		out.Skipped = "the target is at zero and was not scaled there by the autoscaler"
	case decision.SkipAboveMax:
		out.Skipped = fmt.Sprintf("%d replicas are above maxReplicas", e.Current)
	case decision.SkipBelowMin:
		out.Skipped = fmt.Sprintf("%d replicas are below minReplicas", e.Current)
		if e.Schedule != "" {
			out.Skipped = fmt.Sprintf("%d replicas are below the floor of spec.schedules", e.Current)
		}
	case decision.SkipNoSelector:
		out.Skipped = "the target's scale has no usable selector"
	}
	for i, m := range r.Metrics {
		em := ExplainedMetric{Proposal: m.Proposal, Rule: m.Why.Rule.String(), Detail: m.Why.String()}
		switch {
		case i < len(r.Spec):
			em.Name = metricLabel(r.Spec[i])
		case r.Formula != nil:
			em.Name = "formula " + r.Formula.Name
			em.Detail = fmt.Sprintf("%s = %s; %s", r.Formula.Expression, strconv.FormatFloat(m.Value, 'g', -1, 64), em.Detail)
		default:
			continue
		}
		switch {
		case m.Err != nil:
			em.Rule, em.Detail = "failed", m.Err.Error()
		case m.Input != "":
			em.Rule, em.Detail = "formula input", fmt.Sprintf("%s = %s", m.Input, strconv.FormatFloat(m.Value, 'g', -1, 64))
		}
		out.Metrics = append(out.Metrics, em)
	}
	if e.Skipped != decision.SkipNone || e.Blocked {
		return out
	}
	out.Proposal = &e.Proposal
	switch {
	case e.Fallback:
		out.From = "fallback"
	case e.Winner >= 0 && e.Winner < len(r.Spec):
		out.From = fmt.Sprintf("spec.metrics[%d] %s", e.Winner, metricLabel(r.Spec[e.Winner]))
	case e.Winner == len(r.Spec) && r.Formula != nil:
		out.From = "spec.formula " + r.Formula.Name
	}
	out.Stabilized, out.Window = &e.Stabilized, e.Stabilization.Window.String()
	out.Limited = &e.Limit.Replicas
	if e.Limit.Replicas != e.Stabilized {
		out.Limit = e.Limit.Reason
		out.Policy = policyName(e, r.Behavior)
		if e.Schedule != "" && e.Limit.Reason == "TooFewReplicas" {
			// The minimum was a schedule's floor: ScalingLimited says so.
			out.Limit = decision.ReasonScheduledMinimum
			out.Policy = fmt.Sprintf("the floor of spec.schedules, %d", e.Limit.Replicas)
		}
	}
	return out
}

// policyName names the rate rule that set the bound of a limited count.
func policyName(e *decision.Explanation, b *autoscalingv2.HorizontalPodAutoscalerBehavior) string {
	l := e.Limit
	switch l.Reason {
	case "TooManyReplicas":
		return fmt.Sprintf("maxReplicas %d", l.Replicas)
	case "TooFewReplicas":
		return fmt.Sprintf("minReplicas %d", l.Replicas)
	}
	if !e.Behavior {
		return fmt.Sprintf("max(2 × %d current, 4) = %d", e.Current, l.Bound)
	}
	var rules *autoscalingv2.HPAScalingRules
	if b != nil {
		rules = b.ScaleDown
		if l.Reason == "ScaleUpLimit" {
			rules = b.ScaleUp
		}
	}
	if rules == nil || l.Policy < 0 || l.Policy >= len(rules.Policies) {
		return fmt.Sprintf("bound %d (no further change allowed yet)", l.Bound)
	}
	p := rules.Policies[l.Policy]
	unit := ""
	if p.Type == autoscalingv2.PercentScalingPolicy {
		unit = "%"
	}
	return fmt.Sprintf("%s %d%s per %ds (selectPolicy %s): bound %d", p.Type, p.Value, unit, p.PeriodSeconds, selectPolicy(rules), l.Bound)
}

func selectPolicy(r *autoscalingv2.HPAScalingRules) string {
	if r.SelectPolicy == nil {
		return string(autoscalingv2.MaxChangePolicySelect)
	}
	return string(*r.SelectPolicy)
}

// metricLabel names a spec metric by its type and name.
func metricLabel(spec autoscalingv2.MetricSpec) string {
	p, _ := metrictarget.Of(spec, nil)
	return string(spec.Type) + " " + p.Name
}

// WriteExplained prints each step's table line followed by its
// explanation, one indented line per metric and per rule.
func WriteExplained(w io.Writer, results []StepResult) error {
	var b strings.Builder
	for i := range results {
		r := &results[i]
		e := Explain(r)
		change := fmt.Sprintf("%d", r.Replicas)
		if r.Rescaled {
			change = fmt.Sprintf("%d → %d", r.CurrentReplicas, r.Replicas)
		}
		fmt.Fprintf(&b, "%s  replicas %s  [%s]\n", r.At, change, e.Rule)
		if e.Skipped != "" {
			fmt.Fprintf(&b, "    no metric read: %s\n", e.Skipped)
		}
		for j, m := range e.Metrics {
			cur := ""
			if j < len(r.Spec) {
				var st *autoscalingv2.MetricStatus
				if j < len(r.Status.CurrentMetrics) {
					st = &r.Status.CurrentMetrics[j]
				}
				if p, ok := metrictarget.Of(r.Spec[j], st); ok {
					cur = " " + p.String()
				}
			}
			if j >= len(r.Spec) {
				// spec.formula, after the metrics.
				if m.Rule == "failed" {
					fmt.Fprintf(&b, "    %s: failed: %s\n", m.Name, m.Detail)
					continue
				}
				fmt.Fprintf(&b, "    %s: %s: proposes %d\n", m.Name, m.Detail, m.Proposal)
				continue
			}
			switch m.Rule {
			case "failed":
				fmt.Fprintf(&b, "    metric %d %s: failed: %s\n", j, m.Name, m.Detail)
				continue
			case "formula input":
				fmt.Fprintf(&b, "    metric %d %s%s: formula input %s\n", j, m.Name, cur, m.Detail)
				continue
			}
			fmt.Fprintf(&b, "    metric %d %s%s: proposes %d (%s)\n", j, m.Name, cur, m.Proposal, m.Detail)
		}
		if r.Explain.Blocked {
			fmt.Fprintf(&b, "    a metric failed and the others would not scale up: no change\n")
		}
		if e.Proposal != nil {
			from := e.From
			if from == "" {
				from = "no metric above zero"
			}
			fmt.Fprintf(&b, "    largest proposal %d (%s)\n", *e.Proposal, from)
			fmt.Fprintf(&b, "    stabilization window %s: %d%s\n", e.Window, *e.Stabilized, held(*e.Stabilized, *e.Proposal, r.Explain.Stabilization.Reason))
			if e.Limit != "" {
				fmt.Fprintf(&b, "    limited to %d: %s (%s)\n", *e.Limited, e.Limit, e.Policy)
			}
			if r.Explain.MinRaised {
				fmt.Fprintf(&b, "    raised to minReplicas coming back from zero\n")
			}
		}
		if e.Schedule != "" {
			fmt.Fprintf(&b, "    %s\n", e.Schedule)
		}
		fmt.Fprintf(&b, "    decided %d\n", e.Desired)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func held(stabilized, proposal int32, reason string) string {
	if stabilized == proposal {
		return " (unchanged)"
	}
	return " (" + reason + ")"
}
