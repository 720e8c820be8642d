package objectmetrics

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
)

var names = []string{
	"metricscale_metricautoscaler_current_replicas",
	"metricscale_metricautoscaler_desired_replicas",
	"metricscale_metricautoscaler_min_replicas",
	"metricscale_metricautoscaler_max_replicas",
	"metricscale_metricautoscaler_metric_value",
	"metricscale_metricautoscaler_metric_target",
	"metricscale_metricautoscaler_condition",
	"metricscale_metricautoscaler_fallback_active",
	"metricscale_metricautoscaler_active",
	"metricscale_metricautoscaler_last_scale_time_seconds",
}

func newRegistered(t testing.TB) (*Gauges, metrics.KubeRegistry) {
	t.Helper()
	g := New()
	reg := metrics.NewKubeRegistry()
	g.MustRegister(reg.CustomRegister)
	return g, reg
}

func q(s string) *resource.Quantity {
	v := resource.MustParse(s)
	return &v
}

func i32(v int32) *int32 { return &v }

// twoMetrics is an object with an External AverageValue metric and a CPU
// Utilization one, scaled to zero by activation, in fallback.
func twoMetrics() (*v1alpha1.MetricAutoscaler, *v1alpha1.MetricAutoscalerStatus) {
	ma := &v1alpha1.MetricAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "workers"},
		Spec: v1alpha1.MetricAutoscalerSpec{
			MinReplicas: i32(0), MaxReplicas: 20,
			Metrics: []autoscalingv2.MetricSpec{
				{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
					Metric: autoscalingv2.MetricIdentifier{Name: "queue_messages_ready"},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("30")},
				}},
				{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
					Name:   corev1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: i32(70)},
				}},
			},
		},
	}
	scaled := metav1.NewTime(time.Unix(1_700_000_000, 0))
	status := &v1alpha1.MetricAutoscalerStatus{
		CurrentReplicas: 3, DesiredReplicas: 5, LastScaleTime: &scaled,
		CurrentMetrics: []autoscalingv2.MetricStatus{
			{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricStatus{
				Metric:  autoscalingv2.MetricIdentifier{Name: "queue_messages_ready"},
				Current: autoscalingv2.MetricValueStatus{AverageValue: q("45500m")},
			}},
			{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{
				Name:    corev1.ResourceCPU,
				Current: autoscalingv2.MetricValueStatus{AverageUtilization: i32(82), AverageValue: q("410m")},
			}},
		},
		Conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{
			{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionTrue},
			{Type: autoscalingv2.ScalingLimited, Status: corev1.ConditionFalse},
		},
		Fallback:    &v1alpha1.FallbackStatus{Active: true},
		ScaleToZero: &v1alpha1.ScaleToZeroStatus{Active: false},
	}
	return ma, status
}

const header = `
# HELP metricscale_metricautoscaler_active [ALPHA] 0 while activation holds the target at zero replicas (status.scaleToZero.active false), else 1.
# TYPE metricscale_metricautoscaler_active gauge
# HELP metricscale_metricautoscaler_condition [ALPHA] 1 for each status condition's current status (True, False, Unknown), 0 for the others.
# TYPE metricscale_metricautoscaler_condition gauge
# HELP metricscale_metricautoscaler_current_replicas [ALPHA] The target's replicas when the MetricAutoscaler last read them (status.currentReplicas).
# TYPE metricscale_metricautoscaler_current_replicas gauge
# HELP metricscale_metricautoscaler_desired_replicas [ALPHA] The replicas the MetricAutoscaler last computed (status.desiredReplicas).
# TYPE metricscale_metricautoscaler_desired_replicas gauge
# HELP metricscale_metricautoscaler_fallback_active [ALPHA] 1 while the fallback size is in force (status.fallback.active), else 0.
# TYPE metricscale_metricautoscaler_fallback_active gauge
# HELP metricscale_metricautoscaler_last_scale_time_seconds [ALPHA] When the target was last rescaled, in Unix seconds (status.lastScaleTime); absent until it has been.
# TYPE metricscale_metricautoscaler_last_scale_time_seconds gauge
# HELP metricscale_metricautoscaler_max_replicas [ALPHA] spec.maxReplicas.
# TYPE metricscale_metricautoscaler_max_replicas gauge
# HELP metricscale_metricautoscaler_metric_target [ALPHA] Each spec metric's target, by target type (Value, AverageValue, Utilization).
# TYPE metricscale_metricautoscaler_metric_target gauge
# HELP metricscale_metricautoscaler_metric_value [ALPHA] Each spec metric's last read value, in the metric's units (the utilization percent for Utilization targets, the average per pod for AverageValue ones); absent while it cannot be read.
# TYPE metricscale_metricautoscaler_metric_value gauge
# HELP metricscale_metricautoscaler_min_replicas [ALPHA] spec.minReplicas (1 when unset).
# TYPE metricscale_metricautoscaler_min_replicas gauge
`

