package controller

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	scalefake "k8s.io/client-go/scale/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/decision"
	"github.com/metricscale/metricscale/autoscaler/metricsource"
	"github.com/metricscale/metricscale/autoscaler/metrictarget"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// queue is an External metric source whose value the test sets.
type queue struct{ depth int64 }

func (q *queue) ResourceMetric(context.Context, corev1.ResourceName, string, labels.Selector, string) (metricsource.PodMetricsInfo, time.Time, error) {
	return nil, time.Time{}, fmt.Errorf("no resource metrics here")
}
func (q *queue) PodsMetric(context.Context, string, string, labels.Selector, labels.Selector) (metricsource.PodMetricsInfo, time.Time, error) {
	return nil, time.Time{}, fmt.Errorf("no pods metrics here")
}
func (q *queue) ObjectMetric(context.Context, string, string, *autoscalingv2.CrossVersionObjectReference, labels.Selector) (int64, time.Time, error) {
	return 0, time.Time{}, fmt.Errorf("no object metrics here")
}
func (q *queue) ExternalMetric(context.Context, string, string, labels.Selector) ([]int64, time.Time, error) {
	return []int64{q.depth * 1000}, t0, nil
}

type fixture struct {
	ctrl     *Controller
	dyn      *dynamicfake.FakeDynamicClient
	scales   *scalefake.FakeScaleClient
	replicas int32
	writes   int
	recorder *record.FakeRecorder
	clock    *clocktesting.FakeClock
	src      *queue
	// podStarts counts the starts of the pod informer.
	podStarts int
}

func metricAutoscaler(mutate func(*v1alpha1.MetricAutoscaler)) *v1alpha1.MetricAutoscaler {
	avg := resource.MustParse("30")
	minR := int32(1)
	ma := &v1alpha1.MetricAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: kindMA},
		ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: "default", UID: "uid-1", Generation: 1},
		Spec: v1alpha1.MetricAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "workers"},
			MinReplicas:    &minR, MaxReplicas: 20,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "queue_messages_ready"},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &avg},
			}}},
			SyncPeriod: &metav1.Duration{Duration: time.Second},
		},
	}
	if mutate != nil {
		mutate(ma)
	}
	return ma
}

