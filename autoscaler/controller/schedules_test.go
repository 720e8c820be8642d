package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/decision"
)

// TestScheduleWakesOnTime: with the metrics unchanged, the reconcile before
// a window asks to come back at its start rather than a sync period later;
// there the floor rises, the Scheduled condition and an event say which
// schedule raised it, and the next wake is the window's end.
func TestScheduleWakesOnTime(t *testing.T) {
	t.Parallel()
	ma := metricAutoscaler(func(m *v1alpha1.MetricAutoscaler) {
		m.Spec.SyncPeriod.Duration = 15 * time.Second
		// t0 is 12:00:00 UTC; the window is 12:01-12:03 in Paris's 13:01.
		m.Spec.Schedules = []v1alpha1.Schedule{{Name: "lunch", Start: "1 13 * * *", End: "3 13 * * *", TimeZone: "Europe/Paris", MinReplicas: 6}}
	})
	f := newFixture(t, ma, 1, 30) // 30 messages at 30 each: 1 replica
	key := kindMA + "/default/workers"

	f.clock.SetTime(t0.Add(50 * time.Second))
	period, err := f.ctrl.reconcile(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if period != 10*time.Second {
		t.Errorf("requeue in %s at 12:00:50, want 10s (the window's start), not the 15s sync period", period)
	}
	if c := findCondition(f.stored(t).Status.Conditions, decision.ConditionScheduled); c == nil || c.Status != corev1.ConditionFalse || !strings.Contains(c.Message, "2026-01-01T12:01:00Z") {
		t.Errorf("Scheduled condition %+v before the window, want False naming the next change", c)
	}

	f.clock.SetTime(t0.Add(time.Minute))
	period, err = f.ctrl.reconcile(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if f.replicas != 6 {
		t.Fatalf("%d replicas at the window's start, want 6", f.replicas)
	}
	if period != 15*time.Second {
		t.Errorf("requeue in %s inside the window, want the sync period", period)
	}
	c := findCondition(f.stored(t).Status.Conditions, decision.ConditionScheduled)
	if c == nil || c.Status != corev1.ConditionTrue || c.Reason != decision.ReasonScheduleActive || !strings.Contains(c.Message, "schedule lunch raises the floor to 6 until 2026-01-01T12:03:00Z") {
		t.Errorf("Scheduled condition %+v, want True naming the schedule and its end", c)
	}
	if !drained(f, decision.ReasonScheduleStarted) {
		t.Error("no ScheduleStarted event")
	}

	f.clock.SetTime(t0.Add(2*time.Minute + 50*time.Second))
	if period, err = f.ctrl.reconcile(context.Background(), key); err != nil || period != 10*time.Second {
		t.Errorf("requeue in %s (%v) 10s before the end, want 10s", period, err)
	}
}

// TestInvalidScheduleReported: a cron expression the CRD's pattern lets
// through is reported at its field, and the other schedules still apply.
func TestInvalidScheduleReported(t *testing.T) {
	t.Parallel()
	ma := metricAutoscaler(func(m *v1alpha1.MetricAutoscaler) {
		m.Spec.Schedules = []v1alpha1.Schedule{
			{Name: "bad", Start: "61 * * * *", End: "0 13 * * *", MinReplicas: 9},
			{Name: "noon", Start: "0 12 * * *", End: "0 13 * * *", MinReplicas: 4},
		}
	})
	f := newFixture(t, ma, 1, 30)
	got := f.reconcile(t)
	if f.replicas != 4 {
		t.Errorf("%d replicas, want 4 (the valid schedule's floor)", f.replicas)
	}
	c := findCondition(got.Status.Conditions, decision.ConditionScheduled)
	if c == nil || c.Status != corev1.ConditionTrue || !strings.Contains(c.Message, "spec.schedules[0].start") {
		t.Errorf("Scheduled condition %+v, want True and naming spec.schedules[0].start", c)
	}
	if !drained(f, decision.ReasonInvalidSchedule) {
		t.Error("no InvalidSchedule event")
	}
}
