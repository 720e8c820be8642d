package scenario

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	autoscalingv2 "k8s.io/api/autoscaling/v2"

	"github.com/metricscale/metricscale/autoscaler/metrictarget"
)

// WriteTable prints one readable line per step: the time, the replica
// change, each metric's current value against its target with its
// proposal, and what limited or explained the decision.
func WriteTable(w io.Writer, results []StepResult) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tREPLICAS\tMETRICS (current/target → proposal)\tWHY")
	for _, r := range results {
		change := fmt.Sprintf("%d", r.Replicas)
		if r.Rescaled {
			change = fmt.Sprintf("%d → %d", r.CurrentReplicas, r.Replicas)
		}
		var metrics []string
		for i, spec := range r.Spec {
			var cur *autoscalingv2.MetricStatus
			if i < len(r.Status.CurrentMetrics) {
				cur = &r.Status.CurrentMetrics[i]
			}
			m := describeMetric(spec, cur)
			if i < len(r.Metrics) {
				if r.Metrics[i].Err != nil {
					m += " → failed"
				} else {
					m += fmt.Sprintf(" → %d", r.Metrics[i].Proposal)
				}
			}
			metrics = append(metrics, m)
		}
		if len(metrics) == 0 {
			metrics = []string{"-"}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.At, change, strings.Join(metrics, "; "), why(r))
	}
	return tw.Flush()
}

// why names the reason that best explains a step.
func why(r StepResult) string {
	if r.Error != "" {
		return "error: " + r.Error
	}
	var parts []string
	if r.Rescaled && r.Reason != "" {
		parts = append(parts, r.Reason)
	}
	for _, c := range r.Status.Conditions {
		switch {
		case c.Type == autoscalingv2.ScalingLimited && c.Status == "True",
			c.Type == autoscalingv2.AbleToScale && c.Reason != "ReadyForNewScale" && c.Reason != "SucceededRescale",
			c.Type == autoscalingv2.ScalingActive && c.Status == "False":
			parts = append(parts, fmt.Sprintf("%s: %s", c.Type, c.Reason))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, "; ")
}

// describeMetric renders a metric as its name and current/target.
func describeMetric(spec autoscalingv2.MetricSpec, cur *autoscalingv2.MetricStatus) string {
	p, ok := metrictarget.Of(spec, cur)
	if !ok {
		return p.Name + " ?"
	}
	return p.Name + " " + p.String()
}
