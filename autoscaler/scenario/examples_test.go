package scenario

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/metricscale/metricscale/autoscaler/decision"
)

// replayFile replays a scenario file and reads the results it is compared with.
func replayFile(t *testing.T, file, expected string, upstream bool) (*Scenario, []StepResult, []StepResult) {
	t.Helper()
	return replayFileAs(t, file, expected, upstream, "")
}

// replayFileAs is replayFile deciding as a kube-controller-manager version
// (empty: the scenario's).
func replayFileAs(t *testing.T, file, expected string, upstream bool, version decision.KubeVersion) (*Scenario, []StepResult, []StepResult) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseAs(data, version)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	s.UpstreamArithmetic = upstream
	got, err := Replay(context.Background(), s)
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	raw, err := os.ReadFile(expected)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ReadResults(raw)
	if err != nil {
		t.Fatalf("expected output: %v", err)
	}
	return s, got, want
}

// expectedFile is where an example's upstream answers for a version are:
// v1.37's beside the scenario, v1.36's in examples/1.36/.
func expectedFile(scenarioFile string, v decision.KubeVersion) string {
	name := strings.TrimSuffix(filepath.Base(scenarioFile), ".yaml") + ".expected.jsonl"
	if v == decision.KubeVersion136 {
		return filepath.Join(filepath.Dir(scenarioFile), "1.36", name)
	}
	return filepath.Join(filepath.Dir(scenarioFile), name)
}

// TestExamplesAgreeWithUpstream replays every example as each supported
// kube-controller-manager version and compares it with what that
// version's controller wrote for it, in both arithmetic modes: none of
// them reaches an overflow, where the modes differ.
func TestExamplesAgreeWithUpstream(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/examples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no examples found in testdata/examples")
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		for _, v := range decision.KubeVersions {
			for _, upstream := range []bool{false, true} {
				t.Run(name+"/"+string(v)+map[bool]string{false: "", true: "/upstream-arithmetic"}[upstream], func(t *testing.T) {
					t.Parallel()
					s, got, want := replayFileAs(t, file, expectedFile(file, v), upstream, v)
					if diffs := Disagreements(s.Autoscaler.Status, got, want); len(diffs) > 0 {
						t.Errorf("disagrees with upstream v%s:\n  %s", v, strings.Join(diffs, "\n  "))
					}
				})
			}
		}
	}
}

// TestExamplesDifferBetweenVersions: the examples that show a change of
// v1.37 have upstream answers that differ between the versions, and the
// replay follows each.
func TestExamplesDifferBetweenVersions(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"17-scale-to-zero-by-default"} {
		file := filepath.Join("testdata", "examples", name+".yaml")
		s, got137, want137 := replayFileAs(t, file, expectedFile(file, decision.KubeVersion137), false, decision.KubeVersion137)
		_, got136, want136 := replayFileAs(t, file, expectedFile(file, decision.KubeVersion136), false, decision.KubeVersion136)
		if len(Disagreements(s.Autoscaler.Status, want136, want137)) == 0 {
			t.Errorf("%s: upstream's v1.36 and v1.37 answers agree; the example shows no change", name)
		}
		if len(Disagreements(s.Autoscaler.Status, got136, got137)) == 0 {
			t.Errorf("%s: the replays as v1.36 and v1.37 agree", name)
		}
	}
}

// TestDeviations replays the documented deviations from upstream: each
// agrees with its expected output, and with upstream's own (.upstream.jsonl)
// under --upstream-arithmetic, and the two differ. Upstream's results rest
// on amd64's conversion of out-of-range floats, so that half runs there.
func TestDeviations(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/deviations/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scenarios found in testdata/deviations")
	}
	for _, file := range files {
		base := strings.TrimSuffix(file, ".yaml")
		t.Run(filepath.Base(base), func(t *testing.T) {
			t.Parallel()
			s, got, want := replayFile(t, file, base+".expected.jsonl", false)
			if diffs := Disagreements(s.Autoscaler.Status, got, want); len(diffs) > 0 {
				t.Errorf("disagrees with its expected output:\n  %s", strings.Join(diffs, "\n  "))
			}
			if runtime.GOARCH != "amd64" {
				return
			}
			s, got, upstream := replayFile(t, file, base+".upstream.jsonl", true)
			if diffs := Disagreements(s.Autoscaler.Status, got, upstream); len(diffs) > 0 {
				t.Errorf("--upstream-arithmetic disagrees with upstream:\n  %s", strings.Join(diffs, "\n  "))
			}
			if len(Disagreements(s.Autoscaler.Status, want, upstream)) == 0 {
				t.Error("not a deviation: the expected output agrees with upstream's")
			}
		})
	}
}
