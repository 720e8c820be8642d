package record

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/metricscale/metricscale/autoscaler/scenario"
)

// YAML writes the recording as a scenario file: the scenario, with each
// step preceded by a comment saying what the controller decided there,
// and the warnings, if any, at the top.
func (r *Recording) YAML() ([]byte, error) {
	var b bytes.Buffer
	doc := r.Scenario
	name := ""
	if doc.Autoscaler != nil {
		name = doc.Autoscaler.Metadata.Namespace + "/" + doc.Autoscaler.Metadata.Name
	}
	fmt.Fprintf(&b, "# MetricAutoscaler %s: %d reconciles recorded by the metricscale autoscaler.\n", name, len(doc.Steps))
	b.WriteString("# Replay: autoscaler simulate -f FILE [-o table] [--explain]. Each step's comment is the recorded decision.\n")
	for _, w := range r.Warnings {
		fmt.Fprintf(&b, "# warning: %s\n", oneLine(w))
	}
	header := struct {
		Start        any `json:"start"`
		Controller   any `json:"controller"`
		FeatureGates any `json:"featureGates,omitempty"`
		Autoscaler   any `json:"autoscaler"`
	}{doc.Start, doc.Controller, doc.FeatureGates, doc.Autoscaler}
	data, err := yaml.Marshal(header)
	if err != nil {
		return nil, err
	}
	b.Write(data)
	b.WriteString("steps:\n")
	for i := range doc.Steps {
		if i < len(r.Recorded) {
			b.WriteString("# " + r.Recorded[i].Comment() + "\n")
		}
		data, err := yaml.Marshal([]any{doc.Steps[i]})
		if err != nil {
			return nil, err
		}
		b.Write(data)
	}
	return b.Bytes(), nil
}

// Comment says what a reconcile decided, in one line.
func (d Decision) Comment() string {
	change := fmt.Sprintf("%d", d.Replicas)
	if d.Rescaled {
		change = fmt.Sprintf("%d → %d", d.CurrentReplicas, d.Replicas)
	}
	s := fmt.Sprintf("%s (%s): replicas %s, desired %d [%s]", d.At, d.Time, change, d.DesiredReplicas, d.Rule)
	if d.Error != "" {
		s += "; error: " + oneLine(d.Error)
	}
	return s
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

// Replay parses data (the recording's YAML, as written) as a scenario,
// replays it and lists where the replay decided otherwise (Compare).
func (r *Recording) Replay(ctx context.Context, data []byte) ([]string, error) {
	s, err := scenario.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("the recording does not parse: %w", err)
	}
	got, err := scenario.Replay(ctx, s)
	if err != nil {
		return nil, err
	}
	return Compare(r.Recorded, got), nil
}

// Compare lists, step by step, where a replay decided otherwise than the
// recorded reconciles: the replicas, whether it rescaled, the current and
// desired counts in the status, and whether it failed.
func Compare(recorded []Decision, replayed []scenario.StepResult) []string {
	var diffs []string
	if len(recorded) != len(replayed) {
		diffs = append(diffs, fmt.Sprintf("%d steps replayed, %d recorded", len(replayed), len(recorded)))
	}
	for i := range min(len(recorded), len(replayed)) {
		w, g := recorded[i], replayed[i]
		var d []string
		if g.Replicas != w.Replicas || g.Rescaled != w.Rescaled {
			d = append(d, fmt.Sprintf("replicas %d (rescaled %v), recorded %d (rescaled %v)", g.Replicas, g.Rescaled, w.Replicas, w.Rescaled))
		}
		if g.Status.DesiredReplicas != w.DesiredReplicas || g.Status.CurrentReplicas != w.CurrentReplicas {
			d = append(d, fmt.Sprintf("current/desired %d/%d, recorded %d/%d", g.Status.CurrentReplicas, g.Status.DesiredReplicas, w.CurrentReplicas, w.DesiredReplicas))
		}
		if (g.Error == "") != (w.Error == "") {
			d = append(d, fmt.Sprintf("error %q, recorded %q", g.Error, w.Error))
		}
		if len(d) > 0 {
			diffs = append(diffs, fmt.Sprintf("step %d (at %s): %s", i, w.At, strings.Join(d, "; ")))
		}
	}
	return diffs
}
