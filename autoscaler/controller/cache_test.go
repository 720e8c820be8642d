package controller

import (
	"context"
	"encoding/json"
	"fmt"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	clienttesting "k8s.io/client-go/testing"
	"maps"
	"os"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
)

func servedPod(t testing.TB, name string) *corev1.Pod {
	t.Helper()
	data, err := os.ReadFile("testdata/pod.json")
	if err != nil {
		t.Fatal(err)
	}
	// A fresh decode per object, as an informer's: nothing is shared.
	data = []byte(strings.ReplaceAll(string(data), "ma-123-5d8f7c9b6d-x2k4q", name))
	pod := &corev1.Pod{}
	if err := json.Unmarshal(data, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

// TestTrimPodKeepsWhatTheCoreReads checks that a trimmed pod decides as the
// pod it came from: the fields the replica calculation reads survive.
func TestTrimPodKeepsWhatTheCoreReads(t *testing.T) {
	t.Parallel()
	pod := servedPod(t, "p")
	sidecar := corev1.ContainerRestartPolicyAlways
	pod.Spec.InitContainers = []corev1.Container{{Name: "proxy", Image: "x", RestartPolicy: &sidecar,
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}}}}
	now := metav1.Now()
	pod.DeletionTimestamp = &now
	trimmed, err := TrimCached(pod.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := store.Add(trimmed); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := store.GetByKey(pod.Namespace + "/" + pod.Name); !ok {
		t.Fatal("the cached pod is not stored under namespace/name")
	}
	listed, err := podLister{store, pod.Namespace}.List(labels.SelectorFromSet(labels.Set{"app": "ma-123"}))
	if err != nil || len(listed) != 1 {
		t.Fatalf("listing by selector: %v, %d pods", err, len(listed))
	}
	if other, _ := (podLister{store, "elsewhere"}).List(labels.Everything()); len(other) != 0 {
		t.Fatalf("another namespace lists %d pods", len(other))
	}
	if none, _ := (podLister{store, pod.Namespace}).List(labels.SelectorFromSet(labels.Set{"app": "other"})); len(none) != 0 {
		t.Fatalf("a selector that matches nothing lists %d pods", len(none))
	}
	got := listed[0]
	for _, c := range []struct {
		field     string
		got, want any
	}{
		{"name", got.Name, pod.Name},
		{"namespace", got.Namespace, pod.Namespace},
		{"labels", got.Labels, pod.Labels},
		{"deletionTimestamp", got.DeletionTimestamp, pod.DeletionTimestamp},
		{"phase", got.Status.Phase, pod.Status.Phase},
		{"startTime", got.Status.StartTime, pod.Status.StartTime},
		{"container requests", got.Spec.Containers[0].Resources.Requests, pod.Spec.Containers[0].Resources.Requests},
		{"sidecar restartPolicy", got.Spec.InitContainers[0].RestartPolicy, pod.Spec.InitContainers[0].RestartPolicy},
		{"sidecar requests", got.Spec.InitContainers[0].Resources.Requests, pod.Spec.InitContainers[0].Resources.Requests},
		{"Ready condition", got.Status.Conditions, []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: pod.Status.Conditions[1].LastTransitionTime}}},
	} {
		if !apiequality.Semantic.DeepEqual(c.got, c.want) {
			t.Errorf("%s: got %v, want %v", c.field, c.got, c.want)
		}
	}
	if got.ManagedFields != nil || got.Annotations != nil || got.Spec.Volumes != nil || got.Status.ContainerStatuses != nil {
		t.Error("trimmed pod still carries fields the controller never reads")
	}

	pod.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
	pod.Spec.Overhead = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("10Mi")}
	withPodLevel, _ := TrimCached(pod.DeepCopy())
	if got := withPodLevel.(*cachedPod).pod(); !apiequality.Semantic.DeepEqual(got.Spec.Resources, pod.Spec.Resources) || !apiequality.Semantic.DeepEqual(got.Spec.Overhead, pod.Spec.Overhead) {
		t.Errorf("pod-level requests or overhead lost: %v %v", got.Spec.Resources, got.Spec.Overhead)
	}

	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "h", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 3}}
	out, _ := TrimCached(hpa)
	if h := out.(*autoscalingv2.HorizontalPodAutoscaler); h.ManagedFields != nil || h.Spec.MaxReplicas != 3 {
		t.Errorf("an HPA keeps all but its managedFields: %+v", h)
	}
}