// expect keeps the header lines of the families that have samples: the
// text format has none for an empty family.
func expect(samples string) string {
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(header), "\n") {
		fields := strings.Fields(line)
		if strings.Contains(samples, fields[2]+"{") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n") + "\n" + samples
}

func TestObserve(t *testing.T) {
	t.Parallel()
	g, reg := newRegistered(t)
	ma, status := twoMetrics()
	g.Observe(ma, status, nil)
	want := `
metricscale_metricautoscaler_active{name="workers",namespace="shop"} 0
metricscale_metricautoscaler_condition{condition="AbleToScale",name="workers",namespace="shop",status="False"} 0
metricscale_metricautoscaler_condition{condition="AbleToScale",name="workers",namespace="shop",status="True"} 1
metricscale_metricautoscaler_condition{condition="AbleToScale",name="workers",namespace="shop",status="Unknown"} 0
metricscale_metricautoscaler_condition{condition="ScalingLimited",name="workers",namespace="shop",status="False"} 1
metricscale_metricautoscaler_condition{condition="ScalingLimited",name="workers",namespace="shop",status="True"} 0
metricscale_metricautoscaler_condition{condition="ScalingLimited",name="workers",namespace="shop",status="Unknown"} 0
metricscale_metricautoscaler_current_replicas{name="workers",namespace="shop"} 3
metricscale_metricautoscaler_desired_replicas{name="workers",namespace="shop"} 5
metricscale_metricautoscaler_fallback_active{name="workers",namespace="shop"} 1
metricscale_metricautoscaler_last_scale_time_seconds{name="workers",namespace="shop"} 1.7e+09
metricscale_metricautoscaler_max_replicas{name="workers",namespace="shop"} 20
metricscale_metricautoscaler_metric_target{metric_name="cpu",metric_type="Resource",name="workers",namespace="shop",target_type="Utilization"} 70
metricscale_metricautoscaler_metric_target{metric_name="queue_messages_ready",metric_type="External",name="workers",namespace="shop",target_type="AverageValue"} 30
metricscale_metricautoscaler_metric_value{metric_name="cpu",metric_type="Resource",name="workers",namespace="shop"} 82
metricscale_metricautoscaler_metric_value{metric_name="queue_messages_ready",metric_type="External",name="workers",namespace="shop"} 45.5
metricscale_metricautoscaler_min_replicas{name="workers",namespace="shop"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expect(want)), names...); err != nil {
		t.Fatal(err)
	}
}

// TestObserveDropsWhatIsGone: a metric removed from the spec, a metric that
// could not be read, a condition no longer reported and a cleared last
// scale time lose their series; the rest are updated in place; an object
// without spec.scaleToZero is active; unset minReplicas is 1.
func TestObserveDropsWhatIsGone(t *testing.T) {
	t.Parallel()
	g, reg := newRegistered(t)
	ma, status := twoMetrics()
	g.Observe(ma, status, nil)

	ma = ma.DeepCopy()
	ma.Spec.MinReplicas = nil
	ma.Spec.Metrics = ma.Spec.Metrics[:1]
	ma.Spec.Metrics[0].External.Target = autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: q("100")}
	status = &v1alpha1.MetricAutoscalerStatus{
		CurrentReplicas: 5, DesiredReplicas: 5,
		// an unread metric: an empty entry in its place
		CurrentMetrics: []autoscalingv2.MetricStatus{{}},
		Conditions:     []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionUnknown}},
	}
	g.Observe(ma, status, nil)
	want := `
metricscale_metricautoscaler_active{name="workers",namespace="shop"} 1
metricscale_metricautoscaler_condition{condition="AbleToScale",name="workers",namespace="shop",status="False"} 0
metricscale_metricautoscaler_condition{condition="AbleToScale",name="workers",namespace="shop",status="True"} 0
metricscale_metricautoscaler_condition{condition="AbleToScale",name="workers",namespace="shop",status="Unknown"} 1
metricscale_metricautoscaler_current_replicas{name="workers",namespace="shop"} 5
metricscale_metricautoscaler_desired_replicas{name="workers",namespace="shop"} 5
metricscale_metricautoscaler_fallback_active{name="workers",namespace="shop"} 0
metricscale_metricautoscaler_max_replicas{name="workers",namespace="shop"} 20
metricscale_metricautoscaler_metric_target{metric_name="queue_messages_ready",metric_type="External",name="workers",namespace="shop",target_type="Value"} 100
metricscale_metricautoscaler_min_replicas{name="workers",namespace="shop"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expect(want)), names...); err != nil {
		t.Fatal(err)
	}
}

