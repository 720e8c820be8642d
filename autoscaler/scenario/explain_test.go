package scenario

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/metricscale/metricscale/autoscaler/decision"
)

// TestExplanationsAgreeWithDecisions explains every step of every scenario
// in testdata: the explanation's count is the count decided, and it names
// a rule; a rescaled step is never explained by a rule that keeps the size.
func TestExplanationsAgreeWithDecisions(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/*/*.yaml")
	if err != nil || len(files) < 20 {
		t.Fatalf("scenarios %d, err %v", len(files), err)
	}
	keeps := map[string]bool{string(decision.RuleTolerance): true, string(decision.RuleScalingDisabled): true,
		string(decision.RuleScaleUnreadable): true, string(decision.RuleMetricsFailed): true, string(decision.RuleNoSelector): true}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		s, err := Parse(data)
		if err != nil {
			continue // the malformed ones of the error tests
		}
		results, err := Replay(t.Context(), s)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for i := range results {
			r := &results[i]
			e := Explain(r)
			where := filepath.Base(file) + " at " + r.At
			if e.Rule == "" {
				t.Errorf("%s: no rule", where)
			}
			if r.Rescaled && e.Desired != r.Replicas {
				t.Errorf("%s: explained %d, rescaled to %d", where, e.Desired, r.Replicas)
			}
			if r.Rescaled && keeps[e.Rule] {
				t.Errorf("%s: rescaled %d → %d, explained by %q", where, r.CurrentReplicas, r.Replicas, e.Rule)
			}
			if len(e.Metrics) != len(r.Metrics) {
				t.Errorf("%s: %d metrics explained, %d computed", where, len(e.Metrics), len(r.Metrics))
			}
		}
	}
}
