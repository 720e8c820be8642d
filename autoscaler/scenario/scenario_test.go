package scenario

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/metricscale/metricscale/autoscaler/decision"
	"github.com/metricscale/metricscale/autoscaler/validation/validationtest"
)

func readExample(t testing.TB, name string) string {
	t.Helper()
	data, err := os.ReadFile("testdata/examples/" + name + ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestParseErrorsNameTheField checks that a malformed scenario is refused
// with the path of the offending field.
func TestParseErrorsNameTheField(t *testing.T) {
	t.Parallel()
	base := readExample(t, "01-cpu-utilization-scale-up")
	cases := []struct {
		name, old, new, wantPath string
	}{
		{"bad time", `startTime: "2026-01-01T00:00:10Z"`, `startTime: "soon"`, "steps[1].pods[3].status.startTime: "},
		{"bad duration", "at: 2m", "at: 2 minutes", "steps[1].at: "},
		{"steps out of order", "at: 2m", "at: 0s", "steps[1].at: must be later"},
		{"bad quantity", "cpu: 300m}", "cpu: plenty}", "steps[1].podMetrics[0].containers.app.cpu: "},
		{"unknown field", "phase: Running", "phaze: Running", "steps[0].pods[0].status.phaze: unknown field"},
		{"wrong type", "maxReplicas: 10", "maxReplicas: ten", "autoscaler.spec.maxReplicas: want an integer"},
		{"int overflow", "maxReplicas: 10", "maxReplicas: 99999999999", "autoscaler.spec.maxReplicas: want an integer that fits in 32 bits"},
		{"no scale at start", "  scale: {replicas: 3, selector: \"app=web\"}\n", "", "steps[0].scale: required"},
		{"no start", `start: "2026-01-01T00:00:00Z"`, "", "start: required"},
		{"bad failure api", "  podMetrics:\n  - {pod: web-a, containers: {app: {cpu: 400m}}}", "  failures: [{api: prometheus}]\n  podMetrics:\n  - {pod: web-a, containers: {app: {cpu: 400m}}}", "steps[0].failures[0].api: must be one of"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if !strings.Contains(base, tc.old) {
				t.Fatalf("fixture lacks %q", tc.old)
			}
			_, err := Parse([]byte(strings.Replace(base, tc.old, tc.new, 1)))
			if err == nil || !strings.Contains(err.Error(), tc.wantPath) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantPath)
			}
		})
	}
}

