package controller

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/providers/changefeed"
)

// feedController is a controller with only what the change feed touches:
// its queue and clock.
func feedController(t testing.TB) (*Controller, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Clock: clk})
	t.Cleanup(q.ShutDown)
	return &Controller{queue: q, clock: clk}, clk
}

// drain returns the queued keys, sorted, and empties the queue.
func drain(c *Controller) []string {
	var keys []string
	for c.queue.Len() > 0 {
		k, _ := c.queue.Get()
		keys = append(keys, k)
		c.queue.Done(k)
		c.queue.Forget(k)
	}
	sort.Strings(keys)
	return keys
}

func external(name string, sel *metav1.LabelSelector) autoscalingv2.MetricSpec {
	avg := resource.MustParse("10")
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: name, Selector: sel},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &avg},
	}}
}

func match(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

func ma(ns, name string, metrics ...autoscalingv2.MetricSpec) *v1alpha1.MetricAutoscaler {
	return &v1alpha1.MetricAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 1, UID: types.UID("uid-" + name)},
		Spec: v1alpha1.MetricAutoscalerSpec{Metrics: metrics}}
}

func TestChangeFeedMatches(t *testing.T) {
	t.Parallel()
	c, _ := feedController(t)
	f := newChangeFeed(c, 0)
	avg := resource.MustParse("1")
	objectRPS := autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
		DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
		Metric:          autoscalingv2.MetricIdentifier{Name: "rps"},
		Target:          autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: &avg},
	}}
	podsInflight := autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "inflight", Selector: match("path", "a")},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &avg},
	}}
	cpu := autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: new(int32(50))},
	}}
	bad := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "queue", Operator: "Near", Values: []string{"a"}}}}
	setOf := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "queue", Operator: metav1.LabelSelectorOpIn, Values: []string{"x", "y"}}}}
	inOne := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "queue", Operator: metav1.LabelSelectorOpIn, Values: []string{"b"}}}}
	andNot := &metav1.LabelSelector{MatchLabels: map[string]string{"queue": "a"},
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"gold"}}}}
	for _, obj := range []*v1alpha1.MetricAutoscaler{
		ma("shop", "ext-sel", external("depth", match("queue", "a"))),
		ma("shop", "ext-all", external("depth", nil)),
		ma("other", "ext-other-ns", external("depth", match("queue", "a"))),
		ma("shop", "ext-set", external("depth", setOf)),
		ma("shop", "bad-selector", external("depth", bad)),
		ma("shop", "obj", objectRPS),
		ma("shop", "pods", podsInflight),
		ma("shop", "cpu-only", cpu),
		ma("shop", "two", cpu, external("lag", nil), external("depth", match("queue", "z"))),
		ma("shop", "ext-in-one", external("depth", inOne)),
		ma("shop", "ext-and", external("depth", andNot)),
		ma("shop", "two-depths", external("depth", match("queue", "c")), external("depth", match("queue", "d"))),
	} {
		f.index(kindMA, obj)
	}
	f.index(kindHPA, &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "hpa"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{Metrics: []autoscalingv2.MetricSpec{external("depth", match("queue", "b"))}}})
	if n := f.Objects(); n != 12 {
		t.Errorf("%d objects indexed, want 12 (not the one with cpu alone)", n)
	}

	key := func(name string) string { return kindMA + "/" + name }
	tests := []struct {
		name string
		ev   changefeed.Event
		want []string
	}{
		{"a series of every namespace", changefeed.Event{Name: "depth", Labels: map[string]string{"queue": "a"}},
			[]string{key("other/ext-other-ns"), key("shop/bad-selector"), key("shop/ext-all"), key("shop/ext-and"), key("shop/ext-sel")}},
		{"a series of one namespace", changefeed.Event{Name: "depth", Namespace: "shop", Labels: map[string]string{"namespace": "shop", "queue": "a"}},
			[]string{key("shop/bad-selector"), key("shop/ext-all"), key("shop/ext-and"), key("shop/ext-sel")}},
		{"a requirement beside the label's value", changefeed.Event{Name: "depth", Namespace: "shop", Labels: map[string]string{"namespace": "shop", "queue": "a", "tier": "gold"}},
			[]string{key("shop/bad-selector"), key("shop/ext-all"), key("shop/ext-sel")}},
		{"another queue", changefeed.Event{Name: "depth", Namespace: "shop", Labels: map[string]string{"namespace": "shop", "queue": "b"}},
			[]string{kindHPA + "/shop/hpa", key("shop/bad-selector"), key("shop/ext-all"), key("shop/ext-in-one")}},
		{"one of an object's two selectors of a metric", changefeed.Event{Name: "depth", Labels: map[string]string{"queue": "c"}},
			[]string{key("shop/bad-selector"), key("shop/ext-all"), key("shop/two-depths")}},
		{"the other one", changefeed.Event{Name: "depth", Labels: map[string]string{"queue": "d"}},
			[]string{key("shop/bad-selector"), key("shop/ext-all"), key("shop/two-depths")}},
		{"a set selector", changefeed.Event{Name: "depth", Labels: map[string]string{"queue": "y"}},
			[]string{key("shop/bad-selector"), key("shop/ext-all"), key("shop/ext-set")}},
		{"every series of the metric", changefeed.Event{Name: "depth", All: true},
			[]string{kindHPA + "/shop/hpa", key("other/ext-other-ns"), key("shop/bad-selector"), key("shop/ext-all"), key("shop/ext-and"), key("shop/ext-in-one"),
				key("shop/ext-sel"), key("shop/ext-set"), key("shop/two"), key("shop/two-depths")}},
		{"every series in one namespace", changefeed.Event{Name: "depth", Namespace: "other", All: true},
			[]string{key("other/ext-other-ns")}},
		{"a custom-only change reaches no External reader", changefeed.Event{Kind: changefeed.KindCustom, Name: "depth", Labels: map[string]string{"queue": "a"}}, nil},
		{"an object metric", changefeed.Event{Name: "rps", Namespace: "shop", Labels: map[string]string{"namespace": "shop", "deployment": "web"}},
			[]string{key("shop/obj")}},
		{"an external-only change reaches no Object reader", changefeed.Event{Kind: changefeed.KindExternal, Name: "rps", Namespace: "shop"}, nil},
		{"an object metric of another namespace", changefeed.Event{Name: "rps", Namespace: "other", Labels: map[string]string{"namespace": "other"}}, nil},
		{"a pods metric", changefeed.Event{Kind: changefeed.KindCustom, Name: "inflight", Namespace: "shop", Labels: map[string]string{"namespace": "shop", "pod": "p", "path": "a"}},
			[]string{key("shop/pods")}},
		{"a pods metric the selector leaves out", changefeed.Event{Name: "inflight", Namespace: "shop", Labels: map[string]string{"namespace": "shop", "pod": "p", "path": "b"}}, nil},
		{"the second metric of an object", changefeed.Event{Name: "lag", Labels: map[string]string{"topic": "t"}}, []string{key("shop/two")}},
		{"a metric nobody reads", changefeed.Event{Name: "cpu", All: true}, nil},
	}
	for _, tt := range tests {
		ev := tt.ev
		ev.Type = changefeed.TypeChange
		f.Changed(&ev)
		if got := drain(c); !slices.Equal(got, tt.want) {
			t.Errorf("%s: queued %q, want %q", tt.name, got, tt.want)
		}
	}

	// A resync queues every object a fed metric is read by, once.
	f.Resync()
	want := []string{kindHPA + "/shop/hpa", key("other/ext-other-ns"), key("shop/bad-selector"), key("shop/ext-all"), key("shop/ext-and"), key("shop/ext-in-one"),
		key("shop/ext-sel"), key("shop/ext-set"), key("shop/obj"), key("shop/pods"), key("shop/two"), key("shop/two-depths")}
	if got := drain(c); !slices.Equal(got, want) {
		t.Errorf("resync queued %q, want %q", got, want)
	}
}

