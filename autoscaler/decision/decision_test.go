package decision

import (
	"context"
	"errors"
	"fmt"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/metricscale/metricscale/autoscaler/behavior"
	"github.com/metricscale/metricscale/autoscaler/metricsource"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

type podList []*corev1.Pod

func (l podList) List(sel labels.Selector) ([]*corev1.Pod, error) {
	out := make([]*corev1.Pod, 0, len(l))
	for _, p := range l {
		if sel.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out, nil
}

// source answers every pod with the same values; errs fail per kind.
type source struct {
	cpu, podsMetric int64
	external        []int64
	pods            podList
	failExternal    bool
	failCPU         bool
}

func (s *source) info(v int64) metricsource.PodMetricsInfo {
	info := make(metricsource.PodMetricsInfo, len(s.pods))
	for _, p := range s.pods {
		info[p.Name] = metricsource.PodMetric{Value: v, Timestamp: now, Window: 30 * time.Second}
	}
	return info
}

func (s *source) ResourceMetric(context.Context, corev1.ResourceName, string, labels.Selector, string) (metricsource.PodMetricsInfo, time.Time, error) {
	if s.failCPU {
		return nil, time.Time{}, errors.New("unavailable")
	}
	return s.info(s.cpu), now, nil
}
func (s *source) PodsMetric(context.Context, string, string, labels.Selector, labels.Selector) (metricsource.PodMetricsInfo, time.Time, error) {
	return s.info(s.podsMetric), now, nil
}
func (s *source) ObjectMetric(context.Context, string, string, *autoscalingv2.CrossVersionObjectReference, labels.Selector) (int64, time.Time, error) {
	return 0, time.Time{}, errors.New("not found")
}
func (s *source) ExternalMetric(context.Context, string, string, labels.Selector) ([]int64, time.Time, error) {
	if s.failExternal {
		return nil, time.Time{}, errors.New("unavailable")
	}
	return s.external, now, nil
}

func makePods(n int) podList {
	pods := make(podList, n)
	for i := range pods {
		pods[i] = &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
			Status: corev1.PodStatus{
				Phase: corev1.PodRunning, StartTime: &metav1.Time{Time: now.Add(-time.Hour)},
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Time{Time: now.Add(-time.Hour)}}},
			},
		}
	}
	return pods
}

func cpuMetric(target int32) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &target}}}
}

func externalMetric(avg string) autoscalingv2.MetricSpec {
	q := resource.MustParse(avg)
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "queue"},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &q}}}
}

func hpa(minR *int32, maxR int32, metrics ...autoscalingv2.MetricSpec) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    minR, MaxReplicas: maxR, Metrics: metrics,
		},
	}
}

func ptr[T any](v T) *T { return &v }

func run(in Input, writeErr error) Result {
	return Decide(context.Background(), in).Finish(writeErr)
}

func condition(s autoscalingv2.HorizontalPodAutoscalerStatus, t autoscalingv2.HorizontalPodAutoscalerConditionType) string {
	for _, c := range s.Conditions {
		if c.Type == t {
			return fmt.Sprintf("%s/%s", c.Status, c.Reason)
		}
	}
	return "absent"
}

