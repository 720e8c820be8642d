//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
)

// TestScheduleRaisesTheFloor: a MetricAutoscaler whose queue asks for one
// replica, with a sync period of 5 minutes, gets a one-minute window (cron,
// minute granularity) starting a minute or so after its creation, floor 4
// with a 30s ramp. The controller wakes at the ramp's steps, not at its
// sync period: the Deployment climbs 1 → 2 → 3 → 4 over the 30s before the
// window, with none of it before the ramp starts, stays at 4 through the
// window with the Scheduled condition and a ScheduleStarted event naming
// the schedule, and ramps back 4 → 3 → 2 → 1 over the 30s after it.
func TestScheduleRaisesTheFloor(t *testing.T) {
	needAutoscaler(t)
	ns := cluster.CreateNamespace(t, "schedule")
	queue := "schedule-" + ns
	q := &pushedQueue{t: t, queue: queue}
	q.set(1)
	stop := q.keepPushing()
	defer stop()

	// The window: the first whole minute at least 45s away (UTC), so the
	// ramp (30s before it) starts after the first reconciles.
	now := time.Now().UTC()
	start := now.Truncate(time.Minute).Add(time.Minute)
	if start.Sub(now) < 45*time.Second {
		start = start.Add(time.Minute)
	}
	end := start.Add(time.Minute)
	const ramp = 30 * time.Second
	cron := func(t time.Time) string { return fmt.Sprintf("%d %d * * *", t.Minute(), t.Hour()) }

	cluster.CreateDeployment(t, KwokDeployment(ns, "worker", 1, "100m", "10m"))
	ma := newMA(ns, "worker", 1, 10, 5*time.Minute, queueSpec(queue, "10"))
	ma.Spec.Behavior = noScaleDownWindow()
	ma.Spec.Schedules = []v1alpha1.Schedule{{Name: "peak", Start: cron(start), End: cron(end), TimeZone: "UTC", MinReplicas: 4, RampSeconds: int32(ramp / time.Second)}}
	createMA(t, ma)
	t.Logf("window %s-%s UTC (%s, %s), ramp %s", start.Format(time.TimeOnly), end.Format(time.TimeOnly), cron(start), cron(end), ramp)

	// Watch spec.replicas until the ramp down is over, and look at the
	// object once inside the window.
	var tl timeline
	checked := false
	ctx := context.Background()
	for time.Now().Before(end.Add(ramp + 15*time.Second)) {
		r, err := replicasOf(ctx, ns, "worker")
		if err != nil {
			t.Fatal(err)
		}
		tl.observe(r, time.Now())
		if !checked && time.Now().After(start.Add(10*time.Second)) {
			checked = true
			m, err := getMA(ctx, ns, "worker")
			if err != nil {
				t.Fatal(err)
			}
			c := findCond(m.Status.Conditions, "Scheduled")
			if c == nil || c.Status != corev1.ConditionTrue || c.Reason != "ScheduleActive" {
				t.Errorf("Scheduled condition %+v inside the window, want True/ScheduleActive", c)
			} else if want := fmt.Sprintf("schedule peak raises the floor to 4 until %s", end.Format(time.RFC3339)); !strings.Contains(c.Message, want) {
				t.Errorf("Scheduled condition message %q, want it to say %q", c.Message, want)
			}
			if l := findCond(m.Status.Conditions, "ScalingLimited"); l == nil || l.Reason != "ScheduledMinimum" {
				t.Errorf("ScalingLimited %+v inside the window, want ScheduledMinimum (the queue asks for 1)", l)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("replicas %v at %v", tl.values, tl.times)
	if !checked {
		t.Fatal("never looked inside the window")
	}
	if want := []int32{1, 2, 3, 4, 3, 2, 1}; !slices.Equal(tl.values, want) {
		t.Fatalf("replicas went %v, want %v: the ramp up, the window, the ramp down", tl.values, want)
	}
	// Each change at or after the instant its step is due: the ramp's
	// steps are at a third of it (rounded up), the window's edges exact.
	third := ramp / 3
	due := []time.Time{start.Add(-ramp), start.Add(-ramp + third), start.Add(-ramp + 2*third), end.Add(third), end.Add(2 * third), end.Add(ramp)}
	for i, at := range tl.times[1:] {
		// A second of slack: the cluster's clock is this machine's, read
		// by the controller in another process.
		if at.Before(due[i].Add(-time.Second)) {
			t.Errorf("replicas %d at %s, before the step was due at %s", tl.values[i+1], at.Format(time.StampMilli), due[i].Format(time.StampMilli))
		}
	}
	// On time: every change well within the 5-minute sync period of its
	// step (the controller woke for it; the sync period would be minutes
	// late).
	for i, at := range tl.times[1:] {
		if late := at.Sub(due[i]); late > 30*time.Second {
			t.Errorf("replicas %d at %s, %s after the step was due: the controller did not wake for it", tl.values[i+1], at.Format(time.StampMilli), late)
		}
	}
	if n := fallbackEvents(t, ns, "ScheduleStarted"); n != 1 {
		t.Errorf("%d ScheduleStarted events, want 1", n)
	}
	if n := fallbackEvents(t, ns, "ScheduleEnded"); n != 1 {
		t.Errorf("%d ScheduleEnded events, want 1", n)
	}
}