func TestChangeFeedFollowsTheInformer(t *testing.T) {
	t.Parallel()
	c, _ := feedController(t)
	f := newChangeFeed(c, 0)
	h := f.handler(kindMA)
	depth := func(ev *changefeed.Event) []string {
		f.Changed(ev)
		return drain(c)
	}
	ev := &changefeed.Event{Type: changefeed.TypeChange, Name: "depth", Labels: map[string]string{"queue": "a"}}
	evLag := &changefeed.Event{Type: changefeed.TypeChange, Name: "lag", All: true}

	old := ma("shop", "w", external("depth", match("queue", "a")))
	h.OnAdd(old, false)
	if got := depth(ev); !slices.Equal(got, []string{"MetricAutoscaler/shop/w"}) {
		t.Fatalf("after add: %q", got)
	}
	// A status update (same generation) keeps the index, even if the
	// object came with other metrics (it cannot: a spec change bumps the
	// generation; this shows the update is not re-read).
	statusOnly := old.DeepCopy()
	statusOnly.Status.DesiredReplicas = 3
	h.OnUpdate(old, statusOnly)
	if got := depth(ev); len(got) != 1 {
		t.Fatalf("after a status update: %q", got)
	}
	// A spec change re-indexes.
	changed := old.DeepCopy()
	changed.Generation = 2
	changed.Spec.Metrics = []autoscalingv2.MetricSpec{external("lag", nil)}
	h.OnUpdate(old, changed)
	if got := depth(ev); got != nil {
		t.Errorf("the old metric still queues the object: %q", got)
	}
	if got := depth(evLag); len(got) != 1 {
		t.Errorf("the new metric does not queue the object: %q", got)
	}
	// Deleted: nothing queues it, and nothing is left of it.
	h.OnDelete(changed)
	if got := depth(evLag); got != nil {
		t.Errorf("a deleted object is queued: %q", got)
	}
	f.mu.Lock()
	left := len(f.byMetric) + len(f.byKey) + len(f.last)
	f.mu.Unlock()
	if left != 0 {
		t.Errorf("%d index entries left after the delete", left)
	}
}

