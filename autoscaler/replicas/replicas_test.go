package replicas

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/metricscale/metricscale/autoscaler/metricsource"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// fakeSource answers from fixed values; a nil map means the query fails.
type fakeSource struct {
	pods     metricsource.PodMetricsInfo
	object   int64
	external []int64
	err      error
}

func (f *fakeSource) ResourceMetric(context.Context, corev1.ResourceName, string, labels.Selector, string) (metricsource.PodMetricsInfo, time.Time, error) {
	return copyInfo(f.pods), now, f.err
}
func (f *fakeSource) PodsMetric(context.Context, string, string, labels.Selector, labels.Selector) (metricsource.PodMetricsInfo, time.Time, error) {
	return copyInfo(f.pods), now, f.err
}
func (f *fakeSource) ObjectMetric(context.Context, string, string, *autoscalingv2.CrossVersionObjectReference, labels.Selector) (int64, time.Time, error) {
	return f.object, now, f.err
}
func (f *fakeSource) ExternalMetric(context.Context, string, string, labels.Selector) ([]int64, time.Time, error) {
	return f.external, now, f.err
}

func copyInfo(in metricsource.PodMetricsInfo) metricsource.PodMetricsInfo {
	out := make(metricsource.PodMetricsInfo, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

type podOpt func(*corev1.Pod)

// pod is a Running, long-ready pod with one container requesting cpuMilli.
func pod(name string, cpuMilli int64, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name:      "app",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(cpuMilli, resource.DecimalSI)}},
		}}},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			StartTime:  &metav1.Time{Time: now.Add(-time.Hour)},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Time{Time: now.Add(-59 * time.Minute)}}},
		},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }
func deleted() podOpt {
	return func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: now} }
}

// started sets the start time and the Ready condition's status and time.
func started(ago time.Duration, ready corev1.ConditionStatus, readyAgo time.Duration) podOpt {
	return func(p *corev1.Pod) {
		p.Status.StartTime = &metav1.Time{Time: now.Add(-ago)}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready, LastTransitionTime: metav1.Time{Time: now.Add(-readyAgo)}}}
	}
}

func samples(values map[string]int64) metricsource.PodMetricsInfo {
	info := metricsource.PodMetricsInfo{}
	for name, v := range values {
		info[name] = metricsource.PodMetric{Value: v, Timestamp: now, Window: 30 * time.Second}
	}
	return info
}

func calculator(src metricsource.Source, pods ...*corev1.Pod) *Calculator {
	return &Calculator{
		Source: src, Namespace: "default", Selector: labels.Everything(), Pods: pods, Now: now,
		CPUInitializationPeriod: 5 * time.Minute, InitialReadinessDelay: 30 * time.Second, PodLevelResources: true,
	}
}

var tol10 = Tolerances{ScaleDown: 0.1, ScaleUp: 0.1}