// TestForget: a deleted object loses every series; another object's stay.
func TestForget(t *testing.T) {
	t.Parallel()
	g, reg := newRegistered(t)
	ma, status := twoMetrics()
	g.Observe(ma, status, nil)
	other := &v1alpha1.MetricAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "api"}, Spec: v1alpha1.MetricAutoscalerSpec{MinReplicas: i32(2), MaxReplicas: 4}}
	g.Observe(other, &v1alpha1.MetricAutoscalerStatus{CurrentReplicas: 2, DesiredReplicas: 2}, nil)

	g.Forget("shop", "workers")
	g.Forget("shop", "never-seen")
	want := `
metricscale_metricautoscaler_active{name="api",namespace="shop"} 1
metricscale_metricautoscaler_current_replicas{name="api",namespace="shop"} 2
metricscale_metricautoscaler_desired_replicas{name="api",namespace="shop"} 2
metricscale_metricautoscaler_fallback_active{name="api",namespace="shop"} 0
metricscale_metricautoscaler_max_replicas{name="api",namespace="shop"} 4
metricscale_metricautoscaler_min_replicas{name="api",namespace="shop"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expect(want)), names...); err != nil {
		t.Fatal(err)
	}
}

// TestObserveAfterDeletion: a reconcile that finishes after the object's
// deletion (present false) adds no series back.
func TestObserveAfterDeletion(t *testing.T) {
	t.Parallel()
	g, reg := newRegistered(t)
	ma, status := twoMetrics()
	g.Observe(ma, status, nil)
	g.Forget("shop", "workers")
	g.Observe(ma, status, func() bool { return false })
	if err := testutil.GatherAndCompare(reg, strings.NewReader(""), names...); err != nil {
		t.Fatal(err)
	}
}

// TestObserveValueTypes: each source type's value is read from its own
// status field, by the spec target's type.
func TestObserveValueTypes(t *testing.T) {
	t.Parallel()
	ident := autoscalingv2.MetricIdentifier{Name: "m"}
	tests := []struct {
		name   string
		spec   autoscalingv2.MetricSpec
		status autoscalingv2.MetricStatus
		want   string
	}{{
		name: "object value",
		spec: autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
			Metric: ident, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: q("2k")}}},
		status: autoscalingv2.MetricStatus{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricStatus{
			Metric: ident, Current: autoscalingv2.MetricValueStatus{Value: q("1500")}}},
		want: `
metricscale_metricautoscaler_metric_target{metric_name="m",metric_type="Object",name="o",namespace="n",target_type="Value"} 2000
metricscale_metricautoscaler_metric_value{metric_name="m",metric_type="Object",name="o",namespace="n"} 1500
`,
	}, {
		name: "pods average value",
		spec: autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
			Metric: ident, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("250m")}}},
		status: autoscalingv2.MetricStatus{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricStatus{
			Metric: ident, Current: autoscalingv2.MetricValueStatus{AverageValue: q("125m")}}},
		want: `
