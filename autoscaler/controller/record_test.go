package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/metricsource"
	"github.com/metricscale/metricscale/autoscaler/record"
	"github.com/metricscale/metricscale/autoscaler/replay"
)

// liveWorld answers a queue's depth (External) and each pod's cpu
// (metrics.k8s.io) as the test sets them.
type liveWorld struct {
	queue
	cpu       map[string]int64 // milli-CPU by pod
	failQueue bool
	now       func() time.Time
}

func (w *liveWorld) ResourceMetric(_ context.Context, res corev1.ResourceName, _ string, sel labels.Selector, container string) (metricsource.PodMetricsInfo, time.Time, error) {
	info := metricsource.PodMetricsInfo{}
	for pod, v := range w.cpu {
		info[pod] = metricsource.PodMetric{Timestamp: w.now().Add(-10 * time.Second).Truncate(time.Second), Window: 30 * time.Second, Value: v}
	}
	return info, w.now(), nil
}

func (w *liveWorld) ExternalMetric(ctx context.Context, name, ns string, sel labels.Selector) ([]int64, time.Time, error) {
	if w.failQueue {
		return nil, time.Time{}, errors.New("the server is currently unable to handle the request")
	}
	// Two series, summed by the core.
	return []int64{w.depth * 600, w.depth * 400}, w.now(), nil
}

// TestRecordReplaysToTheSameDecisions runs a controller with a recorder
// through scale-ups, a blocked scale-down, a failing metric and the
// fallback, a failed scale write, a failed status write, a spec edit and a
// scale-down, exports the recording as a scenario file, and replays it:
// every step decides as the controller did.
func TestRecordReplaysToTheSameDecisions(t *testing.T) {
	t.Parallel()
	fifty := int32(50)
	ma := metricAutoscaler(func(m *v1alpha1.MetricAutoscaler) {
		m.Spec.MaxReplicas = 10
		m.Spec.Metrics = append(m.Spec.Metrics, autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
			Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &fifty}}})
		m.Spec.Metrics[0].External.Metric.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"queue": "jobs"}}
		m.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{
			StabilizationWindowSeconds: ptr(int32(3)),
			Policies:                   []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 2, PeriodSeconds: 2}},
		}}
		m.Spec.Fallback = &v1alpha1.Fallback{FailureThreshold: 2, Replicas: 5}
	})
	f := newFixture(t, ma, 2, 240)
	rec := record.New(record.Options{MaxSteps: 100, MaxAge: time.Hour})
	f.ctrl.cfg.Recorder = rec
	w := &liveWorld{queue: queue{depth: 240}, cpu: map[string]int64{}, now: f.clock.Now}
	f.ctrl.clients.Metrics = w
	for i := range 2 {
		name := fmt.Sprintf("workers-%d", i)
		w.cpu[name] = 200
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "workers"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "worker", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &metav1.Time{Time: t0.Add(-time.Hour)},
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Time{Time: t0.Add(-time.Hour)}}}},
		}
		if _, err := f.ctrl.clients.Kube.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var failScale, failStatus bool
	f.scales.PrependReactor("update", "deployments", func(core.Action) (bool, runtime.Object, error) {
		if failScale {
			return true, nil, errors.New("the server is currently unable to handle the request (put deployments.apps workers)")
		}
		return false, nil, nil
	})
	f.dyn.PrependReactor("update", "metricautoscalers", func(a core.Action) (bool, runtime.Object, error) {
		if failStatus && a.GetSubresource() == "status" {
			return true, nil, errors.New("conflict")
		}
		return false, nil, nil
	})

	type live struct{ replicas int32 }
	var observed []live
	step := func(after time.Duration, change func()) {
		t.Helper()
		f.clock.Step(after)
		failScale, failStatus = false, false
		if change != nil {
			change()
		}
		_, _ = f.ctrl.reconcile(context.Background(), kindMA+"/default/workers")
		f.stored(t)
		observed = append(observed, live{f.replicas})
	}
	step(0, nil)                                                                                               // 2 → 6: the queue wants 8, the scale-up policies allow 6
	step(time.Second, nil)                                                                                     // held at 6 by the policies' period
	step(time.Second, func() { w.failQueue = true })                                                           // the queue fails once: cpu alone may not scale down
	step(time.Second, func() { w.failQueue, failStatus = true, true })                                         // the second failure starts the fallback (held by the window); its status is not saved
	step(time.Second, func() { w.failQueue = true })                                                           // so this failure is counted from the stored run again: 6 → 5
	step(time.Second, func() { w.failQueue, w.depth = false, 30 })                                             // answers again: 1, held by the 3s window
	step(5*time.Second, nil)                                                                                   // past the window: 2 pods per 2s, 5 → 3
	step(3*time.Second, func() { failScale = true })                                                           // 3 → 1 fails to write
	step(time.Second, func() { editSpec(t, f, func(s *v1alpha1.MetricAutoscalerSpec) { s.MaxReplicas = 3 }) }) // 3 → 1
	step(3*time.Second, func() { w.cpu["workers-0"], w.cpu["workers-1"] = 900, 900 })                          // cpu 90% of 50%: up to max 3
	step(time.Second, func() { w.depth = 0; w.cpu["workers-0"], w.cpu["workers-1"] = 100, 100 })               // held by the window
	step(5*time.Second, nil)                                                                                   // 3 → 1

	got, err := rec.Export("default", "workers", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Recorded) != len(observed) {
		t.Fatalf("%d reconciles recorded, %d run", len(got.Recorded), len(observed))
	}
	for i, d := range got.Recorded {
		if d.Replicas != observed[i].replicas {
			t.Errorf("step %d: recorded %d replicas, the target had %d", i, d.Replicas, observed[i].replicas)
		}
	}
	if len(got.Warnings) > 0 {
		t.Errorf("warnings: %v", got.Warnings)
	}
	data, err := replay.YAML(got)
	if err != nil {
		t.Fatal(err)
	}
	diffs, err := replay.Check(context.Background(), got, data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if len(diffs) > 0 {
		t.Errorf("the replay differs from the recorded decisions:\n  %s\n%s", strings.Join(diffs, "\n  "), data)
	}
	// The run went through what it was meant to.
	var ups, downs, writeFails, explicit int
	for i, d := range got.Recorded {
		switch {
		case d.Rescaled && d.Replicas > d.CurrentReplicas:
			ups++
		case d.Rescaled:
			downs++
		}
		if strings.Contains(d.Error, "failed to rescale") {
			writeFails++
		}
		if i > 0 && got.Scenario.Steps[i].Status != nil {
			explicit++
		}
	}
	if ups < 2 || downs < 2 || writeFails != 1 || explicit != 1 {
		t.Errorf("%d scale-ups, %d scale-downs, %d failed writes, %d steps with their own status; want ≥2, ≥2, 1, 1\n%s", ups, downs, writeFails, explicit, data)
	}
	if !strings.Contains(string(data), "[fallback]") || !strings.Contains(string(data), "[scale-up policy]") || !strings.Contains(string(data), "[stabilization window]") {
		t.Errorf("the recording's comments do not show the fallback, a policy and the window:\n%s", data)
	}
}

