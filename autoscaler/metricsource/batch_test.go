package metricsource

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// gatedSource answers every read after the first gate reads are in
// flight together, and records the most in flight at once.
type gatedSource struct {
	gate int

	mu       sync.Mutex
	inflight int
	most     int
	arrived  int
	open     chan struct{}
	calls    map[string]int
}

func newGated(gate int) *gatedSource {
	return &gatedSource{gate: gate, open: make(chan struct{}), calls: map[string]int{}}
}

func (g *gatedSource) enter(what string) {
	g.mu.Lock()
	g.inflight++
	g.most = max(g.most, g.inflight)
	g.arrived++
	g.calls[what]++
	if g.arrived == g.gate {
		close(g.open)
	}
	g.mu.Unlock()
	<-g.open // a bound below gate never opens it: the test times out
	g.mu.Lock()
	g.inflight--
	g.mu.Unlock()
}

func (g *gatedSource) ResourceMetric(_ context.Context, res corev1.ResourceName, _ string, _ labels.Selector, container string) (PodMetricsInfo, time.Time, error) {
	g.enter("resource " + string(res) + container)
	return PodMetricsInfo{"web-0": {Value: 100}}, time.Unix(1, 0), nil
}
func (g *gatedSource) PodsMetric(_ context.Context, name, _ string, _, _ labels.Selector) (PodMetricsInfo, time.Time, error) {
	g.enter("pods " + name)
	return PodMetricsInfo{"web-0": {Value: 7}}, time.Unix(1, 0), nil
}
func (g *gatedSource) ObjectMetric(_ context.Context, name, _ string, _ *autoscalingv2.CrossVersionObjectReference, _ labels.Selector) (int64, time.Time, error) {
	g.enter("object " + name)
	if name == "broken" {
		return 0, time.Time{}, errors.New("adapter says no")
	}
	return 5, time.Unix(1, 0), nil
}
func (g *gatedSource) ExternalMetric(_ context.Context, name, _ string, _ labels.Selector) ([]int64, time.Time, error) {
	g.enter("external " + name)
	var n int
	_, _ = fmt.Sscanf(name, "q%d", &n)
	return []int64{int64(n)}, time.Unix(1, 0), nil
}

func external(name string, sel *metav1.LabelSelector) autoscalingv2.MetricSpec {
	v := resource.MustParse("1")
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: name, Selector: sel}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: &v}}}
}

// TestBatchBoundAndOrder: 20 reads run 4 at a time, never more, each once;
// every call gets its own read's answer, errors included, and a copy.
func TestBatchBoundAndOrder(t *testing.T) {
	t.Parallel()
	var specs []autoscalingv2.MetricSpec
	for i := range 18 {
		specs = append(specs, external(fmt.Sprintf("q%d", i), nil))
	}
	specs = append(specs, external("q3", nil)) // a repeat reads once
	one := resource.MustParse("1")
	specs = append(specs,
		autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
			DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			Metric:          autoscalingv2.MetricIdentifier{Name: "broken"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: &one}}},
		autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "rps"}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &one}}},
	)
	pods := labels.SelectorFromSet(labels.Set{"app": "web"})
	reads := ReadsOf(specs, pods)
	if len(reads) != 20 {
		t.Fatalf("%d reads, want 20 (18 queues, the object, the pods)", len(reads))
	}
	src := newGated(4)
	b := NewBatch(src, "default", reads, 4)
	ctx := context.Background()
	for i := 17; i >= 0; i-- { // any order of calls gets the right answers
		sel, _ := metav1.LabelSelectorAsSelector(nil)
		v, _, err := b.ExternalMetric(ctx, fmt.Sprintf("q%d", i), "default", sel)
		if err != nil || len(v) != 1 || v[0] != int64(i) {
			t.Errorf("q%d: %v, %v", i, v, err)
		}
		if len(v) == 1 {
			v[0] = -1 // the caller's copy
		}
	}
	if v, _, _ := b.ExternalMetric(ctx, "q3", "default", labels.Nothing()); len(v) != 1 || v[0] != 3 {
		t.Errorf("q3 again: %v: a caller changed the batch's answer", v)
	}
	if _, _, err := b.ObjectMetric(ctx, "broken", "default", &specs[19].Object.DescribedObject, labels.Nothing()); err == nil {
		t.Error("the object's error was lost")
	}
	if p, _, err := b.PodsMetric(ctx, "rps", "default", pods, labels.Nothing()); err != nil || p["web-0"].Value != 7 {
		t.Errorf("pods: %v, %v", p, err)
	}
	if src.most != 4 {
		t.Errorf("at most %d reads in flight, want 4", src.most)
	}
	for k, n := range src.calls {
		if n != 1 {
			t.Errorf("%s read %d times", k, n)
		}
	}
	if b.Misses() != 0 || len(src.calls) != 20 {
		t.Errorf("misses %d, reads %d", b.Misses(), len(src.calls))
	}
	// a read not batched goes to the source
	if v, _, err := b.ExternalMetric(ctx, "q99", "default", labels.Nothing()); err != nil || v[0] != 99 || b.Misses() != 1 {
		t.Errorf("unbatched read: %v, %v, misses %d", v, err, b.Misses())
	}
}