func newFixture(t testing.TB, ma *v1alpha1.MetricAutoscaler, replicas int32, depth int64) *fixture {
	t.Helper()
	f := &fixture{replicas: replicas, recorder: record.NewFakeRecorder(100), clock: clocktesting.NewFakeClock(t0), src: &queue{depth: depth}}
	if ma.ResourceVersion == "" {
		ma.ResourceVersion = "1"
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ma)
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	f.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme,
		map[schema.GroupVersionResource]string{v1alpha1.GroupVersionResource: "MetricAutoscalerList", apiServicesGVR: "APIServiceList"},
		&unstructured.Unstructured{Object: u})
	// Updates as the API server serves them with a status subresource: the
	// status subresource takes the request's status on the rest of the
	// stored object, the object the rest with the stored status; each makes
	// a new resource version (stored() waits for the informer to see it).
	f.dyn.PrependReactor("update", "metricautoscalers", func(a core.Action) (bool, runtime.Object, error) {
		in := a.(core.UpdateAction).GetObject().(*unstructured.Unstructured)
		stored, err := f.dyn.Tracker().Get(v1alpha1.GroupVersionResource, in.GetNamespace(), in.GetName())
		if err != nil {
			return true, nil, err
		}
		old := stored.(*unstructured.Unstructured)
		if in.GetResourceVersion() != "" && in.GetResourceVersion() != old.GetResourceVersion() {
			return true, nil, apierrors.NewConflict(v1alpha1.GroupVersionResource.GroupResource(), in.GetName(), fmt.Errorf("stale resourceVersion %s", in.GetResourceVersion()))
		}
		out := in.DeepCopy()
		if a.GetSubresource() == "status" {
			out = old.DeepCopy()
			out.Object["status"] = in.Object["status"]
		} else {
			out.Object["status"] = old.Object["status"]
		}
		rv, _ := strconv.Atoi(old.GetResourceVersion())
		out.SetResourceVersion(strconv.Itoa(rv + 1))
		return true, out, f.dyn.Tracker().Update(v1alpha1.GroupVersionResource, out, in.GetNamespace())
	})
	f.scales = &scalefake.FakeScaleClient{}
	f.scales.AddReactor("get", "deployments", func(core.Action) (bool, runtime.Object, error) {
		return true, &autoscalingv1.Scale{
			ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: "default"},
			Spec:       autoscalingv1.ScaleSpec{Replicas: f.replicas},
			Status:     autoscalingv1.ScaleStatus{Replicas: f.replicas, Selector: "app=workers"},
		}, nil
	})
	f.scales.AddReactor("update", "deployments", func(a core.Action) (bool, runtime.Object, error) {
		sc := a.(core.UpdateAction).GetObject().(*autoscalingv1.Scale)
		f.replicas, f.writes = sc.Spec.Replicas, f.writes+1
		return true, sc, nil
	})
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Group: "apps", Version: "v1"}})
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)

	kube := kubefake.NewClientset()
	kubeInf := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(TrimCached))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	inf := Informers{
		MetricAutoscalers: dynamicinformer.NewDynamicSharedInformerFactory(f.dyn, 0).ForResource(v1alpha1.GroupVersionResource).Informer(),
		Pods:              kubeInf.Core().V1().Pods().Informer(),
		StartPods:         func() { f.podStarts++; kubeInf.Start(ctx.Done()) },
	}
	f.ctrl, err = New(Config{Settings: decision.DefaultSettings(), Workers: 1, HPASyncPeriod: 15 * time.Second, HistorySyncInterval: 30 * time.Second},
		Clients{Kube: kube, MetricAutoscalers: dynamicStatus{f.dyn}, Dynamic: f.dyn, Scales: f.scales, Mapper: mapper, Metrics: f.src}, inf, f.recorder, f.clock)
	if err != nil {
		t.Fatal(err)
	}
	go inf.MetricAutoscalers.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.MetricAutoscalers.HasSynced) {
		t.Fatal("caches did not sync")
	}
	return f
}

// dynamicStatus writes MetricAutoscaler status through the fake dynamic
// client, whose reactor serves the status subresource.
type dynamicStatus struct{ dyn dynamic.Interface }

func (d dynamicStatus) UpdateStatus(ctx context.Context, ma *v1alpha1.MetricAutoscaler) (*v1alpha1.MetricAutoscaler, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ma)
	if err != nil {
		return nil, err
	}
	w, err := d.dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ma.Namespace).UpdateStatus(ctx, &unstructured.Unstructured{Object: u}, metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	out := &v1alpha1.MetricAutoscaler{}
	return out, runtime.DefaultUnstructuredConverter.FromUnstructured(w.Object, out)
}

// statusWrites counts the MetricAutoscaler status writes so far.
func (f *fixture) statusWrites() int {
	n := 0
	for _, a := range f.dyn.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" {
			n++
		}
	}
	return n
}

// reconcile runs one reconcile and returns the stored object afterwards.
func (f *fixture) reconcile(t *testing.T) *v1alpha1.MetricAutoscaler {
	t.Helper()
	if _, err := f.ctrl.reconcile(context.Background(), kindMA+"/default/workers"); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return f.stored(t)
}

// stored returns the stored object and lets the informer see it, as the
// next reconcile would.
func (f *fixture) stored(t *testing.T) *v1alpha1.MetricAutoscaler {
	t.Helper()
	u, err := f.dyn.Resource(v1alpha1.GroupVersionResource).Namespace("default").Get(context.Background(), "workers", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ma := &v1alpha1.MetricAutoscaler{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ma); err != nil {
		t.Fatal(err)
	}
	// Wait for the informer to see the write, as the next reconcile would.
	// Not an update of its cache from here: its own, later, delivery of an
	// earlier write would then take the cache (and the memo's fingerprints)
	// back to that write.
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		obj, ok, err := f.ctrl.inf.MetricAutoscalers.GetIndexer().GetByKey("default/workers")
		return ok && obj.(*v1alpha1.MetricAutoscaler).ResourceVersion == u.GetResourceVersion(), err
	}); err != nil {
		t.Fatalf("the informer did not see version %s of the MetricAutoscaler: %v", u.GetResourceVersion(), err)
	}
	return ma
}