// editSpec changes the stored spec (a new generation), as a user's edit.
func editSpec(t *testing.T, f *fixture, mutate func(*v1alpha1.MetricAutoscalerSpec)) {
	t.Helper()
	ma := f.stored(t)
	mutate(&ma.Spec)
	ma.Generation++
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ma)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.dyn.Resource(v1alpha1.GroupVersionResource).Namespace("default").Update(context.Background(), &unstructured.Unstructured{Object: u}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.stored(t)
}

func ptr[T any](v T) *T { return &v }

// TestRecordReplaysScaleToZero records an autoscaler with spec.scaleToZero
// from zero, through activation and the cooldown, back to zero, with the
// status write of the activation lost: the next reconcile reads a status
// without lastActiveTime, and so must the replay, or the cooldown would end
// a second earlier there.
func TestRecordReplaysScaleToZero(t *testing.T) {
	t.Parallel()
	ma := metricAutoscaler(func(m *v1alpha1.MetricAutoscaler) {
		m.Spec.MinReplicas = ptr(int32(0))
		m.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr(int32(0))}}
		m.Spec.ScaleToZero = &v1alpha1.ScaleToZero{
			CooldownPeriod: &metav1.Duration{Duration: 5 * time.Second},
			Activation:     []v1alpha1.MetricActivation{{Metric: "queue_messages_ready", Value: resource.MustParse("5")}},
		}
	})
	f := newFixture(t, ma, 0, 3)
	rec := record.New(record.Options{MaxSteps: 100, MaxAge: time.Hour})
	f.ctrl.cfg.Recorder = rec
	var failStatus bool
	f.dyn.PrependReactor("update", "metricautoscalers", func(a core.Action) (bool, runtime.Object, error) {
		if failStatus && a.GetSubresource() == "status" {
			return true, nil, errors.New("conflict")
		}
		return false, nil, nil
	})
	var observed []int32
	step := func(after time.Duration, depth int64, lose bool) {
		t.Helper()
		f.clock.Step(after)
		f.src.depth, failStatus = depth, lose
		_, _ = f.ctrl.reconcile(context.Background(), kindMA+"/default/workers")
		f.stored(t)
		observed = append(observed, f.replicas)
	}
	step(0, 3, false)                     // 3 messages, activation 5: stays at zero
	step(time.Second, 100, true)          // activated: 0 → 4; the status with lastActiveTime is lost
	step(time.Second, 0, false)           // idle: one replica until the cooldown ends, counted from now
	step(4500*time.Millisecond, 0, false) // 4.5s into the cooldown: still one
	step(time.Second, 0, false)           // past it: zero

	want := []int32{0, 4, 1, 1, 0}
	if fmt.Sprint(observed) != fmt.Sprint(want) {
		t.Fatalf("the controller went through %v, want %v", observed, want)
	}
	got, err := rec.Export("default", "workers", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := replay.YAML(got)
	if err != nil {
		t.Fatal(err)
	}
	diffs, err := replay.Check(context.Background(), got, data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if len(diffs) > 0 {
		t.Errorf("the replay differs from the recorded decisions:\n  %s\n%s", strings.Join(diffs, "\n  "), data)
	}
	if !strings.Contains(string(data), "[activation/cooldown]") {
		t.Errorf("the recording's comments do not name the activation rule:\n%s", data)
	}
}