// cachedMetricAutoscaler is a MetricAutoscaler as the dynamic informer
// receives it after some reconciles: status with conditions, metrics and
// a short history.
func cachedMetricAutoscaler(t testing.TB, i int) any {
	t.Helper()
	minR := int32(1)
	at := metav1.NewTime(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
	ma := &v1alpha1.MetricAutoscaler{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "MetricAutoscaler"},
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ma-%d", i), Namespace: "bench-x7k2p", UID: "4f0e8a52-51d6-4c4b-9a53-2f7d4c1e9b11",
			ResourceVersion: "1234567", Generation: 1, CreationTimestamp: at,
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "e2e.test", Operation: "Update", APIVersion: "autoscaling.metricscale.dev/v1alpha1", Time: &at},
				{Manager: "metricscale-autoscaler", Operation: "Update", APIVersion: "autoscaling.metricscale.dev/v1alpha1", Time: &at, Subresource: "status"}}},
		Spec: v1alpha1.MetricAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: fmt.Sprintf("ma-%d", i)},
			MinReplicas:    &minR, MaxReplicas: 10,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "queue_messages_ready", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"queue": "bench"}}},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: resource.NewQuantity(30, resource.DecimalSI)}}}},
			SyncPeriod: &metav1.Duration{Duration: 15 * time.Second},
		},
		Status: v1alpha1.MetricAutoscalerStatus{
			CurrentReplicas: 1, DesiredReplicas: 1, Reference: fmt.Sprintf("Deployment/ma-%d", i), Targets: "10/30 (avg)",
			CurrentMetrics: []autoscalingv2.MetricStatus{{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricStatus{
				Metric:  autoscalingv2.MetricIdentifier{Name: "queue_messages_ready", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"queue": "bench"}}},
				Current: autoscalingv2.MetricValueStatus{AverageValue: resource.NewQuantity(10, resource.DecimalSI)}}}},
			Conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{
				{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionTrue, LastTransitionTime: at, Reason: "ReadyForNewScale", Message: "recommended size matches current size"},
				{Type: autoscalingv2.ScalingActive, Status: corev1.ConditionTrue, LastTransitionTime: at, Reason: "ValidMetricFound", Message: "the HPA was able to successfully calculate a replica count from external metric queue_messages_ready(&LabelSelector{MatchLabels:map[string]string{queue: bench,},MatchExpressions:[]LabelSelectorRequirement{},})"},
				{Type: autoscalingv2.ScalingLimited, Status: corev1.ConditionTrue, LastTransitionTime: at, Reason: "TooFewReplicas", Message: "the desired replica count is less than the minimum replica count"},
			},
			MetricProposals: []int32{1},
			History:         &v1alpha1.History{Recommendations: []v1alpha1.Recommendation{{Replicas: 1, Time: metav1.NewMicroTime(at.Time)}}},
		},
	}
	u, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(ma)
	if err != nil {
		t.Fatal(err)
	}
	// Through JSON, so that the map holds what a decoded watch event holds.
	data, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	out := &unstructured.Unstructured{}
	if err := out.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	return out
}

