package scenario

import (
	"context"
	"os"
	"strings"
	"testing"
)

func TestMetricAutoscalerScenario(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/metricautoscaler/history-from-status.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if s.MetricAutoscaler == nil || s.Autoscaler.Spec.MaxReplicas != 20 {
		t.Fatalf("not read as a MetricAutoscaler: %+v", s.Autoscaler.Spec)
	}
	if !s.Settings().Gates.ScaleToZero {
		t.Error("a MetricAutoscaler scenario must decide with scale to zero on, as the controller does")
	}
	got, err := Replay(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	want := []int32{6, 6, 2}
	for i, r := range got {
		if r.Replicas != want[i] {
			t.Errorf("step %d (%s): replicas %d, want %d (the saved recommendation of 6 holds until 3m)", i, r.At, r.Replicas, want[i])
		}
	}

	// Without the saved history, the controller seeds the window with the
	// current size at the first reconcile (as kube-controller-manager), so
	// the 6 holds until 5 minutes after the start.
	s.MetricAutoscaler.Status.History = nil
	got, err = Replay(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if got[2].Replicas != 6 {
		t.Errorf("without history: replicas %d at %s, want 6", got[2].Replicas, got[2].At)
	}
}

func TestMetricAutoscalerScenarioErrors(t *testing.T) {
	t.Parallel()
	base := `start: "2026-01-01T00:00:00Z"
autoscaler:
  apiVersion: APIVERSION
  kind: MetricAutoscaler
  metadata: {name: w}
  spec:
    scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: w}
    maxReplicas: 5
    metrics:
    - type: External
      external: {metric: {name: q}, target: {type: Value, value: "1"}}
    SPEC
steps:
- at: 0s
  scale: {replicas: 1}
  pods: []
STEP
`
	for _, tc := range []struct{ name, apiVersion, spec, step, field string }{
		{"wrong apiVersion", "autoscaling/v2", "", "", "autoscaler.apiVersion"},
		{"unknown spec field", "", "fallbak: {}", "", "autoscaler.spec.fallbak"},
		{"paused", "", "paused: true", "", "autoscaler.spec.paused"},
		{"edit of another kind", "", "", "  autoscaler: {kind: HorizontalPodAutoscaler, spec: {maxReplicas: 3}}", "steps[0].autoscaler.kind"},
		{"mistyped fallback", "", "fallback: {failureThreshold: three}", "", "autoscaler.spec.fallback.failureThreshold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			apiVersion := tc.apiVersion
			if apiVersion == "" {
				apiVersion = "autoscaling.metricscale.dev/v1alpha1"
			}
			doc := strings.NewReplacer("APIVERSION", apiVersion, "SPEC", tc.spec, "STEP", tc.step).Replace(base)
			_, err := Parse([]byte(doc))
			if err == nil {
				t.Fatalf("accepted:\n%s", doc)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q does not name %s", err, tc.field)
			}
		})
	}
}

// readTestdata reads testdata/name.
func readTestdata(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// replayDoc parses a scenario and replays it, failing t on an error.
func replayDoc(t *testing.T, doc string) (*Scenario, []StepResult) {
	t.Helper()
	s, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Replay(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return s, got
}
