package scenario

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
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

// describeMetric renders a metric as `kubectl get hpa` does its targets.
func describeMetric(spec autoscalingv2.MetricSpec, cur *autoscalingv2.MetricStatus) string {
	var name, current, target string
	value := func(v *autoscalingv2.MetricValueStatus, avg bool) string {
		if v == nil {
			return "?"
		}
		switch {
		case v.AverageUtilization != nil && !avg:
			return fmt.Sprintf("%d%%", *v.AverageUtilization)
		case v.AverageValue != nil:
			return v.AverageValue.String()
		case v.Value != nil:
			return v.Value.String()
		}
		return "?"
	}
	targetOf := func(t autoscalingv2.MetricTarget) (string, bool) {
		switch {
		case t.AverageUtilization != nil && t.AverageValue == nil:
			return fmt.Sprintf("%d%%", *t.AverageUtilization), false
		case t.AverageValue != nil:
			return t.AverageValue.String() + " (avg)", true
		case t.Value != nil:
			return t.Value.String(), false
		}
		return "?", false
	}
	var avg bool
	var curVal *autoscalingv2.MetricValueStatus
	switch {
	case spec.Resource != nil:
		name = string(spec.Resource.Name)
		target, avg = targetOf(spec.Resource.Target)
		if cur != nil && cur.Resource != nil {
			curVal = &cur.Resource.Current
		}
	case spec.ContainerResource != nil:
		name = fmt.Sprintf("%s/%s", spec.ContainerResource.Container, spec.ContainerResource.Name)
		target, avg = targetOf(spec.ContainerResource.Target)
		if cur != nil && cur.ContainerResource != nil {
			curVal = &cur.ContainerResource.Current
		}
	case spec.Pods != nil:
		name = spec.Pods.Metric.Name
		target, avg = targetOf(spec.Pods.Target)
		if cur != nil && cur.Pods != nil {
			curVal = &cur.Pods.Current
		}
	case spec.Object != nil:
		name = fmt.Sprintf("%s/%s %s", spec.Object.DescribedObject.Kind, spec.Object.DescribedObject.Name, spec.Object.Metric.Name)
		target, avg = targetOf(spec.Object.Target)
		if cur != nil && cur.Object != nil {
			curVal = &cur.Object.Current
		}
	case spec.External != nil:
		name = spec.External.Metric.Name
		target, avg = targetOf(spec.External.Target)
		if cur != nil && cur.External != nil {
			curVal = &cur.External.Current
		}
	default:
		return fmt.Sprintf("%s ?", spec.Type)
	}
	current = value(curVal, avg)
	return fmt.Sprintf("%s %s/%s", name, current, target)
}