// TestCarryOver checks the step rules: an omitted scale takes what the
// previous step wrote, an omitted list is kept, an empty list replaces.
func TestCarryOver(t *testing.T) {
	t.Parallel()
	s, err := Parse([]byte(readExample(t, "16-scale-to-zero")))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Replay(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	// 5m30s omits everything: the 3 pods and the empty queue carry over
	// and the scale is the 3 replicas of step 0 → 0.
	if got[1].Status.CurrentReplicas != 3 || got[1].Replicas != 0 {
		t.Errorf("step 1: current %d → %d, want 3 → 0", got[1].Status.CurrentReplicas, got[1].Replicas)
	}
	// 7m: the scale is the 0 written at 5m30s.
	if got[2].Status.CurrentReplicas != 0 || got[2].Replicas != 3 {
		t.Errorf("step 2: current %d → %d, want 0 → 3", got[2].Status.CurrentReplicas, got[2].Replicas)
	}
}

// FuzzParse feeds arbitrary documents to the parser and replays what it
// accepts: neither may panic, and an accepted scenario replays in full.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"01-cpu-utilization-scale-up", "05-external-averagevalue-queue", "11-behavior-scale-up-policies", "16-scale-to-zero"} {
		f.Add([]byte(readExample(f, name)))
	}
	f.Add([]byte(`{"start":"2026-01-01T00:00:00Z","autoscaler":{"metadata":{"name":"x"},"spec":{"maxReplicas":3}},"steps":[{"at":"0s","scale":{"replicas":1},"pods":[]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		res, err := Replay(context.Background(), s)
		if err != nil {
			t.Fatalf("accepted scenario failed to replay: %v", err)
		}
		if len(res) != len(s.Steps) {
			t.Fatalf("%d results for %d steps", len(res), len(s.Steps))
		}
	})
}

// TestInvalidSpecsAreRefused: a spec the API server would reject, at the
// start or in a step's edit, is refused with its field named, from the
// table the MetricAutoscaler CRD is tested with.
func TestInvalidSpecsAreRefused(t *testing.T) {
	t.Parallel()
	table, err := validationtest.InvalidSpecs()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range table {
		for _, inEdit := range []bool{false, true} {
			t.Run(tc.Name+map[bool]string{false: "", true: "/edit"}[inEdit], func(t *testing.T) {
				t.Parallel()
				doc := map[string]any{
					"start":        "2026-01-01T00:00:00Z",
					"featureGates": map[string]any{"HPAScaleToZero": true},
					"autoscaler":   map[string]any{"metadata": map[string]any{"name": "web"}, "spec": tc.Spec},
					"steps": []any{
						map[string]any{"at": "0s", "scale": map[string]any{"replicas": 1, "selector": "app=web"}, "pods": []any{}},
						map[string]any{"at": "1m"},
					},
				}
				want := "autoscaler." + tc.Field + ": "
				if inEdit {
					valid := map[string]any{"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": 3}
					doc["autoscaler"].(map[string]any)["spec"] = valid
					doc["steps"].([]any)[1].(map[string]any)["autoscaler"] = map[string]any{"spec": tc.Spec}
					want = "steps[1]." + want
				}
				data, err := json.Marshal(doc)
				if err != nil {
					t.Fatal(err)
				}
				_, err = Parse(data)
				if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), tc.Detail) {
					t.Fatalf("error %v, want one at %q saying %q", err, want, tc.Detail)
				}
			})
		}
	}
}

// TestKubeVersions: the version decides the gate defaults and what
// validation accepts; --kube-version overrides the file's kubeVersion; a
// locked gate set against its value and an unknown version are refused.
func TestKubeVersions(t *testing.T) {
	t.Parallel()
	// minReplicas 0 with an External metric and no featureGates.
	zero := strings.Replace(readExample(t, "16-scale-to-zero"), "featureGates:\n  HPAScaleToZero: true\n", "", 1)
	tolerance := readExample(t, "14-per-hpa-tolerance")
	cases := []struct {
		name    string
		doc     string
		version decision.KubeVersion
		wantErr string
		want    decision.KubeVersion
	}{
		{"1.37 by default accepts minReplicas 0", zero, "", "", decision.KubeVersion137},
		{"1.36 refuses minReplicas 0 without the gate", zero, decision.KubeVersion136, "autoscaler.spec.minReplicas: ", ""},
		{"kubeVersion in the file", "kubeVersion: \"1.36\"\n" + zero, "", "autoscaler.spec.minReplicas: ", ""},
		{"--kube-version overrides the file", "kubeVersion: \"1.36\"\n" + zero, decision.KubeVersion137, "", decision.KubeVersion137},
		{"unknown version", "kubeVersion: \"1.35\"\n" + zero, "", "kubeVersion: unsupported Kubernetes version", ""},
		{"1.37 locks HPAConfigurableTolerance", strings.Replace(tolerance, "HPAConfigurableTolerance: true", "HPAConfigurableTolerance: false", 1), "", "featureGates.HPAConfigurableTolerance: cannot set to false", ""},
		{"1.36 lets it off", strings.Replace(tolerance, "HPAConfigurableTolerance: true", "HPAConfigurableTolerance: false", 1), decision.KubeVersion136, "", decision.KubeVersion136},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := ParseAs([]byte(tc.doc), tc.version)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Version() != tc.want {
				t.Errorf("version %s, want %s", s.Version(), tc.want)
			}
		})
	}
	s136, err := ParseAs([]byte(tolerance), decision.KubeVersion136)
	if err != nil {
		t.Fatal(err)
	}
	s137, err := ParseAs([]byte(tolerance), decision.KubeVersion137)
	if err != nil {
		t.Fatal(err)
	}
	if g := s136.Settings().Gates; g.ScaleToZero || g.Generation || !g.ConfigurableTolerance {
		t.Errorf("v1.36 gates %+v, want HPAScaleToZero and HPAGeneration off, HPAConfigurableTolerance on", g)
	}
	if g := s137.Settings().Gates; !g.ScaleToZero || !g.Generation || !g.ConfigurableTolerance {
		t.Errorf("v1.37 gates %+v, want all on", g)
	}
}

// TestObservedGeneration: with HPAGeneration (v1.37) the status carries the
// generation, 1 at first and one more after an edit that changes the spec;
// v1.36 writes none.
func TestObservedGeneration(t *testing.T) {
	t.Parallel()
	doc := readExample(t, "01-cpu-utilization-scale-up") + `- at: 10m
  autoscaler:
    spec:
      scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
      minReplicas: 1
      maxReplicas: 7
`
	for _, v := range decision.KubeVersions {
		s, err := ParseAs([]byte(doc), v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Replay(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		first, last := got[0].Status.ObservedGeneration, got[len(got)-1].Status.ObservedGeneration
		switch v {
		case decision.KubeVersion136:
			if first != nil || last != nil {
				t.Errorf("v1.36 wrote observedGeneration %v, %v", first, last)
			}
		default:
			if first == nil || *first != 1 || last == nil || *last != 2 {
				t.Errorf("v%s observedGeneration %v at first, %v after the edit; want 1 and 2", v, first, last)
			}
		}
	}
}
