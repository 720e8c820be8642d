package record

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/behavior"
	"github.com/metricscale/metricscale/autoscaler/decision"
	"github.com/metricscale/metricscale/autoscaler/metricsource"
)

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// world answers a queue's depth and, per pod and container, cpu and memory.
type world struct {
	depth   []int64 // milli-values of the series
	usage   map[string]map[string]corev1.ResourceList
	now     time.Time
	failExt bool
}

func (w *world) ResourceMetric(_ context.Context, res corev1.ResourceName, _ string, _ labels.Selector, container string) (metricsource.PodMetricsInfo, time.Time, error) {
	var items []metricsv1beta1.PodMetrics
	for pod, cs := range w.usage {
		item := metricsv1beta1.PodMetrics{ObjectMeta: metav1.ObjectMeta{Name: pod}, Timestamp: metav1.NewTime(w.now.Add(-20 * time.Second)), Window: metav1.Duration{Duration: 30 * time.Second}}
		for _, name := range []string{"app", "sidecar"} {
			if u, ok := cs[name]; ok {
				item.Containers = append(item.Containers, metricsv1beta1.ContainerMetrics{Name: name, Usage: u})
			}
		}
		items = append(items, item)
	}
	return metricsource.FromPodMetrics(items, res, container, false)
}
func (w *world) PodsMetric(context.Context, string, string, labels.Selector, labels.Selector) (metricsource.PodMetricsInfo, time.Time, error) {
	return nil, time.Time{}, errors.New("none")
}
func (w *world) ObjectMetric(context.Context, string, string, *autoscalingv2.CrossVersionObjectReference, labels.Selector) (int64, time.Time, error) {
	return 0, time.Time{}, errors.New("none")
}
func (w *world) ExternalMetric(context.Context, string, string, labels.Selector) ([]int64, time.Time, error) {
	if w.failExt {
		return nil, time.Time{}, errors.New("unavailable")
	}
	return w.depth, w.now, nil
}

type podList []*corev1.Pod

func (l podList) List(labels.Selector) ([]*corev1.Pod, error) { return l, nil }

func pods(n int) podList {
	var out podList
	for i := range n {
		out = append(out, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("w-%d", i), Namespace: "ns", Labels: map[string]string{"app": "w"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "app", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}}},
				{Name: "sidecar", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}}},
			}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &metav1.Time{Time: t0.Add(-time.Hour)},
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Time{Time: t0.Add(-time.Hour)}}}},
		})
	}
	return out
}

func queueSpec(m ...autoscalingv2.MetricSpec) *v1alpha1.MetricAutoscaler {
	avg := resource.MustParse("10")
	minR := int32(1)
	ma := &v1alpha1.MetricAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns", UID: "u1", Generation: 1},
		Spec: v1alpha1.MetricAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "w"},
			MinReplicas:    &minR, MaxReplicas: 30,
			Metrics: append([]autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "q", Selector: &metav1.LabelSelector{
					MatchLabels:      map[string]string{"queue": "jobs"},
					MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"dev"}}}}},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &avg}}}}, m...),
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr(int32(4)),
				Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 3, PeriodSeconds: 2}}}},
		},
	}
	return ma
}

func ptr[T any](v T) *T { return &v }

// driver reconciles one MetricAutoscaler as the controller does: the
// decision core with the object's status and the remembered history, the
// scale write, and the status written back (in stored form).
type driver struct {
	t        *testing.T
	r        *Recorder
	ma       *v1alpha1.MetricAutoscaler
	history  behavior.History
	replicas int32
	w        *world
	pods     podList
	now      time.Time
	// scaleErr makes the next scale read fail; statusLost drops the next
	// status write.
	scaleErr, statusLost bool
}