func TestResourceUtilization(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name        string
		current     int32
		target      int32
		pods        []*corev1.Pod
		usage       map[string]int64
		tol         Tolerances
		want        int32
		wantUtil    int32
		wantRaw     int64
		wantErrText string
	}{
		{
			// 1350m of 1500m = 90% against 60%: ceil(1.5 × 3) = 5.
			name: "scale up", current: 3, target: 60,
			pods:  []*corev1.Pod{pod("a", 500), pod("b", 500), pod("c", 500)},
			usage: map[string]int64{"a": 400, "b": 450, "c": 500}, tol: tol10,
			want: 5, wantUtil: 90, wantRaw: 450,
		},
		{
			// 54% against 50%: ratio 1.08 is inside the 10% band.
			name: "inside tolerance", current: 4, target: 50,
			pods:  []*corev1.Pod{pod("a", 1000), pod("b", 1000), pod("c", 1000), pod("d", 1000)},
			usage: map[string]int64{"a": 540, "b": 540, "c": 540, "d": 540}, tol: tol10,
			want: 4, wantUtil: 54, wantRaw: 540,
		},
		{
			// Same 54% with a 5% up-tolerance scales: ceil(1.08 × 4) = 5.
			name: "per-direction tolerance", current: 4, target: 50,
			pods:  []*corev1.Pod{pod("a", 1000), pod("b", 1000), pod("c", 1000), pod("d", 1000)},
			usage: map[string]int64{"a": 540, "b": 540, "c": 540, "d": 540}, tol: Tolerances{ScaleDown: 0.1, ScaleUp: 0.05},
			want: 5, wantUtil: 54, wantRaw: 540,
		},
		{
			// Ready pods at 10% of 1000m, one missing: ratio 0.125 is a
			// scale-down, so the missing pod counts as 100%:
			// (300+1000)/4000 = 32% → 0.4 × 4 = ceil(1.6) = 2.
			name: "missing pod counts full on scale-down", current: 4, target: 80,
			pods:  []*corev1.Pod{pod("a", 1000), pod("b", 1000), pod("c", 1000), pod("d", 1000)},
			usage: map[string]int64{"a": 100, "b": 100, "c": 100}, tol: tol10,
			want: 2, wantUtil: 10, wantRaw: 100,
		},
		{
			// A target above 100% makes the missing pod count at the target:
			// (3×100 + 1500)/4000 = 45% of 150 = 0.3 → ceil(1.2) = 2.
			name: "missing pod counts at target above 100%", current: 4, target: 150,
			pods:  []*corev1.Pod{pod("a", 1000), pod("b", 1000), pod("c", 1000), pod("d", 1000)},
			usage: map[string]int64{"a": 100, "b": 100, "c": 100}, tol: tol10,
			want: 2, wantUtil: 10, wantRaw: 100,
		},
		{
			// Ready a, b, c at 90% of 50 → ratio 1.8, a scale-up, so the
			// missing d counts 0%: 2700/4000 = 67% → 1.34 × 4 = ceil(5.36) = 6.
			name: "missing pod counts zero on scale-up", current: 4, target: 50,
			pods:  []*corev1.Pod{pod("a", 1000), pod("b", 1000), pod("c", 1000), pod("d", 1000)},
			usage: map[string]int64{"a": 900, "b": 900, "c": 900}, tol: tol10,
			want: 6, wantUtil: 90, wantRaw: 900,
		},
		{
			// Pending pod on a scale-up counts as 0%: (800+800)/3000 = 53% of 50
			// → 1.06, inside tolerance: no change.
			name: "unready pod damps a scale-up into tolerance", current: 3, target: 50,
			pods:  []*corev1.Pod{pod("a", 1000), pod("b", 1000), pod("c", 1000, phase(corev1.PodPending))},
			usage: map[string]int64{"a": 800, "b": 800}, tol: tol10,
			want: 3, wantUtil: 80, wantRaw: 800,
		},
		{
			// Missing pod on a slight scale-down flips the direction: 2 pods at
			// 45% of 50 (0.9) plus one at 100% → 63%: a scale-up, so no change.
			name: "direction flip keeps current", current: 3, target: 50,
			pods:  []*corev1.Pod{pod("a", 1000), pod("b", 1000), pod("c", 1000)},
			usage: map[string]int64{"a": 400, "b": 400}, tol: Tolerances{},
			want: 3, wantUtil: 40, wantRaw: 400,
		},
		{
			// Deleted and failed pods are ignored entirely.
			name: "ignored pods", current: 2, target: 50,
			pods:  []*corev1.Pod{pod("a", 1000), pod("b", 1000), pod("c", 1000, deleted()), pod("d", 1000, phase(corev1.PodFailed))},
			usage: map[string]int64{"a": 1000, "b": 1000, "c": 0, "d": 0}, tol: tol10,
			want: 4, wantUtil: 100, wantRaw: 1000,
		},
		{
			// Inside the CPU initialization period a sample taken less than a
			// window after the Ready transition is set aside: b is unready and
			// counts 0 on the scale-up: 1000/2000 = 50% → 1.0: no change.
			name: "cpu initialization: sample too early", current: 2, target: 50,
			pods:  []*corev1.Pod{pod("a", 1000), pod("b", 1000, started(2*time.Minute, corev1.ConditionTrue, 10*time.Second))},
			usage: map[string]int64{"a": 1000, "b": 1000}, tol: tol10,
			want: 2, wantUtil: 100, wantRaw: 1000,
		},
		{
			// A pod past initialization that became unready after it had been
			// ready counts normally.
			name: "past initialization: unready later counts", current: 2, target: 50,
			pods:  []*corev1.Pod{pod("a", 1000), pod("b", 1000, started(time.Hour, corev1.ConditionFalse, time.Minute))},
			usage: map[string]int64{"a": 1000, "b": 1000}, tol: tol10,
			want: 4, wantUtil: 100, wantRaw: 1000,
		},
		{
			name: "no pods", current: 2, target: 50, usage: map[string]int64{"a": 1}, tol: tol10,
			wantErrText: "no pods returned by selector",
		},
		{
			name: "only unready samples", current: 1, target: 50,
			pods:  []*corev1.Pod{pod("a", 1000, phase(corev1.PodPending))},
			usage: map[string]int64{"a": 500}, tol: tol10,
			wantErrText: "did not receive metrics",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := calculator(&fakeSource{pods: samples(tc.usage)}, tc.pods...)
			got, util, raw, err := c.ResourceUtilization(context.Background(), tc.current, tc.target, corev1.ResourceCPU, tc.tol, "")
			if tc.wantErrText != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrText) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErrText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || util != tc.wantUtil || raw != tc.wantRaw {
				t.Errorf("got (%d, %d%%, %d), want (%d, %d%%, %d)", got, util, raw, tc.want, tc.wantUtil, tc.wantRaw)
			}
		})
	}
}

