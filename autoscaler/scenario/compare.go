package scenario

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ReadResults parses JSON Lines of step results.
func ReadResults(data []byte) ([]StepResult, error) {
	var out []StepResult
	for i, line := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var r StepResult
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// Disagreements lists, step by step, where got differs from want under the
// agreement rule of docs/scenarios.md; none means they agree.
// initial is the scenario's starting status (for lastScaleTime at step 0).
func Disagreements(initial autoscalingv2.HorizontalPodAutoscalerStatus, got, want []StepResult) []string {
	var diffs []string
	if len(got) != len(want) {
		diffs = append(diffs, fmt.Sprintf("%d steps, want %d", len(got), len(want)))
	}
	prevGot, prevWant := initial, initial
	for i := range min(len(got), len(want)) {
		g, w := got[i], want[i]
		add := func(format string, args ...any) {
			diffs = append(diffs, fmt.Sprintf("step %d (at %s): ", i, w.At)+fmt.Sprintf(format, args...))
		}
		if g.Replicas != w.Replicas {
			add("replicas %d, want %d", g.Replicas, w.Replicas)
		}
		if g.Rescaled != w.Rescaled {
			add("rescaled %v, want %v", g.Rescaled, w.Rescaled)
		}
		if (g.Error == "") != (w.Error == "") {
			add("error %q, want %q", g.Error, w.Error)
		}
		gs, ws := g.Status, w.Status
		if gs.CurrentReplicas != ws.CurrentReplicas {
			add("status.currentReplicas %d, want %d", gs.CurrentReplicas, ws.CurrentReplicas)
		}
		if gs.DesiredReplicas != ws.DesiredReplicas {
			add("status.desiredReplicas %d, want %d", gs.DesiredReplicas, ws.DesiredReplicas)
		}
		if gc, wc := scaleTimeChanged(prevGot, gs), scaleTimeChanged(prevWant, ws); gc != wc {
			add("lastScaleTime changed %v, want %v", gc, wc)
		}
		if d := metricsDiff(gs.CurrentMetrics, ws.CurrentMetrics); d != "" {
			add("status.currentMetrics: %s", d)
		}
		if gc, wc := conditionSet(gs), conditionSet(ws); !slices.Equal(gc, wc) {
			add("conditions %v, want %v", gc, wc)
		}
		prevGot, prevWant = gs, ws
	}
	return diffs
}

func scaleTimeChanged(prev, cur autoscalingv2.HorizontalPodAutoscalerStatus) bool {
	switch {
	case prev.LastScaleTime == nil && cur.LastScaleTime == nil:
		return false
	case prev.LastScaleTime == nil || cur.LastScaleTime == nil:
		return true
	}
	return !prev.LastScaleTime.Equal(cur.LastScaleTime)
}

func conditionSet(s autoscalingv2.HorizontalPodAutoscalerStatus) []string {
	out := make([]string, 0, len(s.Conditions))
	for _, c := range s.Conditions {
		out = append(out, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	slices.Sort(out)
	return out
}

func metricsDiff(got, want []autoscalingv2.MetricStatus) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d entries, want %d: got %s, want %s", len(got), len(want), mustJSON(got), mustJSON(want))
	}
	for i := range got {
		g, w := canonicalMetric(got[i]), canonicalMetric(want[i])
		if g != w {
			return fmt.Sprintf("[%d] %s, want %s", i, g, w)
		}
	}
	return ""
}

// canonicalMetric renders a metric status with quantities in canonical
// form, so that 500m and 0.5 compare equal.
func canonicalMetric(m autoscalingv2.MetricStatus) string {
	m = *m.DeepCopy()
	canon := func(v *autoscalingv2.MetricValueStatus) {
		for _, q := range []*resource.Quantity{v.Value, v.AverageValue} {
			if q != nil {
				*q = *resource.NewMilliQuantity(q.MilliValue(), resource.DecimalSI)
			}
		}
	}
	switch {
	case m.Object != nil:
		canon(&m.Object.Current)
	case m.Pods != nil:
		canon(&m.Pods.Current)
	case m.Resource != nil:
		canon(&m.Resource.Current)
	case m.ContainerResource != nil:
		canon(&m.ContainerResource.Current)
	case m.External != nil:
		canon(&m.External.Current)
	}
	return mustJSON(m)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return string(b)
}
