package controller

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"k8s.io/client-go/tools/cache"
)

func deployment(rv string, replicas, statusReplicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: "default", ResourceVersion: rv},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{
			MatchLabels:      map[string]string{"app": "workers"},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"b", "a"}}},
		}},
		Status: appsv1.DeploymentStatus{Replicas: statusReplicas},
	}
}

// withWorkloadCache gives the fixture's controller a Deployment informer
// on a fake clientset holding d, and returns that clientset.
func withWorkloadCache(t *testing.T, f *fixture, d *appsv1.Deployment) *kubefake.Clientset {
	t.Helper()
	kube := kubefake.NewClientset(d)
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(TrimCached))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	starts := 0
	f.ctrl.workloads = &workloadScales{informer: func(gr schema.GroupResource) cache.SharedIndexInformer {
		starts++
		if gr != deploymentsGR {
			t.Errorf("informer of %s asked for", gr)
			return nil
		}
		inf := factory.Apps().V1().Deployments().Informer()
		factory.Start(ctx.Done())
		cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
		return inf
	}}
	t.Cleanup(func() {
		if starts != 1 {
			t.Errorf("the Deployment informer was asked for %d times, want 1", starts)
		}
	})
	return kube
}

// TestScaleFromWorkloadCache: the scale of a Deployment comes from the
// watch cache (no GET of /scale), as /scale computes it; the controller's
// own write is what the next reconcile sees until the cache has it; a
// later change by someone else wins.
func TestScaleFromWorkloadCache(t *testing.T) {
	t.Parallel()
	f := newFixture(t, metricAutoscaler(nil), 99, 240) // 99: what a GET of /scale would say
	withWorkloadCache(t, f, deployment("10", 4, 3))
	var wroteRV string
	f.scales.PrependReactor("update", "deployments", func(a core.Action) (bool, runtime.Object, error) {
		sc := a.(core.UpdateAction).GetObject().(*autoscalingv1.Scale).DeepCopy()
		wroteRV = sc.ResourceVersion
		f.replicas, f.writes = sc.Spec.Replicas, f.writes+1
		sc.ResourceVersion = "11"
		return true, sc, nil
	})

	ma := f.reconcile(t)
	// 240 messages at 30 each from 4 replicas: 8.
	if f.writes != 1 || f.replicas != 8 || ma.Status.CurrentReplicas != 4 {
		t.Fatalf("%d writes to %d replicas from current %d; want 1 write to 8 from 4 (the cached Deployment's)", f.writes, f.replicas, ma.Status.CurrentReplicas)
	}
	if wroteRV != "10" {
		t.Errorf("the write carried resourceVersion %q, want the cached 10", wroteRV)
	}
	for _, a := range f.scales.Actions() {
		if a.GetVerb() == "get" {
			t.Errorf("a GET of /scale: %v", a)
		}
	}
	sc, ok := f.ctrl.workloads.get(deploymentsGR, "default", "workers")
	if !ok {
		t.Fatal("the cache did not answer")
	}
	if sc.Spec.Replicas != 8 || sc.ResourceVersion != "11" || sc.Status.Replicas != 3 || sc.Status.Selector != "app=workers,tier in (a,b)" {
		t.Errorf("scale before the cache saw the write: %+v, want spec 8 at resourceVersion 11 (the write), status 3 and the selector as /scale prints it", sc)
	}

	// Someone scales to 6 after our write: the cache has it, the overlay goes.
	f.ctrl.workloads.caughtUp(deploymentsGR, &cachedWorkload{name: "workers", namespace: "default", resourceVersion: 9}, false)
	if sc, _ := f.ctrl.workloads.get(deploymentsGR, "default", "workers"); sc.Spec.Replicas != 8 {
		t.Errorf("an older event dropped the write: %d replicas", sc.Spec.Replicas)
	}
	inf := f.ctrl.workloads.started[deploymentsGR]
	if err := inf.GetStore().Update(newCachedWorkload(deployment("12", 6, 6).ObjectMeta, ptr32(6), 6, deployment("", 0, 0).Spec.Selector)); err != nil {
		t.Fatal(err)
	}
	if sc, _ := f.ctrl.workloads.get(deploymentsGR, "default", "workers"); sc.Spec.Replicas != 6 || sc.ResourceVersion != "12" {
		t.Errorf("after a newer change: %d replicas at %s, want 6 at 12", sc.Spec.Replicas, sc.ResourceVersion)
	}
}

// TestScaleCacheFallsBack: a workload the cache does not hold, or a kind
// it does not cache, is read by GET of /scale.
func TestScaleCacheFallsBack(t *testing.T) {
	t.Parallel()
	f := newFixture(t, metricAutoscaler(nil), 4, 240)
	d := deployment("10", 2, 2)
	d.Name = "other"
	withWorkloadCache(t, f, d)
	f.reconcile(t)
	gets := 0
	for _, a := range f.scales.Actions() {
		if a.GetVerb() == "get" {
			gets++
		}
	}
	if gets != 1 || f.replicas != 8 {
		t.Errorf("%d GETs of /scale, %d replicas; want 1 GET (not cached) and 8 from its 4", gets, f.replicas)
	}
	if _, ok := f.ctrl.workloads.get(schema.GroupResource{Group: "example.com", Resource: "things"}, "default", "x"); ok {
		t.Error("a custom resource was answered from a workload cache")
	}
}

func ptr32(v int32) *int32 { return &v }

// BenchmarkSteadyReconcile: the controller's own cost of one reconcile of
// a steady MetricAutoscaler (scale from the workload cache, metric from an
// in-memory source, no write): everything but the metric read's request.
func BenchmarkSteadyReconcile(b *testing.B) {
	t := &testing.T{}
	f := newFixture(t, metricAutoscaler(func(m *v1alpha1.MetricAutoscaler) { m.Spec.SyncPeriod = &metav1.Duration{Duration: 15 * time.Second} }), 8, 240)
	withWorkloadCache(t, f, deployment("10", 8, 8))
	f.ctrl.cfg.HistorySyncInterval = 5 * time.Minute // the default
	ctx := context.Background()
	for range 3 { // reach the steady state: scaled, status stored
		if _, err := f.ctrl.reconcile(ctx, kindMA+"/default/workers"); err != nil {
			b.Fatal(err)
		}
		f.stored(t)
		f.clock.Step(15 * time.Second)
	}
	writes := len(f.dyn.Actions())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.ctrl.reconcile(ctx, kindMA+"/default/workers"); err != nil {
			b.Fatal(err)
		}
		f.clock.Step(15 * time.Second)
	}
	b.StopTimer()
	if got := len(f.dyn.Actions()) - writes; got > b.N/10+1 {
		b.Fatalf("%d API actions in %d steady reconciles", got, b.N)
	}
}