func TestPodsAverageValue(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		current   int32
		target    int64
		pods      []*corev1.Pod
		values    map[string]int64
		want      int32
		wantUsage int64
	}{
		// (15+15+15)/3 = 15 against 10: ceil(1.5 × 3) = 5.
		{"scale up", 3, 10000, []*corev1.Pod{pod("a", 1), pod("b", 1), pod("c", 1)}, map[string]int64{"a": 15000, "b": 15000, "c": 15000}, 5, 15000},
		// Missing pod on a scale-down counts at the target: (2+2+10)/3 = 4.67
		// of 10 → ceil(0.466 × 3) = 2.
		{"missing at target on scale-down", 3, 10000, []*corev1.Pod{pod("a", 1), pod("b", 1), pod("c", 1)}, map[string]int64{"a": 2000, "b": 2000}, 2, 2000},
		// Unready (Pending) pods count 0 on a scale-up: (30+0)/2 = 15 → 1.5
		// → ceil(1.5 × 2) = 3.
		{"unready zero on scale-up", 2, 10000, []*corev1.Pod{pod("a", 1), pod("b", 1, phase(corev1.PodPending))}, map[string]int64{"a": 30000}, 3, 30000},
		// Readiness does not matter for a non-cpu metric: a NotReady running
		// pod's sample counts.
		{"non-cpu ignores readiness", 2, 10000, []*corev1.Pod{pod("a", 1), pod("b", 1, started(time.Minute, corev1.ConditionFalse, time.Second))}, map[string]int64{"a": 20000, "b": 20000}, 4, 20000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := calculator(&fakeSource{pods: samples(tc.values)}, tc.pods...)
			got, usage, err := c.PodsAverageValue(context.Background(), tc.current, tc.target, "m", tol10, labels.Everything())
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || usage != tc.wantUsage {
				t.Errorf("got (%d, %d), want (%d, %d)", got, usage, tc.want, tc.wantUsage)
			}
		})
	}
}

