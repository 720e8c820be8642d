// Package metrictarget pairs a metric spec with its status entry and
// renders them the way `kubectl get hpa` prints targets.
package metrictarget

import (
	"fmt"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
)

// Pair is one metric: its name, its target and its current value (nil
// when it could not be computed).
type Pair struct {
	Name    string
	Target  autoscalingv2.MetricTarget
	Current *autoscalingv2.MetricValueStatus
}

// Of pairs a spec with its status (nil when there is none). ok is false
// for a spec of no known source type.
func Of(spec autoscalingv2.MetricSpec, st *autoscalingv2.MetricStatus) (p Pair, ok bool) {
	if st == nil {
		st = &autoscalingv2.MetricStatus{}
	}
	switch {
	case spec.Resource != nil:
		p = Pair{Name: string(spec.Resource.Name), Target: spec.Resource.Target}
		if st.Resource != nil {
			p.Current = &st.Resource.Current
		}
	case spec.ContainerResource != nil:
		p = Pair{Name: spec.ContainerResource.Container + "/" + string(spec.ContainerResource.Name), Target: spec.ContainerResource.Target}
		if st.ContainerResource != nil {
			p.Current = &st.ContainerResource.Current
		}
	case spec.Pods != nil:
		p = Pair{Name: spec.Pods.Metric.Name, Target: spec.Pods.Target}
		if st.Pods != nil {
			p.Current = &st.Pods.Current
		}
	case spec.Object != nil:
		o := spec.Object
		p = Pair{Name: fmt.Sprintf("%s/%s %s", o.DescribedObject.Kind, o.DescribedObject.Name, o.Metric.Name), Target: o.Target}
		if st.Object != nil {
			p.Current = &st.Object.Current
		}
	case spec.External != nil:
		p = Pair{Name: spec.External.Metric.Name, Target: spec.External.Target}
		if st.External != nil {
			p.Current = &st.External.Current
		}
	default:
		return Pair{Name: string(spec.Type)}, false
	}
	return p, true
}

// Values returns the current value and the target as numbers in the
// target's unit (percent for a utilization); hasCurrent is false when the
// metric has no current value.
func (p Pair) Values() (current, target float64, hasCurrent bool) {
	t, c := p.Target, p.Current
	if c == nil {
		c = &autoscalingv2.MetricValueStatus{}
	}
	switch {
	case t.AverageValue != nil:
		target = t.AverageValue.AsApproximateFloat64()
		if c.AverageValue != nil {
			return c.AverageValue.AsApproximateFloat64(), target, true
		}
	case t.AverageUtilization != nil:
		target = float64(*t.AverageUtilization)
		if c.AverageUtilization != nil {
			return float64(*c.AverageUtilization), target, true
		}
	case t.Value != nil:
		target = t.Value.AsApproximateFloat64()
		if c.Value != nil {
			return c.Value.AsApproximateFloat64(), target, true
		}
	}
	return 0, target, false
}

// String renders current/target: `80%/50%`, `45/30 (avg)`, `<unknown>/100`.
func (p Pair) String() string {
	t, c := p.Target, p.Current
	if c == nil {
		c = &autoscalingv2.MetricValueStatus{}
	}
	current := "<unknown>"
	switch {
	case t.AverageValue != nil:
		if c.AverageValue != nil {
			current = c.AverageValue.String()
		}
		return fmt.Sprintf("%s/%s (avg)", current, t.AverageValue.String())
	case t.AverageUtilization != nil:
		if c.AverageUtilization != nil {
			current = fmt.Sprintf("%d%%", *c.AverageUtilization)
		}
		return fmt.Sprintf("%s/%d%%", current, *t.AverageUtilization)
	case t.Value != nil:
		if c.Value != nil {
			current = c.Value.String()
		}
		return fmt.Sprintf("%s/%s", current, t.Value.String())
	}
	return "<unknown>"
}

// Targets renders every metric as `kubectl get hpa` does its TARGETS column.
func Targets(specs []autoscalingv2.MetricSpec, statuses []autoscalingv2.MetricStatus) string {
	if len(specs) == 0 {
		return "<none>"
	}
	parts := make([]string, 0, len(specs))
	for i, spec := range specs {
		var st *autoscalingv2.MetricStatus
		if i < len(statuses) {
			st = &statuses[i]
		}
		p, ok := Of(spec, st)
		if !ok {
			parts = append(parts, "<unknown>")
			continue
		}
		parts = append(parts, p.String())
	}
	return strings.Join(parts, ", ")
}