func TestReconcileScalesAndWritesStatus(t *testing.T) {
	t.Parallel()
	f := newFixture(t, metricAutoscaler(nil), 4, 240)
	ma := f.reconcile(t)
	// 240 messages at 30 each: 8 replicas (the 2× cap from 4 allows it).
	if f.replicas != 8 || f.writes != 1 {
		t.Fatalf("scale %d after %d writes, want 8 after 1", f.replicas, f.writes)
	}
	st := ma.Status
	if st.DesiredReplicas != 8 || st.CurrentReplicas != 4 || st.LastScaleTime == nil {
		t.Errorf("status current %d desired %d lastScaleTime %v; want 4, 8, set", st.CurrentReplicas, st.DesiredReplicas, st.LastScaleTime)
	}
	if st.Targets != "60/30 (avg)" || st.Reference != "Deployment/workers" {
		t.Errorf("printed columns %q %q, want \"60/30 (avg)\" \"Deployment/workers\"", st.Targets, st.Reference)
	}
	if len(st.MetricProposals) != 1 || st.MetricProposals[0] != 8 {
		t.Errorf("metric proposals %v, want [8]", st.MetricProposals)
	}
	if st.History == nil || len(st.History.Recommendations) == 0 {
		t.Errorf("history not saved: %+v", st.History)
	}
	if got := <-f.recorder.Events; !strings.Contains(got, "SuccessfulRescale") {
		t.Errorf("event %q, want SuccessfulRescale", got)
	}
}

func TestDryRunAndPausedWriteNoScale(t *testing.T) {
	t.Parallel()
	f := newFixture(t, metricAutoscaler(func(m *v1alpha1.MetricAutoscaler) { m.Spec.DryRun = true }), 4, 240)
	ma := f.reconcile(t)
	if f.writes != 0 || f.replicas != 4 {
		t.Errorf("dry run wrote the scale: %d writes, %d replicas", f.writes, f.replicas)
	}
	if ma.Status.DesiredReplicas != 8 {
		t.Errorf("dry run status desired %d, want 8", ma.Status.DesiredReplicas)
	}

	p := newFixture(t, metricAutoscaler(func(m *v1alpha1.MetricAutoscaler) { m.Spec.Paused = true }), 4, 240)
	ma = p.reconcile(t)
	if p.writes != 0 || ma.Status.DesiredReplicas != 0 {
		t.Errorf("paused: %d scale writes, status %+v", p.writes, ma.Status)
	}
	for _, a := range p.dyn.Actions() {
		if a.GetVerb() != "list" && a.GetVerb() != "watch" && a.GetVerb() != "get" {
			t.Errorf("paused autoscaler made a %s", a.GetVerb())
		}
	}
}

// TestHistorySurvivesRestart: a controller that starts with a status
// holding a recent high recommendation keeps to it, as if it never stopped.
func TestHistorySurvivesRestart(t *testing.T) {
	t.Parallel()
	ma := metricAutoscaler(func(m *v1alpha1.MetricAutoscaler) {
		m.Status.DesiredReplicas, m.Status.CurrentReplicas = 8, 8
		m.Status.History = &v1alpha1.History{Recommendations: []v1alpha1.Recommendation{
			{Replicas: 8, Time: metav1.NewMicroTime(t0.Add(-2 * time.Minute))},
		}}
	})
	// The queue is nearly empty: the proposal is 1, but 8 was recommended
	// 2 minutes ago, inside the 5 minute window.
	f := newFixture(t, ma, 8, 10)
	f.reconcile(t)
	if f.writes != 0 {
		t.Fatalf("scaled to %d right after a restart, inside the stabilization window", f.replicas)
	}
	// Past the window the scale-down happens.
	f.clock.Step(3*time.Minute + 10*time.Second)
	f.reconcile(t)
	if f.replicas != 1 {
		t.Errorf("after the window: %d replicas, want 1", f.replicas)
	}
}

