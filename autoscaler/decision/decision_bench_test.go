package decision

import (
	"context"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/metricscale/metricscale/autoscaler/behavior"
)

// BenchmarkDecide is one reconcile's decision: cpu Utilization, a Pods
// metric and an External metric over 1,000 pods, with 50 remembered
// recommendations and 20 scale events.
func BenchmarkDecide(b *testing.B) {
	pods := makePods(1000)
	avg := resource.MustParse("10")
	podsMetric := autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "rps"},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &avg}}}
	h := hpa(nil, 2000, cpuMetric(50), podsMetric, externalMetric("30"))
	h.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{}
	var hist behavior.History
	for i := range 50 {
		hist.Recommendations = append(hist.Recommendations, behavior.Recommendation{Replicas: int32(900 + i), Timestamp: now.Add(-time.Duration(i) * 5 * time.Second)})
	}
	for i := range 10 {
		hist.ScaleUpEvents = append(hist.ScaleUpEvents, behavior.ScaleEvent{Change: 10, Timestamp: now.Add(-time.Duration(i) * 20 * time.Second)})
		hist.ScaleDownEvents = append(hist.ScaleDownEvents, behavior.ScaleEvent{Change: 5, Timestamp: now.Add(-time.Duration(i) * 25 * time.Second)})
	}
	src := &source{cpu: 600, podsMetric: 12000, external: []int64{35000 * 1000}, pods: pods}
	// The source's answers are built once, as a cache would hold them.
	cached := &cachedSource{source: src, cpu: src.info(src.cpu), pm: src.info(src.podsMetric)}
	in := Input{Autoscaler: h, Scale: Scale{1000, 1000, "app=web"}, Pods: pods, Metrics: cached, History: hist, Settings: DefaultSettings(), Now: now}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res := Decide(ctx, in).Finish(nil)
		if res.Replicas == 0 {
			b.Fatal("no decision")
		}
	}
}
