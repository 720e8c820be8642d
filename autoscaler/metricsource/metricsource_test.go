package metricsource

import (
	"math"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	custommetricsv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	externalmetricsv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
)

// TestHugeValuesSaturate: a Quantity beyond the milli range (an External
// 9.3e15 served by another adapter) reads as the largest value, not as
// -9146744073709551616m (or 0), a load taken for less than none; with
// upstream set it reads as kube-controller-manager's Quantity.MilliValue().
func TestHugeValuesSaturate(t *testing.T) {
	t.Parallel()
	huge := resource.MustParse("9.3e15")
	ts := metav1.NewTime(time.Unix(1, 0))
	ext := []externalmetricsv1beta1.ExternalMetricValue{{MetricName: "q", Value: huge, Timestamp: ts}, {MetricName: "q", Value: resource.MustParse("-9.3e15"), Timestamp: ts}}
	custom := []custommetricsv1beta2.MetricValue{{DescribedObject: corev1.ObjectReference{Name: "web-0"}, Value: huge, Timestamp: ts}}
	wrap := func(q resource.Quantity) int64 { return q.MilliValue() }
	for _, tc := range []struct {
		upstream bool
		ext      []int64
		pod      int64
	}{
		{false, []int64{math.MaxInt64, math.MinInt64}, math.MaxInt64},
		{true, []int64{wrap(ext[0].Value), wrap(ext[1].Value)}, wrap(huge)},
	} {
		got, _, err := FromExternalMetrics(ext, tc.upstream)
		if err != nil || len(got) != 2 || got[0] != tc.ext[0] || got[1] != tc.ext[1] {
			t.Errorf("upstream %v: FromExternalMetrics = %v, %v; want %v", tc.upstream, got, err, tc.ext)
		}
		pods, _, err := FromCustomMetrics(custom, tc.upstream)
		if err != nil || pods["web-0"].Value != tc.pod {
			t.Errorf("upstream %v: FromCustomMetrics = %v, %v; want %d", tc.upstream, pods, err, tc.pod)
		}
	}
}