func TestTargets(t *testing.T) {
	t.Parallel()
	util, fifty := int32(80), int32(50)
	v := resource.MustParse("100")
	specs := []autoscalingv2.MetricSpec{
		{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &fifty}}},
		{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "rps"},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: &v}}},
	}
	statuses := []autoscalingv2.MetricStatus{
		{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{Name: corev1.ResourceCPU,
			Current: autoscalingv2.MetricValueStatus{AverageUtilization: &util}}},
		{}, // could not be computed
	}
	if got, want := metrictarget.Targets(specs, statuses), "80%/50%, <unknown>/100"; got != want {
		t.Errorf("Targets = %q, want %q", got, want)
	}
	if got := metrictarget.Targets(nil, nil); got != "<none>" {
		t.Errorf("Targets of nothing = %q, want <none>", got)
	}
}

// TestPodCacheStartsWhenRead: reconciles on an AverageValue External metric
// never start the pod cache; the first list starts it, once, and lists the
// namespace's pods through the compact cache.
func TestPodCacheStartsWhenRead(t *testing.T) {
	t.Parallel()
	f := newFixture(t, metricAutoscaler(nil), 4, 240)
	f.reconcile(t)
	f.reconcile(t)
	if f.podStarts != 0 {
		t.Fatalf("the pod cache started %d times for an External AverageValue metric", f.podStarts)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "workers-1", Namespace: "default", Labels: map[string]string{"app": "workers"}}}
	if _, err := f.ctrl.clients.Kube.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sel := labels.SelectorFromSet(labels.Set{"app": "workers"})
	for range 2 {
		pods, err := lazyPods{f.ctrl, "default"}.List(sel)
		if err != nil {
			t.Fatal(err)
		}
		if len(pods) != 1 || pods[0].Name != "workers-1" {
			t.Fatalf("listed %v", pods)
		}
	}
	if f.podStarts != 1 {
		t.Fatalf("the pod cache started %d times, want 1", f.podStarts)
	}
}

// TestRunWithoutPodCache: with the pod cache started on demand, Run does
// not wait for it, and reconciles an External AverageValue autoscaler
// without ever starting it.
func TestRunWithoutPodCache(t *testing.T) {
	t.Parallel()
	f := newFixture(t, metricAutoscaler(nil), 4, 240)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.ctrl.Run(ctx) }()
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		u, err := f.dyn.Resource(v1alpha1.GroupVersionResource).Namespace("default").Get(ctx, "workers", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		desired, _, _ := unstructured.NestedInt64(u.Object, "status", "desiredReplicas")
		return desired == 8, nil
	})
	cancel()
	<-done
	if err != nil {
		t.Fatalf("Run reconciled nothing: %v", err)
	}
	if f.podStarts != 0 {
		t.Fatalf("the pod cache started %d times", f.podStarts)
	}
}

// TestReconcileReadsItsOwnWrite: a reconcile right after another, before
// the cache has seen the first one's status write (as the change feed
// queues them), reads the status that write left and writes on its
// version instead of failing on a conflict.
func TestReconcileReadsItsOwnWrite(t *testing.T) {
	t.Parallel()
	f := newFixture(t, metricAutoscaler(func(m *v1alpha1.MetricAutoscaler) { m.ResourceVersion = "1" }), 4, 240)
	ctx := context.Background()
	if _, err := f.ctrl.reconcile(ctx, kindMA+"/default/workers"); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(time.Second)
	// The cache still holds version 1; the API server has 2.
	if _, err := f.ctrl.reconcile(ctx, kindMA+"/default/workers"); err != nil {
		t.Fatalf("the second reconcile: %v", err)
	}
	st := f.stored(t)
	if st.ResourceVersion != "3" || st.Status.CurrentReplicas != 8 || st.Status.LastScaleTime == nil {
		t.Errorf("after two reconciles: version %s, currentReplicas %d, lastScaleTime %v; want 3, 8 and the first one's rescale time", st.ResourceVersion, st.Status.CurrentReplicas, st.Status.LastScaleTime)
	}
}