func TestChangeFeedMinInterval(t *testing.T) {
	t.Parallel()
	c, clk := feedController(t)
	f := newChangeFeed(c, time.Second)
	f.index(kindMA, ma("shop", "w", external("depth", nil)))
	ev := &changefeed.Event{Type: changefeed.TypeChange, Name: "depth", All: true}
	f.Changed(ev)
	if got := drain(c); len(got) != 1 {
		t.Fatalf("first change: queued %q, want the object at once", got)
	}
	// Two more changes within the interval: one reconcile, at its end.
	clk.Step(100 * time.Millisecond)
	f.Changed(ev)
	clk.Step(100 * time.Millisecond)
	f.Changed(ev)
	if got := drain(c); got != nil {
		t.Fatalf("within the interval: queued %q at once", got)
	}
	clk.Step(800 * time.Millisecond) // the end of the interval
	waitQueued(t, c, 1)
	if got := drain(c); len(got) != 1 {
		t.Fatalf("at the end of the interval: queued %q, want the object once", got)
	}
	// Past the interval a change queues at once again.
	clk.Step(2 * time.Second)
	f.Changed(ev)
	if got := drain(c); len(got) != 1 {
		t.Fatalf("after the interval: queued %q", got)
	}
}

// waitQueued waits for the delaying queue's goroutine to move n keys in.
func waitQueued(t *testing.T, c *Controller, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for c.queue.Len() < n {
		if ctx.Err() != nil {
			t.Fatalf("%d keys queued, want %d", c.queue.Len(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestChangeFeedOnTheInformer registers the feed on a running controller's
// informer: the fixture's object is indexed from the cache.
func TestChangeFeedOnTheInformer(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, metricAutoscaler(nil), 4, 240)
	f, err := fx.ctrl.ChangeFeed(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for f.Objects() != 1 {
		if ctx.Err() != nil {
			t.Fatal("the informer's object was not indexed")
		}
		time.Sleep(time.Millisecond)
	}
	drain(fx.ctrl) // the controller's own add
	f.Changed(&changefeed.Event{Type: changefeed.TypeChange, Name: "queue_messages_ready", Labels: map[string]string{"queue": "jobs"}})
	if got := drain(fx.ctrl); !slices.Equal(got, []string{"MetricAutoscaler/default/workers"}) {
		t.Errorf("queued %q", got)
	}
}

// TestChangeFeedSharesSelectors: equal metric selectors are one parsed
// copy in the index, different ones are not, and the bound holds.
func TestChangeFeedSharesSelectors(t *testing.T) { // not parallel: it swaps the package's table
	defer func(s *internTable[labels.Selector]) { feedSelectors = s }(feedSelectors)
	feedSelectors = newInternTable[labels.Selector](2)
	in := feedSelectors
	parse := selectorOf
	inAB := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "queue", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}}
	inBA := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "queue", Operator: metav1.LabelSelectorOpIn, Values: []string{"b", "a"}}}}
	a1, a2, b := parse(match("queue", "orders", "env", "prod")), parse(match("env", "prod", "queue", "orders")), parse(match("queue", "billing"))
	if reflect.ValueOf(a1).UnsafePointer() != reflect.ValueOf(a2).UnsafePointer() {
		t.Errorf("equal selectors %s and %s are two copies", a1, a2)
	}
	if b.String() != "queue=billing" || reflect.ValueOf(a1).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() {
		t.Errorf("different selectors %s and %s shared", a1, b)
	}
	// the bound (2) is reached: a third selector is kept as parsed, equal ones are not shared
	c1, c2 := parse(inAB), parse(inBA)
	if len(in.m) != 2 || reflect.ValueOf(c1).UnsafePointer() == reflect.ValueOf(c2).UnsafePointer() {
		t.Errorf("past the bound: %d selectors held, %s and %s shared", len(in.m), c1, c2)
	}
	if !c1.Matches(labels.Set{"queue": "b"}) || c1.Matches(labels.Set{"queue": "c"}) {
		t.Errorf("%s matches wrongly", c1)
	}
}