func TestObjectAndExternal(t *testing.T) {
	t.Parallel()
	ready := []*corev1.Pod{pod("a", 1), pod("b", 1), pod("c", 1, phase(corev1.PodPending)), pod("d", 1)}
	ctx := context.Background()
	ref := &autoscalingv2.CrossVersionObjectReference{Kind: "Ingress", Name: "main"}

	// Object Value: 150/100 × 3 ready pods = ceil(4.5) = 5.
	c := calculator(&fakeSource{object: 150000}, ready...)
	if got, usage, err := c.ObjectValue(ctx, 4, 100000, "rps", tol10, ref, labels.Everything()); err != nil || got != 5 || usage != 150000 {
		t.Errorf("ObjectValue = %d, %d, %v; want 5, 150000", got, usage, err)
	}
	// From zero replicas: ceil(150/100) = 2, pods and tolerance aside.
	if got, _, err := calculator(&fakeSource{object: 150000}).ObjectValue(ctx, 0, 100000, "rps", tol10, ref, labels.Everything()); err != nil || got != 2 {
		t.Errorf("ObjectValue from zero = %d, %v; want 2", got, err)
	}
	// Object AverageValue: 90 over 3 status replicas against 10 each:
	// ceil(90/10) = 9, current shown as 30.
	c = calculator(&fakeSource{object: 90000}, ready...)
	if got, usage, err := c.ObjectAverageValue(ctx, 3, 10000, "rps", tol10, ref, labels.Everything()); err != nil || got != 9 || usage != 30000 {
		t.Errorf("ObjectAverageValue = %d, %d, %v; want 9, 30000", got, usage, err)
	}
	// External Value sums series: (40+60)/50 × 3 ready = 6.
	c = calculator(&fakeSource{external: []int64{40000, 60000}}, ready...)
	if got, usage, err := c.ExternalValue(ctx, 4, 50000, "q", tol10, nil); err != nil || got != 6 || usage != 100000 {
		t.Errorf("ExternalValue = %d, %d, %v; want 6, 100000", got, usage, err)
	}
	// Overflowing sums saturate instead of wrapping.
	c = calculator(&fakeSource{external: []int64{math.MaxInt64 - 1, 5}}, ready...)
	if _, usage, err := c.ExternalValue(ctx, 4, 1000, "q", tol10, nil); err != nil || usage != math.MaxInt64 {
		t.Errorf("ExternalValue usage = %d, %v; want MaxInt64", usage, err)
	}
	// External AverageValue: 200 over 2 replicas against 10 → 20.
	c = calculator(&fakeSource{external: []int64{200000}})
	if got, usage, err := c.ExternalAverageValue(ctx, 2, 10000, "q", tol10, nil); err != nil || got != 20 || usage != 100000 {
		t.Errorf("ExternalAverageValue = %d, %d, %v; want 20, 100000", got, usage, err)
	}
	// Inside tolerance the status replicas stand: 205 over 20 against 10.
	if got, _, err := c.ExternalAverageValue(ctx, 20, 10000, "q", tol10, nil); err != nil || got != 20 {
		t.Errorf("ExternalAverageValue in tolerance = %d, %v; want 20", got, err)
	}
	// A failing query is an error, never a number.
	boom := errors.New("boom")
	if _, _, err := calculator(&fakeSource{err: boom}, ready...).ExternalValue(ctx, 4, 1, "q", tol10, nil); !errors.Is(err, boom) {
		t.Errorf("ExternalValue error = %v, want it to wrap %v", err, boom)
	}
}

func TestRequests(t *testing.T) {
	t.Parallel()
	always := corev1.ContainerRestartPolicyAlways
	withSidecar := pod("s", 500)
	withSidecar.Spec.InitContainers = []corev1.Container{
		{Name: "init", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}},
		{Name: "proxy", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}},
	}
	podLevel := pod("p", 500)
	podLevel.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}
	noRequest := pod("n", 500)
	noRequest.Spec.Containers = append(noRequest.Spec.Containers, corev1.Container{Name: "bare"})
	// An in-place resize from 500m to 1 under way: spec asks for 1, the
	// container still has 500m (status); the sidecar reports 100m of 250m.
	resizing := pod("r", 1000)
	resizing.Spec.InitContainers = withSidecar.Spec.InitContainers
	resizing.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Resources: &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}}
	resizing.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "proxy", Resources: &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}
	// A status without resources (an older kubelet) leaves spec's.
	noStatusResources := pod("o", 700)
	noStatusResources.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app"}}

	cases := []struct {
		name      string
		pod       *corev1.Pod
		container string
		podLevel  bool
		upstream  bool
		want      int64
		wantErr   string
	}{
		{"containers and sidecars, not plain init containers", withSidecar, "", true, false, 750, ""},
		{"one container", withSidecar, "proxy", true, false, 250, ""},
		{"pod-level request wins", podLevel, "", true, false, 2000, ""},
		{"pod-level off", podLevel, "", false, false, 500, ""},
		{"named container beats pod-level", podLevel, "app", true, false, 500, ""},
		{"missing request", noRequest, "", true, false, 0, "missing request for cpu in container bare"},
		{"unknown container", withSidecar, "nope", true, false, 0, "container nope not found"},
		{"resizing: the status' requests", resizing, "", true, false, 600, ""},
		{"resizing: one container's status", resizing, "app", true, false, 500, ""},
		{"resizing, upstream: spec's requests", resizing, "", true, true, 1250, ""},
		{"status without resources: spec's", noStatusResources, "", true, false, 700, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := calculator(nil, tc.pod)
			c.PodLevelResources = tc.podLevel
			c.UpstreamArithmetic = tc.upstream
			err := c.computeRequests(tc.container, corev1.ResourceCPU)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.requests[0] != tc.want {
				t.Errorf("request %d, want %d", c.requests[0], tc.want)
			}
		})
	}
}

