package convert_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	scalefake "k8s.io/client-go/scale/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/convert"
)

// instantClock steps a fake clock by whatever is waited for.
type instantClock struct{ *testingclock.FakeClock }

func (c instantClock) After(d time.Duration) <-chan time.Time {
	c.Step(d)
	ch := make(chan time.Time, 1)
	ch <- c.Now()
	return ch
}

// fixture is a fake cluster: an HPA, its rescale events, a Deployment's
// scale, MetricAutoscalers; log records the writes in order.
type fixture struct {
	kube    *kubefake.Clientset
	dyn     *dynamicfake.FakeDynamicClient
	scales  *scalefake.FakeScaleClient
	h       *convert.Handover
	replica int32
	mu      sync.Mutex
	log     []string
	// pausedAtDelete is the MetricAutoscaler's spec.paused when the HPA
	// was deleted.
	pausedAtDelete *bool
}

func hpaWorkers(uid string) *autoscalingv2.HorizontalPodAutoscaler {
	last := metav1.NewTime(t0.Add(-20 * time.Second))
	up := autoscalingv2.MaxChangePolicySelect
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: "shop", UID: k8stypes.UID("uid-" + uid), Labels: map[string]string{"app": "workers"}},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "workers"},
			MinReplicas:    ptr.To[int32](1),
			MaxReplicas:    10,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "queue_depth"},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("30"))},
			}}},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: &autoscalingv2.HPAScalingRules{SelectPolicy: &up, Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 2, PeriodSeconds: 60}}}},
		},
		Status: autoscalingv2.HorizontalPodAutoscalerStatus{
			LastScaleTime: &last, CurrentReplicas: 4, DesiredReplicas: 4,
			Conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionTrue, Reason: "SucceededRescale"}},
		},
	}
}

func newFixture(t *testing.T, objs []runtime.Object, mas ...*v1alpha1.MetricAutoscaler) *fixture {
	t.Helper()
	f := &fixture{replica: 4}
	f.kube = kubefake.NewSimpleClientset(objs...)
	var dynObjs []runtime.Object
	for _, ma := range mas {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ma)
		if err != nil {
			t.Fatal(err)
		}
		obj := &unstructured.Unstructured{Object: u}
		obj.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("MetricAutoscaler"))
		dynObjs = append(dynObjs, obj)
	}
	f.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{v1alpha1.GroupVersionResource: "MetricAutoscalerList"}, dynObjs...)
	f.scales = &scalefake.FakeScaleClient{}
	f.scales.AddReactor("get", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		return true, &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: "shop"}, Spec: autoscalingv1.ScaleSpec{Replicas: f.replica}}, nil
	})
	f.kube.PrependReactor("delete", "horizontalpodautoscalers", func(a k8stesting.Action) (bool, runtime.Object, error) {
		f.record("delete hpa")
		if u, err := f.dyn.Resource(v1alpha1.GroupVersionResource).Namespace("shop").Get(context.Background(), "workers", metav1.GetOptions{}); err == nil {
			p, _, _ := unstructured.NestedBool(u.Object, "spec", "paused")
			f.pausedAtDelete = &p
		}
		return false, nil, nil
	})
	f.dyn.PrependReactor("*", "metricautoscalers", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if v := a.GetVerb(); v != "get" && v != "list" && v != "watch" {
			f.record(strings.TrimSuffix(v+" ma "+a.GetSubresource(), " "))
		}
		return false, nil, nil
	})
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Group: "apps", Version: "v1"}})
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	f.h = &convert.Handover{
		Kube: f.kube, Dynamic: f.dyn, Scales: f.scales, Mapper: mapper,
		Clock: instantClock{testingclock.NewFakeClock(t0)}, Delay: 3 * time.Second, Timeout: 5 * time.Second,
		Log: &bytes.Buffer{},
	}
	return f
}

func (f *fixture) record(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, s)
}

func (f *fixture) ma(t *testing.T) *v1alpha1.MetricAutoscaler {
	t.Helper()
	u, err := f.dyn.Resource(v1alpha1.GroupVersionResource).Namespace("shop").Get(context.Background(), "workers", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ma := &v1alpha1.MetricAutoscaler{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ma); err != nil {
		t.Fatal(err)
	}
	return ma
}

func rescaledEvent(uid string, size int, at time.Time) *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("workers.%d", size), Namespace: "shop"},
		InvolvedObject: corev1.ObjectReference{Kind: "HorizontalPodAutoscaler", Name: "workers", Namespace: "shop", UID: k8stypes.UID("uid-" + uid)},
		Reason:         "SuccessfulRescale", Message: fmt.Sprintf("New size: %d; reason: External metric queue_depth above target", size),
		FirstTimestamp: metav1.NewTime(at), LastTimestamp: metav1.NewTime(at), Count: 1,
	}
}