func heapAfterGC() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkCacheBytes measures the live heap an informer's store holds per
// object, as served and as transformed for the controller.
func BenchmarkCacheBytes(b *testing.B) {
	managedFieldsOnly := func(obj any) (any, error) {
		obj.(metav1.Object).SetManagedFields(nil)
		return obj, nil
	}
	pod := func(b *testing.B, i int) any { return servedPod(b, fmt.Sprintf("pod-%d", i)) }
	for _, tc := range []struct {
		name      string
		object    func(*testing.B, int) any
		transform cache.TransformFunc
	}{
		{"pod/served", pod, nil},
		{"pod/without-managedFields", pod, managedFieldsOnly},
		{"pod/trimmed", pod, TrimCached},
		{"metricautoscaler/unstructured", func(b *testing.B, i int) any { return cachedMetricAutoscaler(b, i) }, nil},
		{"metricautoscaler/typed", func(b *testing.B, i int) any { return cachedMetricAutoscaler(b, i) }, typedMetricAutoscaler},
		// What the controller keeps: the cached object and its memory of it.
		{"metricautoscaler/trimmed-with-memo", func(b *testing.B, i int) any { return cachedMetricAutoscaler(b, i) }, (&Controller{memory: map[string]*memo{}}).trimMA},
	} {
		b.Run(tc.name, func(b *testing.B) {
			const n = 2000
			var perObject float64
			for b.Loop() {
				store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
				before := heapAfterGC()
				for i := range n {
					obj := tc.object(b, i)
					if tc.transform != nil {
						var err error
						if obj, err = tc.transform(obj); err != nil {
							b.Fatal(err)
						}
					}
					if err := store.Add(obj); err != nil {
						b.Fatal(err)
					}
				}
				perObject = float64(heapAfterGC()-before) / n
				runtime.KeepAlive(store)
			}
			b.ReportMetric(perObject, "B/object")
		})
	}
}

// TestInternStrings: interning changes no value, shares repeated strings,
// and stops adding strings at its bound.
func TestInternStrings(t *testing.T) { // not parallel: it swaps the package's tables
	a, err := typedMetricAutoscaler(cachedMetricAutoscaler(t, 1))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := typedMetricAutoscaler(cachedMetricAutoscaler(t, 2))
	plain := &v1alpha1.MetricAutoscaler{}
	if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(cachedMetricAutoscaler(t, 1).(*unstructured.Unstructured).Object, plain); err != nil {
		t.Fatal(err)
	}
	plain.ManagedFields = nil
	if !apiequality.Semantic.DeepEqual(a, plain) {
		t.Fatal("interning changed the object")
	}
	ma, mb := a.(*v1alpha1.MetricAutoscaler), b.(*v1alpha1.MetricAutoscaler)
	for _, pair := range [][2]string{
		{ma.Namespace, mb.Namespace},
		{ma.Status.Conditions[1].Message, mb.Status.Conditions[1].Message},
		{ma.Spec.Metrics[0].External.Metric.Name, mb.Spec.Metrics[0].External.Metric.Name},
	} {
		if unsafe.StringData(pair[0]) != unsafe.StringData(pair[1]) {
			t.Errorf("%q is not shared between two objects", pair[0])
		}
	}

	sa, sb := ma.Spec.Metrics[0].External.Metric.Selector.MatchLabels, mb.Spec.Metrics[0].External.Metric.Selector.MatchLabels
	if reflect.ValueOf(sa).UnsafePointer() != reflect.ValueOf(sb).UnsafePointer() {
		t.Errorf("equal matchLabels %v are not one shared map", sa)
	}

	// a table of 2 maps and 4 strings, for the bound; restored after
	defer func(l *internTable[map[string]string], s *internTable[string]) { internedLabels, interned = l, s }(internedLabels, interned)
	internedLabels, interned = newInternTable[map[string]string](2), newInternTable[string](4)
	for _, tc := range []struct {
		a, b  map[string]string
		share bool
	}{
		{map[string]string{"queue": "orders"}, map[string]string{"queue": "orders"}, true},
		{map[string]string{"queue": "orders"}, map[string]string{"queue": "billing"}, false},
		// what a separator-joined id would confuse
		{map[string]string{"a": "b\x00c\x00d"}, map[string]string{"a": "b", "c": "d"}, false},
		{map[string]string{"a:1": "b"}, map[string]string{"a": "1:b"}, false},
	} {
		x, y := internLabels(maps.Clone(tc.a)), internLabels(maps.Clone(tc.b))
		if !maps.Equal(x, tc.a) || !maps.Equal(y, tc.b) {
			t.Errorf("get(%v), get(%v) = %v, %v: content changed", tc.a, tc.b, x, y)
		}
		if shared := reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer(); shared != tc.share {
			t.Errorf("get(%v), get(%v): shared %v, want %v", tc.a, tc.b, shared, tc.share)
		}
	}
	if len(internedLabels.m) != 2 || len(interned.m) != 4 {
		t.Errorf("the tables hold %d maps and %d strings, bounds 2 and 4", len(internedLabels.m), len(interned.m))
	}
}

