package scenario

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metricscale/metricscale/autoscaler/decision"
)

// TestScheduleScenario replays schedule-ramp under the virtual clock: the
// floor rises on time along its ramp, holds during the window without
// lowering a larger proposal, and ramps back; each step's size, Scheduled
// condition and rule are the ones the file's comment derives.
func TestScheduleScenario(t *testing.T) {
	t.Parallel()
	type want struct {
		replicas  int32
		scheduled string // the Scheduled condition, status/reason
		rule      decision.Rule
	}
	const (
		none   = "False/" + decision.ReasonNoSchedule
		up     = "True/" + decision.ReasonScheduleRampUp
		active = "True/" + decision.ReasonScheduleActive
		down   = "True/" + decision.ReasonScheduleRampDown
	)
	steps := []want{
		{1, none, decision.RuleMetric}, {1, none, decision.RuleMetric},
		{2, up, decision.RuleSchedule}, {4, up, decision.RuleSchedule}, {6, active, decision.RuleSchedule},
		{8, active, decision.RuleMetric}, {6, active, decision.RuleSchedule},
		{6, down, decision.RuleSchedule}, {4, down, decision.RuleSchedule}, {1, none, decision.RuleMetric},
	}
	_, got := replayDoc(t, readTestdata(t, "metricautoscaler/schedule-ramp.yaml"))
	if len(got) != len(steps) {
		t.Fatalf("%d steps, want %d", len(got), len(steps))
	}
	for i, w := range steps {
		r := &got[i]
		if r.Replicas != w.replicas {
			t.Errorf("step %d (%s): %d replicas, want %d (reason %q)", i, r.At, r.Replicas, w.replicas, r.Reason)
		}
		var scheduled string
		for _, c := range r.Status.Conditions {
			if c.Type == decision.ConditionScheduled {
				scheduled = string(c.Status) + "/" + c.Reason
			}
		}
		if scheduled != w.scheduled {
			t.Errorf("step %d (%s): Scheduled %s, want %s", i, r.At, scheduled, w.scheduled)
		}
		if rule := r.Explain.Rule(r.Metrics); rule != w.rule {
			t.Errorf("step %d (%s): rule %q, want %q", i, r.At, rule, w.rule)
		}
		e := Explain(r)
		if w.rule == decision.RuleSchedule && !strings.Contains(e.Schedule, "schedule morning-peak raised the floor to") {
			t.Errorf("step %d (%s): explanation %+v does not name the schedule", i, r.At, e)
		}
		if e.Limited != nil && *e.Limited != *e.Stabilized && w.rule == decision.RuleSchedule && e.Limit != decision.ReasonScheduledMinimum {
			t.Errorf("step %d (%s): limit %q, want %s (the ScalingLimited reason)", i, r.At, e.Limit, decision.ReasonScheduledMinimum)
		}
	}
}

func TestScheduleScenariosAreDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/scenarios.md")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("testdata/metricautoscaler/schedule-*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no schedule scenarios: %v", err)
	}
	for _, f := range files {
		if name := strings.TrimSuffix(filepath.Base(f), ".yaml"); !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/scenarios.md does not describe testdata/metricautoscaler/%s", name)
		}
	}
}

// TestScheduleScenarioRefusesWhatTheControllerWould: a time zone the CRD's
// pattern lets through but that does not exist is a malformed scenario,
// reported at its field.
func TestScheduleScenarioRefusesWhatTheControllerWould(t *testing.T) {
	t.Parallel()
	doc := strings.Replace(readTestdata(t, "metricautoscaler/schedule-ramp.yaml"), "timeZone: UTC", "timeZone: Europe/Atlantis", 1)
	_, err := Parse([]byte(doc))
	if err == nil || !strings.Contains(err.Error(), "autoscaler.spec.schedules[0].timeZone") || !strings.Contains(err.Error(), "unknown time zone") {
		t.Fatalf("error %v, want one at autoscaler.spec.schedules[0].timeZone", err)
	}
}
