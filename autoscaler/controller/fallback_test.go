package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/decision"
)

// downQueue is a queue whose backend is down.
type downQueue struct{ queue }

func (downQueue) ExternalMetric(context.Context, string, string, labels.Selector) ([]int64, time.Time, error) {
	return nil, time.Time{}, errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
}

// TestFallbackSurvivesRestart: a controller that starts with a stored
// failure count goes on counting from it, writes the fallback state and the
// Fallback condition, and ends the fallback at the first answer.
func TestFallbackSurvivesRestart(t *testing.T) {
	t.Parallel()
	ma := metricAutoscaler(func(m *v1alpha1.MetricAutoscaler) {
		m.Spec.Fallback = &v1alpha1.Fallback{FailureThreshold: 2, Replicas: 6}
		m.Status.Fallback = &v1alpha1.FallbackStatus{Metrics: []v1alpha1.MetricFailure{{
			Index: 0, Name: "External queue_messages_ready", Failures: 1, Since: &metav1.Time{Time: t0.Add(-15 * time.Second)}, LastError: "refused",
		}}}
	})
	f := newFixture(t, ma, 3, 0)
	f.ctrl.clients.Metrics = &downQueue{}
	got := reconcileFailing(t, f)
	if f.replicas != 6 {
		t.Errorf("after the second failure in a row: %d replicas, want the fallback's 6", f.replicas)
	}
	fb := got.Status.Fallback
	if fb == nil || !fb.Active || len(fb.Metrics) != 1 || fb.Metrics[0].Failures != 2 || !fb.Metrics[0].Since.Equal(ma.Status.Fallback.Metrics[0].Since) {
		t.Fatalf("status.fallback %+v, want active with the stored run at 2 failures", fb)
	}
	if c := findCondition(got.Status.Conditions, decision.ConditionFallback); c == nil || c.Status != corev1.ConditionTrue || !strings.Contains(c.Message, "queue_messages_ready") {
		t.Errorf("Fallback condition %+v, want True naming the metric", c)
	}
	if !drained(f, decision.ReasonFallback) {
		t.Error("no Fallback event")
	}

	// The backend answers: 30 messages at 30 per pod → 1 replica; the
	// downscale window holds 6, but the fallback is over at once.
	f.ctrl.clients.Metrics = &queue{depth: 30}
	f.clock.Step(time.Second)
	got = f.reconcile(t)
	if fb := got.Status.Fallback; fb == nil || fb.Active || len(fb.Metrics) != 0 {
		t.Errorf("status.fallback %+v after an answer, want inactive and empty", fb)
	}
	if c := findCondition(got.Status.Conditions, decision.ConditionFallback); c == nil || c.Status != corev1.ConditionFalse {
		t.Errorf("Fallback condition %+v, want False", c)
	}
	if !drained(f, decision.ReasonFallbackEnded) {
		t.Error("no FallbackEnded event")
	}
}

// reconcileFailing runs a reconcile whose metric fails (so it reports an
// error) and returns the stored object, as fixture.reconcile does.
func reconcileFailing(t *testing.T, f *fixture) *v1alpha1.MetricAutoscaler {
	t.Helper()
	if _, err := f.ctrl.reconcile(context.Background(), kindMA+"/default/workers"); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("reconcile error %v, want the metric's", err)
	}
	return f.stored(t)
}

func findCondition(cs []autoscalingv2.HorizontalPodAutoscalerCondition, t autoscalingv2.HorizontalPodAutoscalerConditionType) *autoscalingv2.HorizontalPodAutoscalerCondition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}

// drained reads the recorded events and says whether one has reason.
func drained(f *fixture, reason string) bool {
	found := false
	for {
		select {
		case e := <-f.recorder.Events:
			if strings.Contains(e, " "+reason+" ") {
				found = true
			}
		default:
			return found
		}
	}
}
