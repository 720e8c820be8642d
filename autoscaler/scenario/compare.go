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
	return disagreements(got, want, "expected", &initial)
}

// DecisionDisagreements lists, step by step, where a replay (got) decided
// otherwise than recorded reconciles (want) in what a recording keeps of
// each: the replicas, whether it rescaled, the status' current and desired
// counts, and whether it failed.
func DecisionDisagreements(got, recorded []StepResult) []string {
	return disagreements(got, recorded, "recorded", nil)
}

// disagreements is the one comparison of two runs: one line per step that
// differs, naming want's side as wantIs. With initial (the whole rule),
// lastScaleTime, the metrics and the conditions of the status count too.
func disagreements(got, want []StepResult, wantIs string, initial *autoscalingv2.HorizontalPodAutoscalerStatus) []string {
	var diffs []string
	if len(got) != len(want) {
		diffs = append(diffs, fmt.Sprintf("%d steps replayed, %d %s", len(got), len(want), wantIs))
	}
	var prevGot, prevWant autoscalingv2.HorizontalPodAutoscalerStatus
	if initial != nil {
		prevGot, prevWant = *initial, *initial
	}
	for i := range min(len(got), len(want)) {
		g, w := got[i], want[i]
		gs, ws := g.Status, w.Status
		var d []string
		if g.Replicas != w.Replicas || g.Rescaled != w.Rescaled {
			d = append(d, fmt.Sprintf("replicas %d (rescaled %v), %s %d (rescaled %v)", g.Replicas, g.Rescaled, wantIs, w.Replicas, w.Rescaled))
		}
		if gs.DesiredReplicas != ws.DesiredReplicas || gs.CurrentReplicas != ws.CurrentReplicas {
			d = append(d, fmt.Sprintf("current/desired %d/%d, %s %d/%d", gs.CurrentReplicas, gs.DesiredReplicas, wantIs, ws.CurrentReplicas, ws.DesiredReplicas))
		}
		if (g.Error == "") != (w.Error == "") {
			d = append(d, fmt.Sprintf("error %q, %s %q", g.Error, wantIs, w.Error))
		}
		if initial != nil {
			if gc, wc := scaleTimeChanged(prevGot, gs), scaleTimeChanged(prevWant, ws); gc != wc {
				d = append(d, fmt.Sprintf("lastScaleTime changed %v, %s %v", gc, wantIs, wc))
			}
			if m := metricsDiff(gs.CurrentMetrics, ws.CurrentMetrics); m != "" {
				d = append(d, "status.currentMetrics: "+m)
			}
			if gc, wc := conditionSet(gs), conditionSet(ws); !slices.Equal(gc, wc) {
				d = append(d, fmt.Sprintf("conditions %v, %s %v", gc, wantIs, wc))
			}
		}
		if len(d) > 0 {
			diffs = append(diffs, fmt.Sprintf("step %d (at %s): %s", i, w.At, strings.Join(d, "; ")))
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
