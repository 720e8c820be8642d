package scenario

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestFallbackScenarios replays the fallback scenarios; each step's expected
// size and fallback state are the ones their comments derive.
func TestFallbackScenarios(t *testing.T) {
	t.Parallel()
	type want struct {
		replicas int32
		active   bool
		failures []int32
	}
	for _, tc := range []struct {
		file  string
		steps []want
	}{
		{"fallback-queue-down", []want{
			{3, false, nil}, {3, false, []int32{1}}, {3, false, []int32{2}},
			{7, true, []int32{3}}, {7, true, []int32{4}}, {8, true, []int32{5}}, {2, false, nil},
		}},
		{"fallback-partial-failure", []want{
			{4, false, nil}, {4, false, []int32{1}}, {5, true, []int32{2}}, {10, true, []int32{3}}, {1, false, nil},
		}},
		{"fallback-restart", []want{
			{6, true, []int32{3}}, {6, true, []int32{4}}, {7, false, nil},
		}},
		{"fallback-at-zero", []want{
			{0, false, []int32{1}}, {2, true, []int32{2}}, {0, false, nil},
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			_, got := replayDoc(t, readTestdata(t, "metricautoscaler/"+tc.file+".yaml"))
			if len(got) != len(tc.steps) {
				t.Fatalf("%d steps, want %d", len(got), len(tc.steps))
			}
			for i, w := range tc.steps {
				r := got[i]
				if r.Replicas != w.replicas {
					t.Errorf("step %d (%s): replicas %d, want %d", i, r.At, r.Replicas, w.replicas)
				}
				if r.Fallback == nil {
					t.Fatalf("step %d (%s): no fallback in the output", i, r.At)
				}
				var failures []int32
				for _, m := range r.Fallback.Metrics {
					failures = append(failures, m.Failures)
				}
				if r.Fallback.Active != w.active || !slices.Equal(failures, w.failures) {
					t.Errorf("step %d (%s): fallback active %v failures %v, want %v %v", i, r.At, r.Fallback.Active, failures, w.active, w.failures)
				}
				line, err := json.Marshal(r)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(line), `"fallback":{"active":`) {
					t.Errorf("step %d: the JSON line does not show the fallback: %s", i, line)
				}
			}
		})
	}
}

// TestNoFallbackNoOutput: without spec.fallback the output line has no
// fallback key, as before.
func TestNoFallbackNoOutput(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/metricautoscaler/fallback-queue-down.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Parse([]byte(strings.Replace(string(data), "    fallback: {failureThreshold: 3, replicas: 8}\n", "", 1)))
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
		if strings.Contains(string(line), `"fallback"`) {
			t.Errorf("%s: fallback in the output without spec.fallback: %s", r.At, line)
		}
		// Without fallback a failing queue keeps the size, as an HPA.
		if r.Replicas == 7 || r.Replicas == 8 {
			t.Errorf("%s: %d replicas without spec.fallback", r.At, r.Replicas)
		}
	}
}

// TestFallbackSpecErrors: the simulator refuses what the CRD refuses, at
// the field, in the autoscaler and in a step's edit.
func TestFallbackSpecErrors(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/metricautoscaler/fallback-queue-down.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const good = "fallback: {failureThreshold: 3, replicas: 8}"
	for _, tc := range []struct{ bad, field string }{
		{"fallback: {failureThreshold: 0, replicas: 8}", "autoscaler.spec.fallback.failureThreshold"},
		{"fallback: {replicas: 8}", "autoscaler.spec.fallback.failureThreshold"},
		{"fallback: {failureThreshold: 3, replicas: -1}", "autoscaler.spec.fallback.replicas"},
		{"fallback: {failureThreshold: 3, replicas: 8, behavior: max}", "autoscaler.spec.fallback.behavior"},
	} {
		doc := strings.Replace(string(data), good, tc.bad, 1)
		if _, err := Parse([]byte(doc)); err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: error %v, want one at %s", tc.bad, err, tc.field)
		}
	}
	edit := string(data) + `- at: 2m
  autoscaler:
    spec:
      scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: orders-worker}
      maxReplicas: 20
      fallback: {failureThreshold: 0, replicas: 8}
`
	if _, err := Parse([]byte(edit)); err == nil || !strings.Contains(err.Error(), "steps[7].autoscaler.spec.fallback.failureThreshold") {
		t.Errorf("a step's edit: error %v, want one at steps[7].autoscaler.spec.fallback.failureThreshold", err)
	}
}

// TestFallbackScenariosAreDocumented: docs/scenarios.md names each one.
func TestFallbackScenariosAreDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/scenarios.md")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("testdata/metricautoscaler/fallback-*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fallback scenarios: %v", err)
	}
	for _, f := range files {
		if name := strings.TrimSuffix(filepath.Base(f), ".yaml"); !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/scenarios.md does not describe testdata/metricautoscaler/%s", name)
		}
	}
}
