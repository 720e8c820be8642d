//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
)

// TestFallback stops the Redis behind a MetricAutoscaler's External metric:
// after failureThreshold failed reconciles the worker goes to the fallback
// size with a Fallback condition and event naming the metric; a restarted
// autoscaler goes on from the failure count in the status (no reset, no
// second start); Redis back, the fallback ends at the first answer and the
// queue decides the size again.
func TestFallback(t *testing.T) {
	needAutoscaler(t)
	running, err := cluster.runningBackends()
	if err != nil || !slices.Contains(running, "redis") {
		t.Fatalf("the cluster runs backends %v (%v), not redis; restart it with hack/cluster.sh down && hack/cluster.sh up", running, err)
	}
	ctx := context.Background()
	start := time.Now()
	b := queueBackendOf(t, "redis")
	ns := cluster.CreateNamespace(t, "fallback")
	const (
		perPod, depth = 10, 20 // the queue asks for 2 replicas
		threshold     = 3
		fallbackSize  = 5
		syncPeriod    = time.Second
	)
	b.drain(ctx, t)
	b.publish(ctx, t, depth)

	avg := resource.MustParse(fmt.Sprint(perPod))
	metric := autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: b.metric, Selector: &metav1.LabelSelector{MatchLabels: b.selector}},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &avg},
	}}
	cluster.CreateDeployment(t, KwokDeployment(ns, "worker", 1, "100m", "10m"))
	ma := newMA(ns, "worker", 1, 10, syncPeriod, metric)
	ma.Spec.Behavior = noScaleDownWindow()
	ma.Spec.Fallback = &v1alpha1.Fallback{FailureThreshold: threshold, Replicas: fallbackSize}
	createMA(t, ma)
	waitReplicas(t, ns, "worker", depth/perPod, 30*time.Second)
	t.Logf("the queue of %d decided %d replicas, %s after the start", depth, depth/perPod, time.Since(start).Round(100*time.Millisecond))

	t.Cleanup(func() {
		if err := cluster.StartBackend(context.Background(), b.name); err != nil {
			t.Error(err)
		}
	})
	if err := cluster.StopBackend(ctx, b.name); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()

	// Until the third failed read the size stays; then it is the fallback's.
	var fb *v1alpha1.FallbackStatus
	var cond *autoscalingv2.HorizontalPodAutoscalerCondition
	Eventually(t, 30*time.Second, 100*time.Millisecond, fmt.Sprintf("the worker at the fallback's %d", fallbackSize), func(ctx context.Context) (bool, string, error) {
		m, err := getMA(ctx, ns, "worker")
		if err != nil {
			return false, "", err
		}
		r, err := replicasOf(ctx, ns, "worker")
		if err != nil {
			return false, "", err
		}
		fb, cond = m.Status.Fallback, findCond(m.Status.Conditions, "Fallback")
		failures := int32(0)
		if fb != nil && len(fb.Metrics) > 0 {
			failures = fb.Metrics[0].Failures
		}
		if r != depth/perPod && failures < threshold {
			return false, "", fmt.Errorf("the worker went to %d after %d failed reads, below the threshold %d", r, failures, threshold)
		}
		return r == fallbackSize, fmt.Sprintf("replicas %d, status.fallback %+v", r, fb), nil
	})
	t.Logf("fallback to %d replicas %s after the stop", fallbackSize, time.Since(stopped).Round(100*time.Millisecond))
	if fb == nil || !fb.Active || fb.Since == nil || len(fb.Metrics) != 1 || fb.Metrics[0].Failures < threshold || fb.Metrics[0].LastError == "" {
		t.Fatalf("status.fallback %+v, want active with one metric failed %d+ times", fb, threshold)
	}
	if cond == nil || cond.Status != corev1.ConditionTrue || !strings.Contains(cond.Message, b.metric) || !strings.Contains(cond.Message, "since") {
		t.Errorf("Fallback condition %+v, want True naming %s and since when", cond, b.metric)
	}
	t.Logf("status.fallback: active since %s, %s failed %d times since %s; condition: %s",
		fb.Since.UTC().Format(time.RFC3339), fb.Metrics[0].Name, fb.Metrics[0].Failures, fb.Metrics[0].Since.UTC().Format(time.RFC3339), cond.Message)
	if n := fallbackEvents(t, ns, "Fallback"); n != 1 {
		t.Errorf("%d Fallback events, want 1", n)
	}

	// A restart in the middle: the count goes on from the status. A count
	// well above the threshold makes a reset visible as a drop.
	Eventually(t, 30*time.Second, 200*time.Millisecond, "more failed reads", func(ctx context.Context) (bool, string, error) {
		m, err := getMA(ctx, ns, "worker")
		if err != nil {
			return false, "", err
		}
		fb = m.Status.Fallback
		return fb != nil && len(fb.Metrics) > 0 && fb.Metrics[0].Failures >= 2*threshold, fmt.Sprintf("status.fallback %+v", fb), nil
	})
	before := fb.Metrics[0].Failures
	since := *fb.Since
	restartAutoscaler(t)
	restarted := time.Now()
	Eventually(t, 30*time.Second, 200*time.Millisecond, "the restarted autoscaler to count on", func(ctx context.Context) (bool, string, error) {
		m, err := getMA(ctx, ns, "worker")
		if err != nil {
			return false, "", err
		}
		fb = m.Status.Fallback
		if fb == nil || len(fb.Metrics) == 0 || !fb.Active || fb.Metrics[0].Failures < before {
			return false, "", fmt.Errorf("status.fallback %+v after the restart (%d failures before): the fallback state was lost", fb, before)
		}
		return fb.Metrics[0].Failures > before+1, fmt.Sprintf("failures %d (%d before the restart)", fb.Metrics[0].Failures, before), nil
	})
	if !fb.Since.Equal(&since) {
		t.Errorf("fallback since %s after the restart, want %s", fb.Since, since)
	}
	if r, err := replicasOf(ctx, ns, "worker"); err != nil || r != fallbackSize {
		t.Errorf("after the restart: %d replicas (%v), want %d", r, err, fallbackSize)
	}
	if n := fallbackEvents(t, ns, "Fallback"); n != 1 {
		t.Errorf("%d Fallback events after the restart, want still 1", n)
	}
	t.Logf("restarted autoscaler counted on: %d failures before, %d %s after", before, fb.Metrics[0].Failures, time.Since(restarted).Round(100*time.Millisecond))

	// Redis back: the first answer ends the fallback; the queue decides.
	if err := cluster.StartBackend(ctx, b.name); err != nil {
		t.Fatal(err)
	}
	b.drain(ctx, t)
	b.publish(ctx, t, depth)
	back := time.Now()
	Eventually(t, 30*time.Second, 100*time.Millisecond, "the fallback to end", func(ctx context.Context) (bool, string, error) {
		m, err := getMA(ctx, ns, "worker")
		if err != nil {
			return false, "", err
		}
		fb = m.Status.Fallback
		return fb != nil && !fb.Active && len(fb.Metrics) == 0, fmt.Sprintf("status.fallback %+v", fb), nil
	})
	ended := time.Since(back)
	waitReplicas(t, ns, "worker", depth/perPod, 30*time.Second)
	t.Logf("Redis back: fallback over %s after the start, the queue decided %d replicas %s after it", ended.Round(100*time.Millisecond), depth/perPod, time.Since(back).Round(100*time.Millisecond))
	if n := fallbackEvents(t, ns, "FallbackEnded"); n != 1 {
		t.Errorf("%d FallbackEnded events, want 1", n)
	}
	m, err := getMA(ctx, ns, "worker")
	if err != nil {
		t.Fatal(err)
	}
	if c := findCond(m.Status.Conditions, "Fallback"); c == nil || c.Status != corev1.ConditionFalse {
		t.Errorf("Fallback condition %+v after the recovery, want False", c)
	}
	t.Logf("TestFallback took %s", time.Since(start).Round(time.Second))
}

func findCond(cs []autoscalingv2.HorizontalPodAutoscalerCondition, typ string) *autoscalingv2.HorizontalPodAutoscalerCondition {
	for i := range cs {
		if string(cs[i].Type) == typ {
			return &cs[i]
		}
	}
	return nil
}

// fallbackEvents counts the MetricAutoscaler events of ns with reason
// (an aggregated event counts its repetitions).
func fallbackEvents(t *testing.T, ns, reason string) int {
	t.Helper()
	var n int
	Eventually(t, 10*time.Second, 200*time.Millisecond, "a "+reason+" event", func(ctx context.Context) (bool, string, error) {
		l, err := cluster.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		n = 0
		var seen []string
		for _, e := range l.Items {
			seen = append(seen, e.Reason)
			if e.Reason == reason && e.InvolvedObject.Kind == "MetricAutoscaler" {
				n += int(max(e.Count, 1))
			}
		}
		return n > 0, fmt.Sprintf("events %v", seen), nil
	})
	return n
}