// TestCacheKeepsNoHistory: the cached MetricAutoscaler holds no history;
// the controller's memory has it from the status, and a reconcile that
// changes neither the visible status nor the stored history writes nothing.
func TestCacheKeepsNoHistory(t *testing.T) {
	t.Parallel()
	ma := metricAutoscaler(func(m *v1alpha1.MetricAutoscaler) {
		m.Status.History = &v1alpha1.History{Recommendations: []v1alpha1.Recommendation{{Replicas: 8, Time: metav1.NewMicroTime(t0.Add(-time.Minute))}}}
	})
	f := newFixture(t, ma, 4, 240)
	obj, _, _ := f.ctrl.inf.MetricAutoscalers.GetIndexer().GetByKey("default/workers")
	if h := obj.(*v1alpha1.MetricAutoscaler).Status.History; h != nil {
		t.Fatalf("the cache keeps the history: %+v", h)
	}
	f.ctrl.mu.Lock()
	m := f.ctrl.memory[kindMA+"/default/workers"]
	f.ctrl.mu.Unlock()
	if m == nil || len(m.history.recs) != 1 || m.history.recs[0].replicas != 8 {
		t.Fatalf("the memory does not hold the status's history: %+v", m)
	}
	f.reconcile(t) // scales 4 → 8 and saves the status
	f.clock.Step(time.Second)
	f.reconcile(t) // sees 8 replicas: a new visible status, saved
	f.clock.Step(time.Second)
	writes := f.statusWrites
	before := writes()
	f.reconcile(t)
	if got := writes() - before; got != 0 {
		t.Errorf("a reconcile that changed nothing visible wrote the status %d times", got)
	}
	// Past the history sync interval the changed history is saved.
	f.clock.Step(31 * time.Second)
	before = writes()
	f.reconcile(t)
	if got := writes() - before; got != 1 {
		t.Errorf("past the history sync interval: %d status writes, want 1", got)
	}
}