// heldQueue is the controller's queue with its delays in the test's hands:
// AddAfter keeps, per key, the earliest of the times asked, as the
// workqueue's delaying queue does, and release moves the keys due at the
// clock's time into the queue. No goroutine moves them: the interleaving
// is the test's.
type heldQueue struct {
	workqueue.TypedRateLimitingInterface[string]
	clk     *clocktesting.FakeClock
	waiting map[string]time.Time
}

func (q *heldQueue) AddAfter(key string, d time.Duration) {
	if d <= 0 {
		q.Add(key)
		return
	}
	at := q.clk.Now().Add(d)
	if w, ok := q.waiting[key]; ok && !w.After(at) {
		return
	}
	q.waiting[key] = at
}

func (q *heldQueue) release() {
	for key, at := range q.waiting {
		if !at.After(q.clk.Now()) {
			delete(q.waiting, key)
			q.Add(key)
		}
	}
}

// TestChangeFeedChangeAfterAnEarlierReconcile is issue 29's missed change:
// a change within the minimum interval asks for a reconcile at its end, but
// the queue keeps the earlier of a key's times, so the object's periodic
// reconcile, due within the interval, comes instead. A third change after
// that reconcile and before the end of the interval was taken as covered
// by the reconcile at the end of the interval, which never came: it waited
// for the next period (one flip in ten, 14s instead of 0.15s).
func TestChangeFeedChangeAfterAnEarlierReconcile(t *testing.T) {
	t.Parallel()
	const period = 15 * time.Second
	clk := clocktesting.NewFakeClock(t0)
	real := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Clock: clk})
	t.Cleanup(real.ShutDown)
	q := &heldQueue{TypedRateLimitingInterface: real, clk: clk, waiting: map[string]time.Time{}}
	c := &Controller{queue: q, clock: clk}
	f := newChangeFeed(c, time.Second)
	f.index(kindMA, ma("shop", "w", external("depth", nil)))
	const key = "MetricAutoscaler/shop/w"
	ev := &changefeed.Event{Type: changefeed.TypeChange, Name: "depth", All: true}
	// reconcile is one pass of a worker (next): the key out of the queue,
	// its metrics read, and the requeue at its sync period.
	reconcile := func(when string) {
		t.Helper()
		if got := drain(c); !slices.Equal(got, []string{key}) {
			t.Fatalf("%s: queued %q, want the object", when, got)
		}
		c.queue.AddAfter(key, period)
	}

	q.AddAfter(key, 700*time.Millisecond) // the periodic reconcile, due at 0.7s
	f.Changed(ev)                         // 0s: change 1, queued at once
	reconcile("change 1")
	clk.Step(500 * time.Millisecond)
	f.Changed(ev) // 0.5s: change 2, within the interval: asks for 1s
	q.release()
	if n := c.queue.Len(); n != 0 {
		t.Fatalf("change 2 queued the object at once, within the minimum interval")
	}
	clk.Step(200 * time.Millisecond) // 0.7s: the periodic reconcile reads change 2
	q.release()
	reconcile("the periodic reconcile")
	clk.Step(100 * time.Millisecond)
	f.Changed(ev)                    // 0.8s: change 3, after that read
	clk.Step(300 * time.Millisecond) // 1.1s: past the interval
	q.release()
	if got := drain(c); !slices.Equal(got, []string{key}) {
		t.Fatalf("past the interval after change 3: queued %q, want the object (else it waits for the next period, due at %s)",
			got, q.waiting[key].Sub(t0))
	}
}

// BenchmarkChangeFeedOneOfMany: a change of one list of a metric whose
// 1,000 lists are each read by their own MetricAutoscaler (the KEDA
// benchmark's shape) queues that one, whose selector alone is matched.
func BenchmarkChangeFeedOneOfMany(b *testing.B) {
	c, _ := feedController(b)
	f := newChangeFeed(c, 0)
	const n = 1000
	for i := range n {
		f.index(kindMA, ma("shop", fmt.Sprintf("w-%d", i), external("depth", match("key", fmt.Sprintf("list-%d", i)))))
	}
	ev := &changefeed.Event{Type: changefeed.TypeChange, Name: "depth", Labels: map[string]string{"key": "list-500"}}
	b.ReportAllocs()
	for b.Loop() {
		f.Changed(ev)
		if got := drain(c); len(got) != 1 || got[0] != kindMA+"/shop/w-500" {
			b.Fatalf("queued %q", got)
		}
	}
}
