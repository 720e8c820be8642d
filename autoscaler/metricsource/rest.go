package metricsource

import (
	"context"
	"fmt"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	custommetricsv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	resourceclient "k8s.io/metrics/pkg/client/clientset/versioned/typed/metrics/v1beta1"
	customclient "k8s.io/metrics/pkg/client/custom_metrics"
	externalclient "k8s.io/metrics/pkg/client/external_metrics"

	"github.com/metricscale/metricscale/autoscaler/arith"
)

// REST reads the three metrics APIs through the API server's aggregation
// layer, as the HPA controller does.
type REST struct {
	Resource resourceclient.PodMetricsesGetter
	Custom   customclient.CustomMetricsClient
	External externalclient.ExternalMetricsClient
	// Observe, when set, is told of every read: the API ("resource",
	// "custom", "external"), how long it took and its error.
	Observe func(api string, took time.Duration, err error)
}

func (r *REST) observe(api string, start time.Time, err error) {
	if r.Observe != nil {
		r.Observe(api, time.Since(start), err)
	}
}

var _ Source = (*REST)(nil)

// ResourceMetric implements Source.
func (r *REST) ResourceMetric(ctx context.Context, resource corev1.ResourceName, namespace string, selector labels.Selector, container string) (PodMetricsInfo, time.Time, error) {
	start := time.Now()
	list, err := r.Resource.PodMetricses(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	r.observe("resource", start, err)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("unable to fetch metrics from resource metrics API: %w", err)
	}
	return FromPodMetrics(list.Items, resource, container, false)
}

// PodsMetric implements Source.
func (r *REST) PodsMetric(_ context.Context, metricName, namespace string, selector, metricSelector labels.Selector) (PodMetricsInfo, time.Time, error) {
	start := time.Now()
	list, err := r.Custom.NamespacedMetrics(namespace).GetForObjects(schema.GroupKind{Kind: "Pod"}, selector, metricName, metricSelector)
	r.observe("custom", start, err)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("unable to fetch metrics from custom metrics API: %w", err)
	}
	return FromCustomMetrics(list.Items, false)
}

// ObjectMetric implements Source. A core Namespace is always the
// autoscaler's own: a reference cannot reach out of its namespace.
func (r *REST) ObjectMetric(_ context.Context, metricName, namespace string, ref *autoscalingv2.CrossVersionObjectReference, metricSelector labels.Selector) (int64, time.Time, error) {
	gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
	var v *custommetricsv1beta2.MetricValue
	var err error
	start := time.Now()
	if gvk.Kind == "Namespace" && gvk.Group == "" {
		v, err = r.Custom.RootScopedMetrics().GetForObject(gvk.GroupKind(), namespace, metricName, metricSelector)
	} else {
		v, err = r.Custom.NamespacedMetrics(namespace).GetForObject(gvk.GroupKind(), ref.Name, metricName, metricSelector)
	}
	r.observe("custom", start, err)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("unable to fetch metrics from custom metrics API: %w", err)
	}
	return arith.MilliValue(v.Value, false), v.Timestamp.Time, nil
}

// ExternalMetric implements Source.
func (r *REST) ExternalMetric(_ context.Context, metricName, namespace string, selector labels.Selector) ([]int64, time.Time, error) {
	start := time.Now()
	list, err := r.External.NamespacedMetrics(namespace).List(metricName, selector)
	r.observe("external", start, err)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("unable to fetch metrics from external metrics API: %w", err)
	}
	return FromExternalMetrics(list.Items, false)
}
