package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/decision"
)

// TestActivationSurvivesRestart: a target at zero (put there by someone
// else: with spec.scaleToZero zero is the autoscaler's to leave) stays at
// zero below the activation value, comes up above it, and a controller
// restarted during the cooldown counts from the stored lastActiveTime.
func TestActivationSurvivesRestart(t *testing.T) {
	t.Parallel()
	ma := metricAutoscaler(func(m *v1alpha1.MetricAutoscaler) {
		m.Spec.MinReplicas = new(int32)
		m.Spec.ScaleToZero = &v1alpha1.ScaleToZero{
			CooldownPeriod: &metav1.Duration{Duration: 20 * time.Second},
			Activation:     []v1alpha1.MetricActivation{{Metric: "queue_messages_ready", Value: resource.MustParse("5")}},
		}
	})
	f := newFixture(t, ma, 0, 3)
	got := f.reconcile(t)
	if f.writes != 0 {
		t.Fatalf("3 messages, activation value 5: scaled to %d", f.replicas)
	}
	if s := got.Status.ScaleToZero; s == nil || s.Active || s.LastActiveTime != nil {
		t.Errorf("status.scaleToZero %+v at zero below the activation value, want inactive without lastActiveTime", s)
	}
	if c := findCondition(got.Status.Conditions, decision.ConditionActive); c == nil || c.Status != corev1.ConditionFalse {
		t.Errorf("Active condition %+v, want False", c)
	}

	f.src.depth = 10
	f.clock.Step(time.Second)
	got = f.reconcile(t)
	if f.replicas != 1 {
		t.Fatalf("10 messages: %d replicas, want 1 (10 at 30 per pod)", f.replicas)
	}
	activeAt := f.clock.Now()
	if s := got.Status.ScaleToZero; s == nil || !s.Active || s.LastActiveTime == nil || !s.LastActiveTime.Time.Equal(activeAt) {
		t.Errorf("status.scaleToZero %+v, want active since %v", s, activeAt)
	}
	if !drained(f, decision.ReasonActivated) {
		t.Error("no Activated event")
	}

	f.src.depth = 0
	f.clock.Step(time.Second)
	got = f.reconcile(t)
	if f.replicas != 1 {
		t.Fatalf("empty queue inside the cooldown: %d replicas, want 1", f.replicas)
	}
	if !drained(f, decision.ReasonDeactivated) {
		t.Error("no Deactivated event")
	}

	// A new controller, from what the last one stored, 10s into the
	// 20s cooldown: it holds one replica, and goes to zero at 20s.
	r := newFixture(t, got, 1, 0)
	r.clock.SetTime(activeAt.Add(10 * time.Second))
	r.reconcile(t)
	if r.writes != 0 {
		t.Fatalf("restarted 10s into the cooldown: scaled to %d", r.replicas)
	}
	r.clock.SetTime(activeAt.Add(20 * time.Second))
	got = r.reconcile(t)
	if r.replicas != 0 {
		t.Fatalf("the cooldown has elapsed: %d replicas, want 0", r.replicas)
	}
	if s := got.Status.ScaleToZero; s == nil || s.Active || !s.LastActiveTime.Time.Equal(activeAt) {
		t.Errorf("status.scaleToZero %+v, want inactive, last active at %v", s, activeAt)
	}
}