// TestStatusEchoes: the informer's delivery of the controller's own status
// write keeps the fingerprints the write recorded; a later write by another
// client is seen, and the controller writes its status back.
func TestStatusEchoes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, metricAutoscaler(nil), 4, 240)
	writes := f.statusWrites
	key := kindMA + "/default/workers"
	f.reconcile(t) // scales 4 → 8, writes the status; its echo is cached
	f.clock.Step(time.Second)
	f.reconcile(t) // 8 replicas now: written again
	f.clock.Step(time.Second)
	before := writes()
	f.reconcile(t)
	if got := writes() - before; got != 0 {
		t.Fatalf("after the echo of its write, a reconcile that changed nothing wrote %d times", got)
	}

	// A new depth: written, and the echo seen. Then, before the next
	// reconcile, another client rewrites the status (a newer version).
	f.src.depth = 300
	f.clock.Step(time.Second)
	if got := f.reconcile(t).Status.DesiredReplicas; got != 10 {
		t.Fatalf("desiredReplicas %d at depth 300, want 10", got)
	}
	f.ctrl.mu.Lock()
	m := f.ctrl.memory[key]
	mine, written := m.storedStatus, m.written != nil
	f.ctrl.mu.Unlock()
	if !written {
		t.Fatal("no write recorded in the memo")
	}
	u, err := f.dyn.Resource(v1alpha1.GroupVersionResource).Namespace("default").Get(context.Background(), "workers", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(u.Object, int64(3), "status", "desiredReplicas"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.dyn.Resource(v1alpha1.GroupVersionResource).Namespace("default").UpdateStatus(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.stored(t)
	f.ctrl.mu.Lock()
	theirs := m.storedStatus
	f.ctrl.mu.Unlock()
	if theirs == mine {
		t.Fatal("the memo kept the fingerprint of its own write after another client's")
	}
	f.clock.Step(time.Second)
	before = writes()
	if got := f.reconcile(t).Status.DesiredReplicas; got != 10 {
		t.Errorf("desiredReplicas %d after the reconcile, want 10 written back", got)
	}
	if got := writes() - before; got != 1 {
		t.Errorf("%d status writes after another client's, want 1", got)
	}
}

// BenchmarkStatusCompare: what deciding "no status write" costs, by a
// semantic comparison of the two statuses and by their fingerprints.
func BenchmarkStatusCompare(b *testing.B) {
	typed, err := typedMetricAutoscaler(cachedMetricAutoscaler(b, 1))
	if err != nil {
		b.Fatal(err)
	}
	stored := typed.(*v1alpha1.MetricAutoscaler).Status
	next := *stored.DeepCopy()
	b.Run("semantic", func(b *testing.B) {
		for b.Loop() {
			if !apiequality.Semantic.DeepEqual(withoutHistory(stored), withoutHistory(next)) {
				b.Fatal("differ")
			}
		}
	})
	b.Run("fingerprint", func(b *testing.B) {
		want := fingerprint(withoutHistory(stored))
		for b.Loop() {
			if fingerprint(withoutHistory(next)) != want {
				b.Fatal("differ")
			}
		}
	})
}

// TestFailedScaleReadKeepsCurrentMetrics: the cache holds no decoded
// currentMetrics, yet a reconcile that fails before computing metrics (the
// scale unreadable) stores the ones it read, as kube-controller-manager does.
func TestFailedScaleReadKeepsCurrentMetrics(t *testing.T) {
	t.Parallel()
	avg := resource.MustParse("12")
	ma := metricAutoscaler(func(m *v1alpha1.MetricAutoscaler) {
		m.Status.CurrentMetrics = []autoscalingv2.MetricStatus{{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricStatus{
			Metric:  autoscalingv2.MetricIdentifier{Name: "queue_messages_ready"},
			Current: autoscalingv2.MetricValueStatus{AverageValue: &avg},
		}}}
	})
	f := newFixture(t, ma, 4, 240)
	obj, _, _ := f.ctrl.inf.MetricAutoscalers.GetIndexer().GetByKey("default/workers")
	if cm := obj.(*v1alpha1.MetricAutoscaler).Status.CurrentMetrics; cm != nil {
		t.Fatalf("the cache keeps decoded currentMetrics: %+v", cm)
	}
	f.scales.PrependReactor("get", "deployments", func(clienttesting.Action) (bool, k8sruntime.Object, error) {
		return true, nil, fmt.Errorf("scale unreadable")
	})
	if _, err := f.ctrl.reconcile(context.Background(), kindMA+"/default/workers"); err == nil {
		t.Fatal("a reconcile with an unreadable scale reported no error")
	}
	st := f.stored(t).Status
	if len(st.CurrentMetrics) != 1 || st.CurrentMetrics[0].External == nil || st.CurrentMetrics[0].External.Current.AverageValue.Cmp(avg) != 0 {
		t.Errorf("currentMetrics after a failed scale read: %+v, want the stored ones (12)", st.CurrentMetrics)
	}
	if st.Targets != "12/30 (avg)" {
		t.Errorf("targets column %q, want \"12/30 (avg)\"", st.Targets)
	}
}

// TestTrimPodKeepsResizedRequests: during an in-place resize the cached pod
// carries the requests the containers have (status), not those asked for
// (spec), for the resources the status reports.
func TestTrimPodKeepsResizedRequests(t *testing.T) {
	t.Parallel()
	sidecar := corev1.ContainerRestartPolicyAlways
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}},
			InitContainers: []corev1.Container{{Name: "proxy", RestartPolicy: &sidecar, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("200m")}}}},
		},
		Status: corev1.PodStatus{
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Resources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("500m")}}}},
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "proxy", Resources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("100m")}}}},
		},
	}
	trimmed, err := TrimCached(pod.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	got := trimmed.(*cachedPod).pod()
	want := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	if !apiequality.Semantic.DeepEqual(got.Spec.Containers[0].Resources.Requests, want) {
		t.Errorf("container requests %v, want %v (cpu from status, memory from spec)", got.Spec.Containers[0].Resources.Requests, want)
	}
	if q := got.Spec.InitContainers[0].Resources.Requests[corev1.ResourceCPU]; q.Cmp(resource.MustParse("100m")) != 0 {
		t.Errorf("sidecar cpu request %v, want the status' 100m", q.String())
	}
}