func (d *driver) reconcile(after time.Duration) decision.Result {
	d.t.Helper()
	d.now = d.now.Add(after)
	d.w.now = d.now
	ma := d.ma.DeepCopy()
	rc := d.r.Begin(ma)
	settings := decision.DefaultSettings()
	settings.Gates.ScaleToZero = true
	in := decision.Input{Autoscaler: ma.HPA(), Scale: decision.Scale{Replicas: d.replicas, StatusReplicas: d.replicas, Selector: "app=w"},
		Pods: d.pods, Metrics: d.w, History: d.history, Settings: settings, Now: d.now,
		Fallback: ma.Spec.Fallback, FallbackState: ma.Status.Fallback}
	if d.scaleErr {
		in.ScaleErr, d.scaleErr = errors.New("not found"), false
	}
	rc.Input(&in)
	plan := decision.Decide(context.Background(), in)
	res := plan.Finish(nil)
	d.history = res.History
	if res.Rescaled {
		d.replicas = res.Replicas
	}
	written := v1alpha1.MetricAutoscalerStatus{LastScaleTime: res.Status.LastScaleTime, CurrentReplicas: res.Status.CurrentReplicas,
		DesiredReplicas: res.Status.DesiredReplicas, CurrentMetrics: res.Status.CurrentMetrics, Conditions: res.Status.Conditions, Fallback: res.Fallback}
	rc.Done(res, &written)
	if d.statusLost {
		d.statusLost = false
		return res
	}
	stored, err := json.Marshal(written)
	if err != nil {
		d.t.Fatal(err)
	}
	d.ma.Status = v1alpha1.MetricAutoscalerStatus{}
	if err := json.Unmarshal(stored, &d.ma.Status); err != nil {
		d.t.Fatal(err)
	}
	return res
}

func newDriver(t *testing.T, r *Recorder, ma *v1alpha1.MetricAutoscaler, replicas int32) *driver {
	w := &world{depth: []int64{30000}, usage: map[string]map[string]corev1.ResourceList{}}
	return &driver{t: t, r: r, ma: ma, replicas: replicas, w: w, pods: pods(3), now: t0}
}

// ReplayCheck writes a recording as a scenario file and replays it (package
// replay, which imports this one: replay_test.go sets it).
var ReplayCheck func(ctx context.Context, rec *Recording) (data []byte, diffs []string, err error)

// replays exports the recording from since, replays it and compares.
func replays(t *testing.T, r *Recorder, since time.Time) *Recording {
	t.Helper()
	rec, err := r.Export("ns", "w", since)
	if err != nil {
		t.Fatal(err)
	}
	data, diffs, err := ReplayCheck(context.Background(), rec)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if len(diffs) > 0 {
		t.Fatalf("the replay differs:\n  %s\n%s", strings.Join(diffs, "\n  "), data)
	}
	return rec
}

// run drives a queue through rises and falls, so that the history (the
// 4s window, the 2s policy period) matters at most steps.
func run(d *driver, n int, every time.Duration) {
	depths := []int64{30, 120, 200, 200, 40, 40, 10, 10, 90, 5, 5, 5}
	for i := range n {
		v := depths[i%len(depths)] * 1000
		d.w.depth = []int64{v * 3 / 4, v / 4}
		d.reconcile(every)
	}
}

func TestRingKeepsTheLastStepsAndStillReplays(t *testing.T) {
	t.Parallel()
	r := New(Options{MaxSteps: 5, MaxAge: time.Hour})
	d := newDriver(t, r, queueSpec(), 2)
	run(d, 23, time.Second)
	rec := replays(t, r, time.Time{})
	if len(rec.Recorded) != 5 {
		t.Fatalf("%d steps kept, want 5", len(rec.Recorded))
	}
	if want := d.now.Add(-4 * time.Second).Format(time.RFC3339Nano); rec.Recorded[0].Time != want {
		t.Errorf("the oldest kept step is at %s, want %s", rec.Recorded[0].Time, want)
	}
	// From a later step on: its history is rebuilt from the seed.
	rec = replays(t, r, d.now.Add(-2*time.Second))
	if len(rec.Recorded) != 3 {
		t.Errorf("%d steps since the third-last, want 3", len(rec.Recorded))
	}
}

func TestRingDropsOldSteps(t *testing.T) {
	t.Parallel()
	r := New(Options{MaxSteps: 100, MaxAge: 10 * time.Second})
	d := newDriver(t, r, queueSpec(), 2)
	run(d, 12, 3*time.Second)
	rec := replays(t, r, time.Time{})
	// Steps every 3s, the newest at 36s: those within 10s are at 27s..36s.
	if len(rec.Recorded) != 4 {
		t.Errorf("%d steps kept, want the 4 of the last 10s", len(rec.Recorded))
	}
	if _, err := r.Export("ns", "w", d.now.Add(time.Second)); !errors.Is(err, ErrNotRecorded) {
		t.Errorf("export of the future: %v, want ErrNotRecorded", err)
	}
}

