package controller

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/decision"
	"github.com/metricscale/metricscale/autoscaler/metricsource"
)

// slowAdapter is adapterServer behind a fixed latency per request.
func slowAdapter(b testing.TB, latency time.Duration, value string) *httptest.Server {
	inner := adapterServer(b, value)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(latency)
		inner.Config.Handler.ServeHTTP(w, r)
	}))
	b.Cleanup(srv.Close)
	return srv
}

func manyMetrics(n int) *v1alpha1.MetricAutoscaler {
	return metricAutoscaler(func(ma *v1alpha1.MetricAutoscaler) {
		ma.Spec.Metrics = nil
		for i := range n {
			ma.Spec.Metrics = append(ma.Spec.Metrics, externalMetric(fmt.Sprintf("queue_%02d", i), "30"))
		}
		ma.Spec.SyncPeriod = &metav1.Duration{Duration: 15 * time.Second}
	})
}

// BenchmarkReconcile50Metrics: one reconcile of a MetricAutoscaler with 50
// External metrics read from an adapter that takes 5 ms per request.
func BenchmarkReconcile50Metrics(b *testing.B) {
	f := newFixture(b, manyMetrics(50), 4, 0)
	f.ctrl.clients.Metrics = restSource(b, slowAdapter(b, 5*time.Millisecond, "120").URL)
	key := kindMA + "/default/workers"
	b.ResetTimer()
	for b.Loop() {
		if _, err := f.ctrl.reconcile(context.Background(), key); err != nil {
			b.Fatal(err)
		}
	}
}

// everySource answers every read, counting them.
type everySource struct {
	mu    sync.Mutex
	calls int
}

func (s *everySource) count() {
	s.mu.Lock()
	s.calls++
	s.mu.Unlock()
}
func (s *everySource) ResourceMetric(context.Context, corev1.ResourceName, string, labels.Selector, string) (metricsource.PodMetricsInfo, time.Time, error) {
	s.count()
	return metricsource.PodMetricsInfo{"web-0": {Timestamp: t0, Window: time.Minute, Value: 300}, "web-1": {Timestamp: t0, Window: time.Minute, Value: 500}}, t0, nil
}
func (s *everySource) PodsMetric(context.Context, string, string, labels.Selector, labels.Selector) (metricsource.PodMetricsInfo, time.Time, error) {
	s.count()
	return metricsource.PodMetricsInfo{"web-0": {Timestamp: t0, Window: time.Minute, Value: 9000}, "web-1": {Timestamp: t0, Window: time.Minute, Value: 1000}}, t0, nil
}
func (s *everySource) ObjectMetric(context.Context, string, string, *autoscalingv2.CrossVersionObjectReference, labels.Selector) (int64, time.Time, error) {
	s.count()
	return 12000, t0, nil
}
func (s *everySource) ExternalMetric(context.Context, string, string, labels.Selector) ([]int64, time.Time, error) {
	s.count()
	return []int64{4000, 2000}, t0, nil
}

type podList []*corev1.Pod

func (p podList) List(labels.Selector) ([]*corev1.Pod, error) { return p, nil }

// TestBatchMatchesTheCore: the reads the controller batches are the reads
// the core makes, for every metric type (none goes to the source again),
// and the decision is the serial one.
func TestBatchMatchesTheCore(t *testing.T) {
	t.Parallel()
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	util := int32(50)
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"topic": "a"}}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MaxReplicas:    50,
			Metrics: []autoscalingv2.MetricSpec{
				{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &util}}},
				{Type: autoscalingv2.ContainerResourceMetricSourceType, ContainerResource: &autoscalingv2.ContainerResourceMetricSource{Name: corev1.ResourceMemory, Container: "app", Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("100m")}}},
				{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "rps", Selector: sel}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("2")}}},
				{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Kind: "Service", Name: "front"}, Metric: autoscalingv2.MetricIdentifier{Name: "hits"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: q("3")}}},
				{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "lag", Selector: sel}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("1")}}},
				{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "lag"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: q("1")}}},
			},
		},
	}
	var pods podList
	for _, n := range []string{"web-0", "web-1"} {
		pods = append(pods, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "default", Labels: map[string]string{"app": "web"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &metav1.Time{Time: t0.Add(-time.Hour)},
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Time{Time: t0.Add(-time.Hour)}}}},
		})
	}
	sc := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 2}, Status: autoscalingv1.ScaleStatus{Replicas: 2, Selector: "app=web"}}
	decide := func(src metricsource.Source) *decision.Plan {
		return decision.Decide(context.Background(), decision.Input{
			Autoscaler: hpa.DeepCopy(), Scale: decision.Scale{Replicas: 2, StatusReplicas: 2, Selector: "app=web"},
			Pods: pods, Metrics: src, Settings: decision.DefaultSettings(), Now: t0,
		})
	}
	serialSrc := &everySource{}
	serial := decide(serialSrc)

	src := &everySource{}
	c := &Controller{clients: Clients{Metrics: src}}
	b, ok := c.batch("", hpa, sc).(*metricsource.Batch)
	if !ok {
		t.Fatal("six metrics are not batched")
	}
	batched := decide(b)
	if b.Misses() != 0 {
		t.Errorf("%d reads of the core were not batched", b.Misses())
	}
	if src.calls != 6 || serialSrc.calls != 6 {
		t.Errorf("reads: %d batched, %d serial; want 6 each", src.calls, serialSrc.calls)
	}
	if batched.DesiredReplicas != serial.DesiredReplicas || fmt.Sprint(batched.Metrics) != fmt.Sprint(serial.Metrics) {
		t.Errorf("batched decision %d %v, serial %d %v", batched.DesiredReplicas, batched.Metrics, serial.DesiredReplicas, serial.Metrics)
	}
	for i, m := range serial.Metrics {
		if m.Err != nil {
			t.Errorf("metric %d failed (the test should exercise every read): %v", i, m.Err)
		}
	}
}
