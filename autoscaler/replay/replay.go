// Package replay turns a recording the autoscaler served (package record)
// into a scenario file and replays it with the simulator, to check that the
// replay makes the recorded decisions. It is the CLI's side of recording:
// the controller links package record only, not the simulator.
package replay

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"sigs.k8s.io/yaml"

	"github.com/metricscale/metricscale/autoscaler/record"
	"github.com/metricscale/metricscale/autoscaler/scenario"
)

// YAML writes the recording as a scenario file: the scenario, with each
// step preceded by a comment saying what the controller decided there,
// and the warnings, if any, at the top.
func YAML(r *record.Recording) ([]byte, error) {
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
			b.WriteString("# " + Comment(r.Recorded[i]) + "\n")
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
func Comment(d record.Decision) string {
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

// Check parses data (the recording's YAML, as written) as a scenario,
// replays it and lists where the replay decided otherwise than the recorded
// reconciles (scenario.DecisionDisagreements).
func Check(ctx context.Context, r *record.Recording, data []byte) ([]string, error) {
	s, err := scenario.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("the recording does not parse: %w", err)
	}
	got, err := scenario.Replay(ctx, s)
	if err != nil {
		return nil, err
	}
	return scenario.DecisionDisagreements(got, Results(r.Recorded)), nil
}

// Results are recorded decisions as the step results a replay compares
// with: what a recording keeps of each step.
func Results(recorded []record.Decision) []scenario.StepResult {
	out := make([]scenario.StepResult, len(recorded))
	for i, d := range recorded {
		out[i] = scenario.StepResult{At: d.At, Replicas: d.Replicas, Rescaled: d.Rescaled, Error: d.Error,
			Status: autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: d.CurrentReplicas, DesiredReplicas: d.DesiredReplicas}}
	}
	return out
}