// TestGapsAndLostStatus: a reconcile whose scale cannot be read is left out
// and the next one gives the state it read; so does one that reads a
// status other than the one written before (a lost write).
func TestGapsAndLostStatus(t *testing.T) {
	t.Parallel()
	r := New(DefaultOptions())
	ma := queueSpec()
	ma.Spec.Fallback = &v1alpha1.Fallback{FailureThreshold: 2, Replicas: 9}
	ma.Spec.Behavior.ScaleUp = &autoscalingv2.HPAScalingRules{Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 1000, PeriodSeconds: 1}}}
	d := newDriver(t, r, ma, 2)
	run(d, 3, time.Second)
	d.scaleErr = true
	d.reconcile(time.Second)
	d.w.failExt, d.statusLost = true, true
	d.reconcile(time.Second) // first failure, not saved
	d.reconcile(time.Second) // counted as the first again
	d.reconcile(time.Second) // second: fallback
	d.w.failExt = false
	run(d, 3, time.Second)
	rec := replays(t, r, time.Time{})
	if len(rec.Recorded) != 9 {
		t.Errorf("%d steps, want 9 (the one without a scale left out)", len(rec.Recorded))
	}
	var explicit []int
	for i, s := range rec.Scenario.Steps {
		if s.Status != nil {
			explicit = append(explicit, i)
		}
	}
	// Step 3 follows the gap, step 4 reads the status of the reconcile
	// before step 3 (whose write was lost).
	if fmt.Sprint(explicit) != "[3 4]" {
		t.Errorf("steps with their own status %v, want [3 4]: after the gap and after the lost write", explicit)
	}
	// Below the threshold a failing metric blocks the scale-down (steps 3
	// and 4: the count restarted after the lost write); the second failure
	// in a row goes to the fallback's 9 (through the scale-down policy).
	for i, want := range []string{string(decision.RuleMetricsFailed), string(decision.RuleMetricsFailed), string(decision.RuleScaleDownPolicy)} {
		if got := rec.Recorded[3+i].Rule; got != want {
			t.Errorf("step %d decided by %q, want %q", 3+i, got, want)
		}
	}
	if r := rec.Recorded[5]; !r.Rescaled || r.Replicas >= r.CurrentReplicas {
		t.Errorf("the fallback did not scale down: %+v", r)
	}
}

func TestForgetAndRecreate(t *testing.T) {
	t.Parallel()
	r := New(DefaultOptions())
	d := newDriver(t, r, queueSpec(), 2)
	run(d, 3, time.Second)
	// The same name, a new object: its recording starts afresh.
	d.ma.UID, d.history = types.UID("u2"), behavior.History{}
	run(d, 2, time.Second)
	if rec := replays(t, r, time.Time{}); len(rec.Recorded) != 2 || rec.Scenario.Autoscaler.Metadata.UID != "u2" {
		t.Errorf("after recreation: %d steps of %s, want 2 of u2", len(rec.Recorded), rec.Scenario.Autoscaler.Metadata.UID)
	}
	r.Forget("ns", "w")
	if _, err := r.Export("ns", "w", time.Time{}); !errors.Is(err, ErrNotRecorded) {
		t.Errorf("after Forget: %v", err)
	}
}

func TestNilRecorderRecordsNothing(t *testing.T) {
	t.Parallel()
	var r *Recorder
	d := newDriver(t, r, queueSpec(), 2)
	run(d, 2, time.Second)
	if _, err := r.Export("ns", "w", time.Time{}); !errors.Is(err, ErrNotRecorded) {
		t.Errorf("nil recorder export: %v", err)
	}
	r.Forget("ns", "w")
}