func TestDecide(t *testing.T) {
	t.Parallel()
	pods := makePods(4)
	// An old recommendation history without behavior: nothing holds back.
	settled := behavior.History{Recommendations: []behavior.Recommendation{{Replicas: 1, Timestamp: now.Add(-time.Hour)}}}
	cases := []struct {
		name          string
		hpa           *autoscalingv2.HorizontalPodAutoscaler
		src           *source
		scale         Scale
		history       behavior.History
		settings      func(*Settings)
		writeErr      error
		wantReplicas  int32
		wantRescaled  bool
		wantErr       bool
		wantConds     map[autoscalingv2.HorizontalPodAutoscalerConditionType]string
		wantNilMetric bool
	}{
		{
			// 4 pods at 100% of 50 → 8.
			name: "cpu scale-up", hpa: hpa(nil, 10, cpuMetric(50)), src: &source{cpu: 1000, pods: pods},
			scale: Scale{4, 4, "app=web"}, history: settled, wantReplicas: 8, wantRescaled: true,
			wantConds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{
				autoscalingv2.AbleToScale: "True/SucceededRescale", autoscalingv2.ScalingActive: "True/ValidMetricFound", autoscalingv2.ScalingLimited: "False/DesiredWithinRange"},
		},
		{
			// cpu wants 2 (25% of 50), the failing external metric blocks the
			// scale-down.
			name: "failing metric blocks scale-down", hpa: hpa(nil, 10, cpuMetric(50), externalMetric("10")),
			src: &source{cpu: 250, pods: pods, failExternal: true}, scale: Scale{4, 4, "app=web"}, history: settled,
			wantReplicas: 4, wantErr: true,
			wantConds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{
				autoscalingv2.AbleToScale: "True/SucceededGetScale", autoscalingv2.ScalingActive: "False/FailedGetExternalMetric"},
		},
		{
			// The same failure does not block a scale-up: 4 → 8, error kept.
			name: "failing metric does not block scale-up", hpa: hpa(nil, 10, cpuMetric(50), externalMetric("10")),
			src: &source{cpu: 1000, pods: pods, failExternal: true}, scale: Scale{4, 4, "app=web"}, history: settled,
			wantReplicas: 8, wantRescaled: true, wantErr: true,
			wantConds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{autoscalingv2.ScalingActive: "True/ValidMetricFound"},
		},
		{
			name: "every metric failing", hpa: hpa(nil, 10, cpuMetric(50)), src: &source{failCPU: true, pods: pods},
			scale: Scale{4, 4, "app=web"}, wantReplicas: 4, wantErr: true,
			wantConds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{autoscalingv2.ScalingActive: "False/FailedGetResourceMetric"},
		},
		{
			// First reconcile: the initial size is remembered, so a proposal
			// of 2 is held at 4 by the 5m window.
			name: "downscale stabilization", hpa: hpa(nil, 10, cpuMetric(50)), src: &source{cpu: 250, pods: pods},
			scale: Scale{4, 4, "app=web"}, wantReplicas: 4,
			wantConds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{autoscalingv2.AbleToScale: "True/ScaleDownStabilized"},
		},
		{
			name: "above max", hpa: hpa(nil, 3, cpuMetric(50)), src: &source{cpu: 500, pods: pods},
			scale: Scale{4, 4, "app=web"}, wantReplicas: 3, wantRescaled: true, wantNilMetric: true,
		},
		{
			name: "zero replicas disables scaling", hpa: hpa(nil, 10, cpuMetric(50)), src: &source{cpu: 500, pods: pods},
			scale: Scale{0, 0, "app=web"}, wantReplicas: 0, wantNilMetric: true,
			wantConds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{autoscalingv2.ScalingActive: "False/ScalingDisabled"},
		},
		{
			// HPAScaleToZero: an empty queue with minReplicas 0 goes to zero
			// once stabilization allows, and says so.
			name: "scale to zero", hpa: hpa(ptr[int32](0), 10, externalMetric("10")), src: &source{external: []int64{0}, pods: pods},
			scale: Scale{4, 4, "app=web"}, history: settled, settings: func(s *Settings) { s.Gates.ScaleToZero = true },
			wantReplicas: 0, wantRescaled: true,
			wantConds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{autoscalingv2.ScaledToZero: "True/ScaledToZero"},
		},
		{
			name: "missing selector", hpa: hpa(nil, 10, cpuMetric(50)), src: &source{cpu: 500, pods: pods},
			scale: Scale{4, 4, ""}, wantReplicas: 4, wantErr: true, wantNilMetric: true,
			wantConds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{autoscalingv2.ScalingActive: "False/InvalidSelector"},
		},
		{
			name: "scale write fails", hpa: hpa(nil, 10, cpuMetric(50)), src: &source{cpu: 1000, pods: pods},
			scale: Scale{4, 4, "app=web"}, history: settled, writeErr: errors.New("conflict"), wantReplicas: 4, wantErr: true,
			wantConds: map[autoscalingv2.HorizontalPodAutoscalerConditionType]string{autoscalingv2.AbleToScale: "False/FailedUpdateScale"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			settings := DefaultSettings()
			if tc.settings != nil {
				tc.settings(&settings)
			}
			tc.src.pods = pods
			res := run(Input{Autoscaler: tc.hpa, Scale: tc.scale, Pods: pods, Metrics: tc.src, History: tc.history, Settings: settings, Now: now}, tc.writeErr)
			if res.Replicas != tc.wantReplicas || res.Rescaled != tc.wantRescaled || (res.Err != nil) != tc.wantErr {
				t.Errorf("got replicas %d rescaled %v err %v; want %d %v err=%v", res.Replicas, res.Rescaled, res.Err, tc.wantReplicas, tc.wantRescaled, tc.wantErr)
			}
			for typ, want := range tc.wantConds {
				if got := condition(res.Status, typ); got != want {
					t.Errorf("condition %s = %s, want %s", typ, got, want)
				}
			}
			if tc.wantNilMetric && res.Status.CurrentMetrics != nil {
				t.Errorf("currentMetrics %v, want none", res.Status.CurrentMetrics)
			}
			if tc.wantRescaled && (res.Status.LastScaleTime == nil || apiequality.Semantic.DeepEqual(tc.hpa.Status, res.Status)) {
				t.Errorf("a rescale must set lastScaleTime and change the status")
			}
		})
	}
}

