package scenario

import (
	"bytes"
	"strings"
	"testing"

	"github.com/metricscale/metricscale/autoscaler/decision"
)

// TestFormulaScenario replays formula-two-queues: the formula proposes from
// its inputs' values, its inputs propose nothing, a metric outside it still
// competes, and a failing input fails the formula, which blocks a
// scale-down as a failed metric does.
func TestFormulaScenario(t *testing.T) {
	t.Parallel()
	type want struct {
		replicas int32
		rule     decision.Rule
		from     string // the winning proposal, in --explain's words
		value    float64
	}
	steps := []want{
		{2, decision.RuleMetric, "spec.formula backlog", 20},
		{5, decision.RuleMetric, "spec.formula backlog", 50},
		{3, decision.RuleMetric, "spec.metrics[2] External retries_pending", 0},
		{3, decision.RuleMetricsFailed, "", 0},
		{6, decision.RuleMetric, "spec.formula backlog", 60},
	}
	_, got := replayDoc(t, readTestdata(t, "metricautoscaler/formula-two-queues.yaml"))
	if len(got) != len(steps) {
		t.Fatalf("%d steps, want %d", len(got), len(steps))
	}
	for i, w := range steps {
		r := &got[i]
		if r.Replicas != w.replicas {
			t.Errorf("step %d (%s): %d replicas, want %d (reason %q, error %q)", i, r.At, r.Replicas, w.replicas, r.Reason, r.Error)
		}
		if rule := r.Explain.Rule(r.Metrics); rule != w.rule {
			t.Errorf("step %d (%s): rule %q, want %q", i, r.At, rule, w.rule)
		}
		e := Explain(r)
		if e.From != w.from {
			t.Errorf("step %d (%s): largest proposal from %q, want %q", i, r.At, e.From, w.from)
		}
		if len(r.Metrics) != 4 {
			t.Fatalf("step %d: %d results, want 3 metrics and the formula", i, len(r.Metrics))
		}
		for j := 0; j < 2; j++ {
			if m := r.Metrics[j]; m.Proposal != -1 || m.Input == "" {
				t.Errorf("step %d: input metric %d proposed %d (input %q), want no proposal", i, j, m.Proposal, m.Input)
			}
		}
		if f := r.Metrics[3]; w.rule != decision.RuleMetricsFailed && f.Value != w.value {
			t.Errorf("step %d: formula value %v, want %v", i, f.Value, w.value)
		}
	}
	failed := got[3]
	if f := failed.Metrics[3].Err; f == nil || !strings.Contains(f.Error(), "input payments (spec.metrics[1])") {
		t.Errorf("step 3: formula error %v, want one naming the failed input", f)
	}
	var active string
	for _, c := range failed.Status.Conditions {
		if c.Type == "ScalingActive" {
			active = string(c.Status) + "/" + c.Reason
		}
	}
	if active != "False/"+decision.ReasonFailedFormula {
		t.Errorf("step 3: ScalingActive %s, want False/%s", active, decision.ReasonFailedFormula)
	}
	var b bytes.Buffer
	if err := WriteExplained(&b, got[:1]); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"formula input orders = 10", "formula input payments = 5", "formula backlog: orders + 2 * payments = 20", "largest proposal 2 (spec.formula backlog)"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("--explain does not say %q:\n%s", s, b.String())
		}
	}
}

// TestFormulaScenarioRefusesWhatTheControllerWould: an expression the CRD
// lets through but that does not compile is a malformed scenario, reported
// at its field.
func TestFormulaScenarioRefusesWhatTheControllerWould(t *testing.T) {
	t.Parallel()
	for expr, says := range map[string]string{
		`"orders + refunds"`:  "undeclared reference to 'refunds'",
		`"orders > payments"`: "must evaluate to a number, not bool",
		`"orders + 2 * "`:     "Syntax error",
	} {
		doc := strings.Replace(readTestdata(t, "metricautoscaler/formula-two-queues.yaml"), `"orders + 2 * payments"`, expr, 1)
		_, err := Parse([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), "autoscaler.spec.formula.expression") || !strings.Contains(err.Error(), says) {
			t.Errorf("%s: error %v, want one at autoscaler.spec.formula.expression saying %q", expr, err, says)
		}
	}
}