// TestPodMetricsRebuilt: a reconcile that reads cpu summed over containers,
// cpu of one container and memory (which one pod lacks in a container) is
// recorded as metrics.k8s.io samples that answer each query as the
// controller's answer did.
func TestPodMetricsRebuilt(t *testing.T) {
	t.Parallel()
	fifty, hundred := int32(50), int32(100)
	ma := queueSpec(
		autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &fifty}}},
		autoscalingv2.MetricSpec{Type: autoscalingv2.ContainerResourceMetricSourceType, ContainerResource: &autoscalingv2.ContainerResourceMetricSource{Name: corev1.ResourceCPU, Container: "app",
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &fifty}}},
		autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceMemory,
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &hundred}}},
	)
	r := New(DefaultOptions())
	d := newDriver(t, r, ma, 3)
	cpu := func(app, side string, mem bool) map[string]corev1.ResourceList {
		out := map[string]corev1.ResourceList{
			"app":     {corev1.ResourceCPU: resource.MustParse(app), corev1.ResourceMemory: resource.MustParse("900Mi")},
			"sidecar": {corev1.ResourceCPU: resource.MustParse(side), corev1.ResourceMemory: resource.MustParse("100Mi")},
		}
		if !mem {
			delete(out["sidecar"], corev1.ResourceMemory)
		}
		return out
	}
	d.w.usage = map[string]map[string]corev1.ResourceList{"w-0": cpu("400m", "100m", true), "w-1": cpu("450m", "50m", false), "w-2": cpu("700m", "300m", true)}
	d.reconcile(time.Second)
	d.w.usage["w-1"] = cpu("100m", "10m", true)
	d.reconcile(time.Second)
	rec := replays(t, r, time.Time{})

	// Each recorded query, asked of the rebuilt samples, answers the same.
	r.mu.Lock()
	steps := r.tapes["ns/w"].steps
	r.mu.Unlock()
	for i, st := range steps {
		sd := rec.Scenario.Steps[i]
		if sd.PodMetrics == nil {
			t.Fatalf("step %d: no podMetrics", i)
		}
		var items []metricsv1beta1.PodMetrics
		for _, pm := range *sd.PodMetrics {
			item := metricsv1beta1.PodMetrics{ObjectMeta: metav1.ObjectMeta{Name: pm.Pod}, Timestamp: pm.Timestamp}
			for name, u := range pm.Containers {
				item.Containers = append(item.Containers, metricsv1beta1.ContainerMetrics{Name: name, Usage: u})
			}
			items = append(items, item)
		}
		if len(st.answers.resource) != 3 {
			t.Fatalf("step %d: %d resource queries recorded, want 3", i, len(st.answers.resource))
		}
		for _, q := range st.answers.resource {
			got, _, _ := metricsource.FromPodMetrics(items, q.resource, q.container, false)
			if len(got) != len(q.info) {
				t.Errorf("step %d %s/%q: %d pods answered, recorded %d", i, q.resource, q.container, len(got), len(q.info))
			}
			for pod, m := range q.info {
				if got[pod].Value != m.Value {
					t.Errorf("step %d %s/%q pod %s: %d, recorded %d", i, q.resource, q.container, pod, got[pod].Value, m.Value)
				}
			}
		}
	}
	if _, ok := steps[0].answers.resource[2].info["w-1"]; ok {
		t.Errorf("w-1 lacks memory in a container at step 0 and should have no memory sample")
	}
}

func TestSatisfyingLabels(t *testing.T) {
	t.Parallel()
	for _, sel := range []string{"", "queue=jobs", "queue in (a,b),tier!=dev", "env,!debug", "n>5,m<3", "a=b,a=c"} {
		got, ok := satisfying(sel)
		parsed, _ := labels.Parse(sel)
		if want := sel != "a=b,a=c"; ok != want {
			t.Errorf("%q: ok %v, want %v (labels %v)", sel, ok, want, got)
		}
		if ok && !parsed.Matches(labels.Set(got)) {
			t.Errorf("%q does not match %v", sel, got)
		}
	}
}

// TestStepCost measures what a recorded reconcile of an External-metric
// autoscaler keeps in steady state (spec, status and pods shared).
func TestStepCost(t *testing.T) {
	r := New(Options{MaxSteps: 100000})
	d := newDriver(t, r, queueSpec(), 2)
	d.w.depth = []int64{20000}
	run(d, 50, time.Second)
	const n = 2000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range n {
		d.w.depth = []int64{20000} // steady: 2 replicas
		d.reconcile(time.Second)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	t.Logf("%d bytes per recorded step (StepCost %d)", per, StepCost)
	if per > 2*StepCost {
		t.Errorf("%d bytes per step, over twice StepCost (%d)", per, StepCost)
	}
	runtime.KeepAlive(r)
}