func TestHandover(t *testing.T) {
	t.Parallel()
	f := newFixture(t, []runtime.Object{
		hpaWorkers("a"),
		rescaledEvent("a", 2, t0.Add(-2*time.Minute)),
		rescaledEvent("a", 4, t0.Add(-20*time.Second)),
		rescaledEvent("other", 9, t0.Add(-10*time.Second)), // another object's event
	})
	ctx := context.Background()
	res, err := f.h.Run(ctx, "shop", "workers")
	if err != nil {
		t.Fatal(err)
	}
	if res.Replicas != 4 || res.AlreadyDone || len(res.Notes) != 0 {
		t.Errorf("result %+v: want 4 replicas, no note (the rescale to 2 is older than the policy period)", res)
	}
	if want := "create ma,update ma status,delete hpa,update ma status,patch ma"; strings.Join(f.log, ",") != want {
		t.Errorf("writes %v, want %s: the MetricAutoscaler created and seeded before the HPA is deleted, unpaused after", f.log, want)
	}
	if f.pausedAtDelete == nil || !*f.pausedAtDelete {
		t.Errorf("spec.paused when the HPA was deleted: %v, want true", f.pausedAtDelete)
	}
	if _, err := f.kube.AutoscalingV2().HorizontalPodAutoscalers("shop").Get(ctx, "workers", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the HPA is still there: %v", err)
	}
	ma := f.ma(t)
	if ma.Spec.Paused || ma.Labels[convert.LabelHandover] != "done" || ma.Labels["app"] != "workers" || ma.Annotations[convert.AnnotationFromUID] != "uid-a" {
		t.Errorf("MetricAutoscaler paused %v labels %v annotations %v: want unpaused, handover done, the HPA's labels and uid", ma.Spec.Paused, ma.Labels, ma.Annotations)
	}
	st := ma.Status
	if st.CurrentReplicas != 4 || st.DesiredReplicas != 4 || st.LastScaleTime == nil || !st.LastScaleTime.Time.Equal(t0.Add(-20*time.Second)) || len(st.Conditions) != 1 {
		t.Errorf("status %+v: want the HPA's", st)
	}
	// seeded when unpaused (after the delay), not when created
	if r := st.History.Recommendations; len(r) != 1 || r[0].Replicas != 4 || !r[0].Time.Time.Equal(t0.Add(3*time.Second)) {
		t.Errorf("recommendations %+v: want 4 replicas at the handover", r)
	}
	if e := st.History.ScaleUpEvents; len(e) != 1 || e[0].Change != 2 || !e[0].Time.Time.Equal(t0.Add(-20*time.Second)) {
		t.Errorf("scale-up events %+v: want +2 from the SuccessfulRescale events, 20s before", e)
	}

	// Run again: nothing to do, nothing written.
	f.log = nil
	res, err = f.h.Run(ctx, "shop", "workers")
	if err != nil || !res.AlreadyDone {
		t.Errorf("second run: %+v, %v: want already done", res, err)
	}
	if len(f.log) != 0 {
		t.Errorf("second run wrote %v", f.log)
	}
}

// TestHandoverPicksUpARescaleDuringTheDelay: a rescale the HPA's
// controller finished after the delete is the MetricAutoscaler's start.
func TestHandoverPicksUpARescaleDuringTheDelay(t *testing.T) {
	t.Parallel()
	f := newFixture(t, []runtime.Object{hpaWorkers("a")})
	f.kube.PrependReactor("delete", "horizontalpodautoscalers", func(k8stesting.Action) (bool, runtime.Object, error) {
		f.mu.Lock()
		f.replica = 5
		f.mu.Unlock()
		return false, nil, nil
	})
	res, err := f.h.Run(context.Background(), "shop", "workers")
	if err != nil {
		t.Fatal(err)
	}
	if st := f.ma(t).Status; res.Replicas != 5 || st.CurrentReplicas != 5 || st.History.Recommendations[0].Replicas != 5 {
		t.Errorf("result %d, status %d, recommendation %d: want the size after the HPA's last rescale, 5", res.Replicas, st.CurrentReplicas, st.History.Recommendations[0].Replicas)
	}
}