// TestDecideIsPure checks that Decide leaves its inputs as they were.
func TestDecideIsPure(t *testing.T) {
	t.Parallel()
	pods := makePods(3)
	h := hpa(nil, 10, cpuMetric(50))
	h.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{}
	hist := behavior.History{Recommendations: []behavior.Recommendation{{Replicas: 9, Timestamp: now.Add(-time.Minute)}}}
	in := Input{Autoscaler: h, Scale: Scale{3, 3, "app=web"}, Pods: pods, Metrics: &source{cpu: 1000, pods: pods}, History: hist, Settings: DefaultSettings(), Now: now}
	a := run(in, nil)
	b := run(in, nil)
	if h.Spec.Behavior.ScaleUp != nil || h.Spec.MinReplicas != nil || len(h.Status.Conditions) != 0 {
		t.Errorf("Decide changed its input autoscaler: %+v", h)
	}
	if len(hist.Recommendations) != 1 {
		t.Errorf("Decide changed its input history: %+v", hist)
	}
	if a.Replicas != b.Replicas || len(a.History.Recommendations) != len(b.History.Recommendations) {
		t.Errorf("two runs on the same input differ: %d vs %d", a.Replicas, b.Replicas)
	}
}

// cachedSource serves precomputed answers, so a benchmark measures the
// decision rather than building metric maps.
type cachedSource struct {
	*source
	cpu, pm metricsource.PodMetricsInfo
}

func (c *cachedSource) ResourceMetric(context.Context, corev1.ResourceName, string, labels.Selector, string) (metricsource.PodMetricsInfo, time.Time, error) {
	return c.cpu, now, nil
}
func (c *cachedSource) PodsMetric(context.Context, string, string, labels.Selector, labels.Selector) (metricsource.PodMetricsInfo, time.Time, error) {
	return c.pm, now, nil
}

func TestDryRunWritesNothing(t *testing.T) {
	t.Parallel()
	pods := makePods(4)
	b := &autoscalingv2.HorizontalPodAutoscalerBehavior{}
	h := hpa(nil, 10, cpuMetric(50))
	h.Spec.Behavior = b
	in := Input{Autoscaler: h, Scale: Scale{4, 4, "app=web"}, Pods: pods, Metrics: &source{cpu: 1000, pods: pods}, Settings: DefaultSettings(), Now: now}
	p := Decide(context.Background(), in)
	if !p.Rescale || p.DesiredReplicas != 8 {
		t.Fatalf("plan rescale %v to %d, want a rescale to 8", p.Rescale, p.DesiredReplicas)
	}
	res := p.FinishDryRun()
	if res.Rescaled || res.Replicas != 4 || res.Status.DesiredReplicas != 8 || res.Status.LastScaleTime != nil {
		t.Errorf("dry run: rescaled %v replicas %d desired %d lastScaleTime %v; want no write, 4, 8, nil",
			res.Rescaled, res.Replicas, res.Status.DesiredReplicas, res.Status.LastScaleTime)
	}
	if len(res.History.ScaleUpEvents) != 0 {
		t.Errorf("dry run recorded a scale event: %+v", res.History.ScaleUpEvents)
	}
	if got := condition(res.Status, autoscalingv2.AbleToScale); got != "True/DryRun" {
		t.Errorf("AbleToScale %s, want True/DryRun", got)
	}
}

// TestNoAverageWithoutStatusReplicas: with status.replicas 0 an average per
// pod is undefined; the status leaves it unset instead of int64(NaN or Inf).
func TestNoAverageWithoutStatusReplicas(t *testing.T) {
	t.Parallel()
	pods := makePods(1)
	cases := []struct {
		name  string
		scale Scale
		queue []int64
	}{
		{"new deployment, 1 replica not yet counted", Scale{1, 0, "app=web"}, []int64{90000}},
		{"empty queue", Scale{1, 0, "app=web"}, []int64{0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := Input{Autoscaler: hpa(nil, 10, externalMetric("30")), Scale: tc.scale, Pods: pods,
				Metrics: &source{external: tc.queue, pods: pods}, Settings: DefaultSettings(), Now: now}
			res := run(in, nil)
			if len(res.Status.CurrentMetrics) != 1 || res.Status.CurrentMetrics[0].External == nil {
				t.Fatalf("currentMetrics %+v, want one External status", res.Status.CurrentMetrics)
			}
			if avg := res.Status.CurrentMetrics[0].External.Current.AverageValue; avg != nil {
				t.Errorf("averageValue %s, want it unset with status.replicas 0", avg)
			}
		})
	}
}