metricscale_metricautoscaler_metric_target{metric_name="m",metric_type="Pods",name="o",namespace="n",target_type="AverageValue"} 0.25
metricscale_metricautoscaler_metric_value{metric_name="m",metric_type="Pods",name="o",namespace="n"} 0.125
`,
	}, {
		name: "container resource utilization",
		spec: autoscalingv2.MetricSpec{Type: autoscalingv2.ContainerResourceMetricSourceType, ContainerResource: &autoscalingv2.ContainerResourceMetricSource{
			Name: corev1.ResourceMemory, Container: "app", Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: i32(60)}}},
		status: autoscalingv2.MetricStatus{Type: autoscalingv2.ContainerResourceMetricSourceType, ContainerResource: &autoscalingv2.ContainerResourceMetricStatus{
			Name: corev1.ResourceMemory, Container: "app", Current: autoscalingv2.MetricValueStatus{AverageUtilization: i32(75), AverageValue: q("300Mi")}}},
		want: `
metricscale_metricautoscaler_metric_target{metric_name="memory",metric_type="ContainerResource",name="o",namespace="n",target_type="Utilization"} 60
metricscale_metricautoscaler_metric_value{metric_name="memory",metric_type="ContainerResource",name="o",namespace="n"} 75
`,
	}, {
		name: "status of another type (spec changed since) is no value",
		spec: autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
			Metric: ident, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("1")}}},
		status: autoscalingv2.MetricStatus{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricStatus{
			Metric: ident, Current: autoscalingv2.MetricValueStatus{Value: q("7")}}},
		want: `
metricscale_metricautoscaler_metric_target{metric_name="m",metric_type="Pods",name="o",namespace="n",target_type="AverageValue"} 1
`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g, reg := newRegistered(t)
			ma := &v1alpha1.MetricAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: "o"},
				Spec: v1alpha1.MetricAutoscalerSpec{MaxReplicas: 3, Metrics: []autoscalingv2.MetricSpec{tt.spec}}}
			g.Observe(ma, &v1alpha1.MetricAutoscalerStatus{CurrentMetrics: []autoscalingv2.MetricStatus{tt.status}}, nil)
			if err := testutil.GatherAndCompare(reg, strings.NewReader(expect(tt.want)),
				"metricscale_metricautoscaler_metric_value", "metricscale_metricautoscaler_metric_target"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// BenchmarkObserve: one Observe of an object's status (the controller's
// per-reconcile cost), and the heap the series of 1,000 objects keep
// (retained-B/object).
func BenchmarkObserve(b *testing.B) {
	ma, status := twoMetrics()
	objs := make([]*v1alpha1.MetricAutoscaler, 1000)
	for i := range objs {
		objs[i] = ma.DeepCopy()
		objs[i].Name = fmt.Sprintf("workers-%d", i)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	g, _ := newRegistered(b)
	for _, o := range objs {
		g.Observe(o, status, nil)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	retained := float64(after.HeapAlloc-before.HeapAlloc) / float64(len(objs))
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		g.Observe(objs[i%len(objs)], status, nil)
		i++
	}
	b.ReportMetric(retained, "retained-B/object")
	runtime.KeepAlive(g)
}

// BenchmarkGather: a scrape's gathering of 1,000 objects' series.
func BenchmarkGather(b *testing.B) {
	ma, status := twoMetrics()
	g, reg := newRegistered(b)
	for i := range 1000 {
		o := ma.DeepCopy()
		o.Name = fmt.Sprintf("workers-%d", i)
		g.Observe(o, status, nil)
	}
	b.ReportAllocs()
	for b.Loop() {
		families, err := reg.Gather()
		if err != nil || len(families) != len(names) {
			b.Fatalf("%d families, %v", len(families), err)
		}
	}
}

// TestObserveDuringScrape: reconciles update and forget objects while a
// scrape reads them (run with -race); every scrape sees whole objects.
func TestObserveDuringScrape(t *testing.T) {
	t.Parallel()
	g, reg := newRegistered(t)
	ma, status := twoMetrics()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 2000 {
			o := ma.DeepCopy()
			o.Name = fmt.Sprintf("workers-%d", i%50)
			g.Observe(o, status, nil)
			if i%7 == 0 {
				g.Forget(o.Namespace, o.Name)
			}
		}
	}()
	for scraping := true; scraping; {
		select {
		case <-done:
			scraping = false
		default:
		}
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		counts := map[string]int{}
		for _, f := range families {
			counts[f.GetName()] = len(f.GetMetric())
		}
		// each object has one current_replicas series and six condition series
		if c, r := counts["metricscale_metricautoscaler_condition"], counts["metricscale_metricautoscaler_current_replicas"]; c != 6*r {
			t.Fatalf("%d condition series for %d objects", c, r)
		}
	}
}