func maOf(name, handover, uid string, target string) *v1alpha1.MetricAutoscaler {
	ma := &v1alpha1.MetricAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "MetricAutoscaler"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", Labels: map[string]string{}, Annotations: map[string]string{}},
		Spec: v1alpha1.MetricAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: target},
			MaxReplicas:    10, Paused: handover == "pending",
		},
	}
	if handover != "" {
		ma.Labels[convert.LabelHandover] = handover
		ma.Annotations[convert.AnnotationFromUID] = uid
	}
	return ma
}

func TestHandoverRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		objs    []runtime.Object
		mas     []*v1alpha1.MetricAutoscaler
		wantErr string
	}{
		{"a MetricAutoscaler of the same name, not from a handover", []runtime.Object{hpaWorkers("a")},
			[]*v1alpha1.MetricAutoscaler{maOf("workers", "", "", "workers")}, "refusing to overwrite"},
		{"a pending handover of an earlier HPA of that name", []runtime.Object{hpaWorkers("b")},
			[]*v1alpha1.MetricAutoscaler{maOf("workers", "pending", "uid-a", "workers")}, "refusing to overwrite"},
		{"another MetricAutoscaler scaling the same Deployment", []runtime.Object{hpaWorkers("a")},
			[]*v1alpha1.MetricAutoscaler{maOf("other", "", "", "workers")}, "MetricAutoscaler shop/other already scales Deployment workers"},
		{"no HPA and no handover", nil, nil, "HorizontalPodAutoscaler shop/workers not found"},
		{"a target without a scale", []runtime.Object{func() runtime.Object {
			h := hpaWorkers("a")
			h.Spec.ScaleTargetRef.Kind = "Rollout"
			return h
		}()}, nil, "the scale target Rollout workers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, tt.objs, tt.mas...)
			_, err := f.h.Run(context.Background(), "shop", "workers")
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
			if len(f.log) != 0 {
				t.Errorf("a refused handover wrote %v", f.log)
			}
		})
	}
}

// TestHandoverResumes: a run that stopped after deleting the HPA is
// finished by the next one.
func TestHandoverResumes(t *testing.T) {
	t.Parallel()
	pending := maOf("workers", "pending", "uid-a", "workers")
	pending.Status.DesiredReplicas = 4
	last := metav1.NewTime(t0.Add(-time.Minute))
	pending.Status.LastScaleTime = &last
	f := newFixture(t, nil, pending)
	res, err := f.h.Run(context.Background(), "shop", "workers")
	if err != nil {
		t.Fatal(err)
	}
	ma := f.ma(t)
	if ma.Spec.Paused || ma.Labels[convert.LabelHandover] != "done" || res.Replicas != 4 || !ma.Status.LastScaleTime.Equal(&last) {
		t.Errorf("paused %v label %q replicas %d lastScaleTime %v: want the handover finished from the status written before", ma.Spec.Paused, ma.Labels[convert.LabelHandover], res.Replicas, ma.Status.LastScaleTime)
	}
	if want := "update ma status,patch ma"; strings.Join(f.log, ",") != want {
		t.Errorf("writes %v, want %s", f.log, want)
	}
}

// TestHandoverResumesWithTheHPA: a run that stopped before deleting the
// HPA: its MetricAutoscaler (paused) is brought up to the HPA's spec.
func TestHandoverResumesWithTheHPA(t *testing.T) {
	t.Parallel()
	pending := maOf("workers", "pending", "uid-a", "workers")
	f := newFixture(t, []runtime.Object{hpaWorkers("a")}, pending)
	if _, err := f.h.Run(context.Background(), "shop", "workers"); err != nil {
		t.Fatal(err)
	}
	if want := "update ma,update ma status,delete hpa,update ma status,patch ma"; strings.Join(f.log, ",") != want {
		t.Errorf("writes %v, want %s", f.log, want)
	}
	if ma := f.ma(t); len(ma.Spec.Metrics) != 1 || ma.Spec.MinReplicas == nil || ma.Spec.Paused {
		t.Errorf("spec %+v: want the HPA's, unpaused", ma.Spec)
	}
}