// BenchmarkGroup measures pod grouping alone over many pods.
func BenchmarkGroup(b *testing.B) {
	pods := make([]*corev1.Pod, 1000)
	values := map[string]int64{}
	for i := range pods {
		name := fmt.Sprintf("p-%d", i)
		pods[i] = pod(name, 500)
		values[name] = 250
	}
	c := calculator(&fakeSource{pods: samples(values)}, pods...)
	info := samples(values)
	b.ReportAllocs()
	for b.Loop() {
		c.group(info, corev1.ResourceCPU)
	}
}

// TestSamplesOfUnknownPods follows upstream: a Pods metric averages every
// sample the API returned, while a utilization only counts known pods.
func TestSamplesOfUnknownPods(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pods := []*corev1.Pod{pod("a", 1000), pod("b", 1000), pod("c", 1000, phase(corev1.PodPending))}
	values := map[string]int64{"a": 10000, "b": 10000, "c": 90000, "zzz": 40000}
	c := calculator(&fakeSource{pods: samples(values)}, pods...)
	// (10+10+40)/3 = 20 against 10: ratio 2; c is unready so it counts 0:
	// 60/4 = 15 → 1.5 × 4 entries = 6.
	if got, usage, err := c.PodsAverageValue(ctx, 3, 10000, "m", tol10, labels.Everything()); err != nil || got != 6 || usage != 20000 {
		t.Errorf("PodsAverageValue = %d, %d, %v; want 6, 20000", got, usage, err)
	}
	// Utilization: a and b at 1000% of request (10 cores of 1) against 50%.
	got, util, _, err := c.ResourceUtilization(ctx, 3, 500, corev1.ResourceCPU, tol10, "")
	if err != nil || util != 1000 {
		t.Fatalf("ResourceUtilization util = %d, %v; want 1000", util, err)
	}
	// Rebalanced with c at 0: 20000/3000 = 666% of 500 → 1.332 × 4 entries = 6.
	if got != 6 {
		t.Errorf("ResourceUtilization = %d, want 6", got)
	}
}

// TestPodsListedOnlyWhenRead: AverageValue External and Object metrics
// never list pods; metrics that read pods list them once per reconcile, and
// a failed list fails only those metrics.
func TestPodsListedOnlyWhenRead(t *testing.T) {
	t.Parallel()
	src := &fakeSource{pods: samples(map[string]int64{"a": 900, "b": 900}), external: []int64{90}, object: 90}
	lists := 0
	c := calculator(src)
	c.ListPods = func() ([]*corev1.Pod, error) {
		lists++
		return []*corev1.Pod{pod("a", 1000), pod("b", 1000)}, nil
	}
	ctx := context.Background()
	if _, _, err := c.ExternalAverageValue(ctx, 2, 30, "q", tol10, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.ObjectAverageValue(ctx, 2, 30, "q", tol10, nil, labels.Everything()); err != nil {
		t.Fatal(err)
	}
	if lists != 0 {
		t.Fatalf("AverageValue External and Object metrics listed pods %d times", lists)
	}
	if got, _, _, err := c.ResourceUtilization(ctx, 2, 50, corev1.ResourceCPU, tol10, ""); err != nil || got != 4 {
		t.Fatalf("ResourceUtilization: %d, %v; want 4", got, err)
	}
	if got, _, err := c.ExternalValue(ctx, 2, 30, "q", tol10, nil); err != nil || got != 6 {
		t.Fatalf("ExternalValue: %d, %v; want 6 (3 × 2 ready pods)", got, err)
	}
	if lists != 1 {
		t.Fatalf("pods listed %d times in one reconcile, want 1", lists)
	}

	failing := calculator(src)
	failing.ListPods = func() ([]*corev1.Pod, error) { return nil, errors.New("cache not synced") }
	if _, _, err := failing.ExternalAverageValue(ctx, 2, 30, "q", tol10, nil); err != nil {
		t.Fatalf("a pod list failure failed a metric that reads no pods: %v", err)
	}
	if _, _, _, err := failing.ResourceUtilization(ctx, 2, 50, corev1.ResourceCPU, tol10, ""); err == nil || !strings.Contains(err.Error(), "unable to get pods") {
		t.Fatalf("ResourceUtilization with failing pods: %v", err)
	}
}
