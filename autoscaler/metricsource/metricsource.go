// Package metricsource is the seam between the decision core and the three
// metrics APIs: the core asks a Source, the controller answers from the
// cluster and the simulator from a recorded scenario.
package metricsource

import (
	"context"
	"errors"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	custommetricsv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	externalmetricsv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/metricscale/metricscale/autoscaler/arith"
)

// PodMetric is one pod's sample, in milli-units.
type PodMetric struct {
	Timestamp time.Time
	Window    time.Duration
	Value     int64
}

// PodMetricsInfo holds samples by pod name.
type PodMetricsInfo map[string]PodMetric

// Source answers the queries the HPA algorithm makes. Values are milli-units,
// saturated at the int64 bounds (arith.MilliValue): a Quantity beyond them
// (an External 9.3e15 served by another adapter) reads as the largest
// value, never wrapped to a negative one.
type Source interface {
	// ResourceMetric reads metrics.k8s.io for the pods matching selector: each
	// pod's usage of resource, summed over its containers or of one container.
	ResourceMetric(ctx context.Context, resource corev1.ResourceName, namespace string, selector labels.Selector, container string) (PodMetricsInfo, time.Time, error)
	// PodsMetric reads custom.metrics.k8s.io for the pods matching selector.
	PodsMetric(ctx context.Context, metricName, namespace string, selector, metricSelector labels.Selector) (PodMetricsInfo, time.Time, error)
	// ObjectMetric reads custom.metrics.k8s.io for one object.
	ObjectMetric(ctx context.Context, metricName, namespace string, ref *autoscalingv2.CrossVersionObjectReference, metricSelector labels.Selector) (int64, time.Time, error)
	// ExternalMetric reads external.metrics.k8s.io: every matching series' value.
	ExternalMetric(ctx context.Context, metricName, namespace string, selector labels.Selector) ([]int64, time.Time, error)
}

// DefaultCustomMetricWindow is the window assumed when a custom metric value
// carries none, as metrics-server's default resolution.
const DefaultCustomMetricWindow = time.Minute

var (
	errNoResourceMetrics = errors.New("no metrics returned from resource metrics API")
	errNoCustomMetrics   = errors.New("no metrics returned from custom metrics API")
	errNoExternalMetrics = errors.New("no metrics returned from external metrics API")
)

// The From* functions convert with arith.MilliValue: saturating, or with
// upstream set (`simulate --upstream-arithmetic` only), wrapping as
// kube-controller-manager does.

// FromPodMetrics turns a metrics.k8s.io answer into per-pod samples of one
// resource. A pod that lacks the resource in any container (or, with
// container set, in that container) has no sample.
func FromPodMetrics(items []metricsv1beta1.PodMetrics, resource corev1.ResourceName, container string, upstream bool) (PodMetricsInfo, time.Time, error) {
	if len(items) == 0 {
		return nil, time.Time{}, errNoResourceMetrics
	}
	res := make(PodMetricsInfo, len(items))
	for i := range items {
		m := &items[i]
		if container != "" {
			for _, c := range m.Containers {
				if c.Name != container {
					continue
				}
				if q, ok := c.Usage[resource]; ok {
					res[m.Name] = PodMetric{Timestamp: m.Timestamp.Time, Window: m.Window.Duration, Value: arith.MilliValue(q, upstream)}
				}
				break
			}
			continue
		}
		if len(m.Containers) == 0 {
			continue
		}
		var sum int64
		missing := false
		for _, c := range m.Containers {
			q, ok := c.Usage[resource]
			if !ok {
				missing = true
				break
			}
			sum += arith.MilliValue(q, upstream)
		}
		if !missing {
			res[m.Name] = PodMetric{Timestamp: m.Timestamp.Time, Window: m.Window.Duration, Value: sum}
		}
	}
	return res, items[0].Timestamp.Time, nil
}

// FromCustomMetrics turns a custom.metrics.k8s.io answer for pods into
// per-pod samples.
func FromCustomMetrics(items []custommetricsv1beta2.MetricValue, upstream bool) (PodMetricsInfo, time.Time, error) {
	if len(items) == 0 {
		return nil, time.Time{}, errNoCustomMetrics
	}
	res := make(PodMetricsInfo, len(items))
	for i := range items {
		m := &items[i]
		window := DefaultCustomMetricWindow
		if m.WindowSeconds != nil {
			window = time.Duration(*m.WindowSeconds) * time.Second
		}
		res[m.DescribedObject.Name] = PodMetric{Timestamp: m.Timestamp.Time, Window: window, Value: arith.MilliValue(m.Value, upstream)}
	}
	return res, items[0].Timestamp.Time, nil
}

// FromExternalMetrics returns the milli-values of an
// external.metrics.k8s.io answer; the HPA sums them.
func FromExternalMetrics(items []externalmetricsv1beta1.ExternalMetricValue, upstream bool) ([]int64, time.Time, error) {
	if len(items) == 0 {
		return nil, time.Time{}, errNoExternalMetrics
	}
	values := make([]int64, len(items))
	for i := range items {
		values[i] = arith.MilliValue(items[i].Value, upstream)
	}
	return values, items[0].Timestamp.Time, nil
}
