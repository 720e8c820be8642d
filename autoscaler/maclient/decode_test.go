package maclient

import (
	"encoding/json"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
)

// stored is a MetricAutoscaler as a watch sends it after a status write:
// one External metric, three conditions and a history of 20
// recommendations (the default 300 s window at a 15 s sync).
func stored(t testing.TB) []byte {
	t.Helper()
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	avg := resource.MustParse("30")
	gen := int64(1)
	ma := &v1alpha1.MetricAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "MetricAutoscaler"},
		ObjectMeta: metav1.ObjectMeta{Name: "workers-417", Namespace: "bench", UID: "0b6f7c7e-2f4e-4d0e-9a53-1f6f0e2b9c41", ResourceVersion: "123456", Generation: 1},
		Spec: v1alpha1.MetricAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "workers-417"},
			MaxReplicas:    10,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "redis_list_length", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"key": "jobs-417"}}},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &avg},
			}}},
		},
		Status: v1alpha1.MetricAutoscalerStatus{
			ObservedGeneration: &gen, CurrentReplicas: 4, DesiredReplicas: 4,
			CurrentMetrics: []autoscalingv2.MetricStatus{{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricStatus{
				Metric:  autoscalingv2.MetricIdentifier{Name: "redis_list_length", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"key": "jobs-417"}}},
				Current: autoscalingv2.MetricValueStatus{AverageValue: resource.NewMilliQuantity(27500, resource.DecimalSI)},
			}}},
			Reference: "Deployment/workers-417", Targets: "27500m/30 (avg)", MetricProposals: []int32{4},
			History: &v1alpha1.History{ScaleUpEvents: []v1alpha1.ScaleEvent{{Change: 3, Time: metav1.NewMicroTime(t0)}}},
		},
	}
	for _, c := range []autoscalingv2.HorizontalPodAutoscalerConditionType{autoscalingv2.AbleToScale, autoscalingv2.ScalingActive, autoscalingv2.ScalingLimited} {
		ma.Status.Conditions = append(ma.Status.Conditions, autoscalingv2.HorizontalPodAutoscalerCondition{
			Type: c, Status: "True", LastTransitionTime: metav1.NewTime(t0), Reason: "ReadyForNewScale", Message: "recommended size matches current size"})
	}
	for i := range 20 {
		ma.Status.History.Recommendations = append(ma.Status.History.Recommendations, v1alpha1.Recommendation{Replicas: 4, Time: metav1.NewMicroTime(t0.Add(time.Duration(i) * 15 * time.Second))})
	}
	data, err := json.Marshal(ma)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestDecodeTyped: the client's codec decodes a stored object into the
// typed MetricAutoscaler, as the dynamic client's map and its conversion did.
func TestDecodeTyped(t *testing.T) {
	t.Parallel()
	data := stored(t)
	obj, _, err := codecs.UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	typed, ok := obj.(*v1alpha1.MetricAutoscaler)
	if !ok {
		t.Fatalf("decoded a %T", obj)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	viaMap := &v1alpha1.MetricAutoscaler{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, viaMap); err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(typed)
	b, _ := json.Marshal(viaMap)
	if string(a) != string(b) || string(a) != string(data) {
		t.Errorf("typed and unstructured decodes differ:\n%s\n%s", a, b)
	}
}

// BenchmarkDecode: a watch event's object, typed by this client against
// the dynamic client's map and conversion.
func BenchmarkDecode(b *testing.B) {
	data := stored(b)
	b.Run("typed", func(b *testing.B) {
		dec := codecs.UniversalDeserializer()
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := dec.Decode(data, nil, &v1alpha1.MetricAutoscaler{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unstructured", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(data); err != nil {
				b.Fatal(err)
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &v1alpha1.MetricAutoscaler{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
