package controller

import (
	"context"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
)

// serveMetricsAPI registers an APIService of group backed by Service
// ns/name selecting selector.
func (f *fixture) serveMetricsAPI(t *testing.T, group, ns, name string, selector map[string]string) {
	t.Helper()
	as := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": "v1beta1." + group},
		"spec":     map[string]any{"group": group, "version": "v1beta1", "service": map[string]any{"namespace": ns, "name": name}},
	}}
	if err := f.dyn.Tracker().Add(as); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{Selector: selector}}
	if _, err := f.ctrl.clients.Kube.CoreV1().Services(ns).Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func ableToScale(ma *v1alpha1.MetricAutoscaler) *autoscalingv2.HorizontalPodAutoscalerCondition {
	for i := range ma.Status.Conditions {
		if ma.Status.Conditions[i].Type == autoscalingv2.AbleToScale {
			return &ma.Status.Conditions[i]
		}
	}
	return nil
}

// TestTargetServingMetricsAPIRefused: a MetricAutoscaler whose target's
// pods back the external metrics APIService (the adapter itself) is not
// scaled, and says so in the condition and an event that kubectl describe
// shows; its metrics are still read and shown. The opt-in annotation lifts
// it. Before, the adapter could be scaled to zero by an autoscaler reading
// it, and no failed read would ever bring it back.
func TestTargetServingMetricsAPIRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, metricAutoscaler(nil), 4, 240) // the queue asks for 8
	// the fixture's target selects app=workers; its pods carry it
	f.serveMetricsAPI(t, "external.metrics.k8s.io", "default", "metricscale-adapter", map[string]string{"app": "workers"})
	ma := f.reconcile(t)
	if f.replicas != 4 || f.writes != 0 {
		t.Fatalf("the metrics API's own workload was scaled to %d (%d writes)", f.replicas, f.writes)
	}
	c := ableToScale(ma)
	if c == nil || c.Status != corev1.ConditionFalse || c.Reason != ReasonTargetServesMetricsAPI ||
		!strings.Contains(c.Message, "v1beta1.external.metrics.k8s.io") || !strings.Contains(c.Message, AllowMetricsAPITargetAnnotation) {
		t.Errorf("AbleToScale %+v; want False %s naming the APIService and the annotation", c, ReasonTargetServesMetricsAPI)
	}
	if len(ma.Status.CurrentMetrics) != 1 || ma.Status.DesiredReplicas != 4 {
		t.Errorf("status metrics %v desired %d; want the metric shown and 4", ma.Status.CurrentMetrics, ma.Status.DesiredReplicas)
	}
	events := strings.Join(eventsOf(f.recorder.Events), "\n")
	if !strings.Contains(events, "Warning "+ReasonTargetServesMetricsAPI) || strings.Contains(events, "DryRun") {
		t.Errorf("events %q; want a %s warning and no dry-run event", events, ReasonTargetServesMetricsAPI)
	}

	// opted in: scaled as any target
	u, err := f.dyn.Resource(v1alpha1.GroupVersionResource).Namespace("default").Get(context.Background(), "workers", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.SetAnnotations(map[string]string{AllowMetricsAPITargetAnnotation: "true"})
	if _, err := f.dyn.Resource(v1alpha1.GroupVersionResource).Namespace("default").Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.stored(t)
	ma = f.reconcile(t)
	if f.replicas != 8 {
		t.Errorf("opted in: %d replicas, want 8", f.replicas)
	}
	if c := ableToScale(ma); c == nil || c.Status != corev1.ConditionTrue {
		t.Errorf("opted in: AbleToScale %+v", c)
	}
}

// TestOtherTargetsNotRefused: a metrics API served from another namespace,
// or by other pods, leaves the target alone.
func TestOtherTargetsNotRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, metricAutoscaler(nil), 4, 240)
	f.serveMetricsAPI(t, "external.metrics.k8s.io", "metricscale", "metricscale-adapter", map[string]string{"app": "workers"})
	f.serveMetricsAPI(t, "custom.metrics.k8s.io", "default", "prometheus-adapter", map[string]string{"app": "prometheus-adapter"})
	f.serveMetricsAPI(t, "widgets.example.com", "default", "widgets", map[string]string{"app": "workers"})
	f.reconcile(t)
	if f.replicas != 8 {
		t.Errorf("%d replicas, want 8: the target serves no metrics API of its namespace", f.replicas)
	}
}

func TestImpliedLabels(t *testing.T) {
	t.Parallel()
	sel, err := labels.Parse("app=web,tier in (front),env in (a,b),!canary,x!=y")
	if err != nil {
		t.Fatal(err)
	}
	if got := impliedLabels(sel).String(); got != "app=web,tier=front" {
		t.Errorf("implied %q", got)
	}
}

// TestTargetPodsServingMetricsAPIRefused: the Service selects a label the
// target's selector does not name but its pods carry.
func TestTargetPodsServingMetricsAPIRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, metricAutoscaler(nil), 4, 240)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "workers-0", Labels: map[string]string{"app": "workers", "component": "metrics"}}}
	if _, err := f.ctrl.clients.Kube.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.serveMetricsAPI(t, "custom.metrics.k8s.io", "default", "adapter", map[string]string{"component": "metrics"})
	ma := f.reconcile(t)
	if f.writes != 0 {
		t.Fatalf("scaled to %d", f.replicas)
	}
	if c := ableToScale(ma); c == nil || c.Reason != ReasonTargetServesMetricsAPI || !strings.Contains(c.Message, "v1beta1.custom.metrics.k8s.io") {
		t.Errorf("AbleToScale %+v", c)
	}
}
