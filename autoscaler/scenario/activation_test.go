package scenario

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metricscale/metricscale/autoscaler/validation/validationtest"
)

// TestActivationScenarios replays the scale-to-zero scenarios; each step's
// expected size and activation state are the ones their comments derive.
func TestActivationScenarios(t *testing.T) {
	t.Parallel()
	type want struct {
		replicas int32
		active   bool
		// lastActive is lastActiveTime as an offset from the scenario's
		// start, "" when unset.
		lastActive string
		// condition is the Active condition, status/reason.
		condition string
	}
	const (
		above  = "True/AboveActivation"
		below  = "False/BelowActivation"
		failed = "False/MetricFailed"
	)
	for _, tc := range []struct {
		file  string
		steps []want
	}{
		{"activation-from-zero", []want{
			{0, false, "", below}, {0, false, "", below}, {2, true, "30s", above}, {4, true, "45s", above},
		}},
		{"activation-cooldown", []want{
			{3, true, "0s", above}, {1, false, "0s", below}, {1, false, "0s", below}, {1, false, "0s", below},
			{0, false, "0s", below}, {0, false, "0s", below},
		}},
		{"activation-restart", []want{
			{1, false, "-1m30s", below}, {1, false, "-1m30s", below}, {0, false, "-1m30s", below},
		}},
		{"activation-failing-metric", []want{
			{0, false, "", failed}, {0, false, "", failed}, {1, true, "30s", above}, {1, false, "30s", below},
			{1, false, "30s", failed}, {0, false, "30s", below},
		}},
		{"activation-fallback", []want{
			{0, false, "", failed}, {2, false, "", failed}, {1, false, "30s", below}, {1, false, "30s", below}, {0, false, "30s", below},
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			s, got := replayDoc(t, readTestdata(t, "metricautoscaler/"+tc.file+".yaml"))
			if len(got) != len(tc.steps) {
				t.Fatalf("%d steps, want %d", len(got), len(tc.steps))
			}
			for i, w := range tc.steps {
				r := got[i]
				if r.Replicas != w.replicas {
					t.Errorf("step %d (%s): replicas %d, want %d (%s)", i, r.At, r.Replicas, w.replicas, r.Reason)
				}
				z := r.ScaleToZero
				if z == nil {
					t.Fatalf("step %d (%s): no scaleToZero in the output", i, r.At)
				}
				last := ""
				if z.LastActiveTime != nil {
					last = z.LastActiveTime.Sub(s.Start.Time).String()
				}
				if z.Active != w.active || last != w.lastActive {
					t.Errorf("step %d (%s): active %v last active at %q, want %v %q", i, r.At, z.Active, last, w.active, w.lastActive)
				}
				cond := "absent"
				for _, c := range r.Status.Conditions {
					if c.Type == "Active" {
						cond = string(c.Status) + "/" + c.Reason
					}
				}
				if cond != w.condition {
					t.Errorf("step %d (%s): Active condition %s, want %s", i, r.At, cond, w.condition)
				}
				line, err := json.Marshal(r)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(line), `"scaleToZero":{"active":`) {
					t.Errorf("step %d: the JSON line does not show the activation state: %s", i, line)
				}
			}
		})
	}
}

// TestNoScaleToZeroNoOutput: without spec.scaleToZero the output has no
// scaleToZero key, and a target at zero it did not scale there is left
// alone, as an HPA leaves it.
func TestNoScaleToZeroNoOutput(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/metricautoscaler/activation-from-zero.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Replace(string(data), "    scaleToZero:\n      cooldownPeriod: 2m\n      activation:\n      - {metric: jobs_ready, value: \"5\"}\n", "", 1)
	if doc == string(data) {
		t.Fatal("the scenario's scaleToZero was not found")
	}
	s, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Replay(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range got {
		line, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(line), `"scaleToZero"`) {
			t.Errorf("%s: scaleToZero in the output without spec.scaleToZero: %s", r.At, line)
		}
		if r.Replicas != 0 {
			t.Errorf("%s: %d replicas; without scaleToZero a target at zero is left alone", r.At, r.Replicas)
		}
	}
}

// TestScaleToZeroSpecErrors: the simulator refuses what the CRD refuses
// (the shared table), at the field, in the autoscaler and in a step's edit.
func TestScaleToZeroSpecErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range validationtest.InvalidScaleToZeros() {
		doc := map[string]any{
			"start": "2026-01-01T00:00:00Z",
			"autoscaler": map[string]any{
				"apiVersion": "autoscaling.metricscale.dev/v1alpha1", "kind": "MetricAutoscaler",
				"metadata": map[string]any{"name": "workers", "namespace": "default"},
				"spec":     tc.Spec,
			},
			"steps": []any{map[string]any{"at": "0s", "scale": map[string]any{"replicas": 1, "selector": "app=workers"}, "pods": []any{}}},
		}
		data, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		want := "autoscaler." + tc.Field
		if _, err := Parse(data); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one at %s", tc.Name, err, want)
		}
	}
	data, err := os.ReadFile("testdata/metricautoscaler/activation-restart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	edit := string(data) + `- at: 1m
  autoscaler:
    spec:
      scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: nightly}
      minReplicas: 0
      maxReplicas: 10
      metrics:
      - type: External
        external:
          metric: {name: jobs_ready}
          target: {type: AverageValue, averageValue: "30"}
      scaleToZero:
        activation:
        - {metric: jobs_done, value: "5"}
`
	if _, err := Parse([]byte(edit)); err == nil || !strings.Contains(err.Error(), "steps[3].autoscaler.spec.scaleToZero.activation[0].metric") {
		t.Errorf("a step's edit: error %v, want one at steps[3].autoscaler.spec.scaleToZero.activation[0].metric", err)
	}
}

// TestActivationScenariosAreDocumented: docs/scenarios.md names each one.
func TestActivationScenariosAreDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/scenarios.md")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("testdata/metricautoscaler/activation-*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no activation scenarios: %v", err)
	}
	for _, f := range files {
		if name := strings.TrimSuffix(filepath.Base(f), ".yaml"); !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/scenarios.md does not describe testdata/metricautoscaler/%s", name)
		}
	}
}
