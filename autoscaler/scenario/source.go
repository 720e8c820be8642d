package scenario

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	custommetricsv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	externalmetricsv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/metricscale/metricscale/autoscaler/arith"
	"github.com/metricscale/metricscale/autoscaler/metricsource"
)

const (
	defaultPodMetricsWindow    = 30 * time.Second
	defaultCustomMetricsWindow = 60 * time.Second
)

// errUnavailable is what a failing query answers, as an API's 503 would.
var errUnavailable = errors.New("the server is currently unable to handle the request")

// world is what the APIs answer at one step.
type world struct {
	namespace string
	now       time.Time
	pods      []*corev1.Pod // the autoscaler's namespace only
	podM      []PodMetrics
	custom    []CustomMetric
	external  []ExternalMetric
	failures  []Failure
	// upstream converts Quantities as upstream does (wrapping).
	upstream bool
}

func (w *world) fails(api, metric string) bool {
	for _, f := range w.failures {
		if f.API == api && (f.Metric == "" || f.Metric == metric) {
			return true
		}
	}
	return false
}

// List implements decision.PodLister.
func (w *world) List(sel labels.Selector) ([]*corev1.Pod, error) {
	var out []*corev1.Pod
	for _, p := range w.pods {
		if sel.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out, nil
}

// overTheWire is a selector as an API server sees it: sent as a string, so
// that "no selector" (labels.Nothing) arrives as "" and matches everything.
func overTheWire(sel labels.Selector) labels.Selector {
	parsed, err := labels.Parse(sel.String())
	if err != nil {
		return labels.Nothing()
	}
	return parsed
}

func (w *world) at(t *metav1.Time) metav1.Time {
	if t != nil {
		return *t
	}
	return metav1.NewTime(w.now)
}

// selectedPod reports whether a pod of that name exists and matches sel.
func (w *world) selectedPod(name string, sel labels.Selector) bool {
	for _, p := range w.pods {
		if p.Name == name {
			return sel.Matches(labels.Set(p.Labels))
		}
	}
	return false
}

func (w *world) ResourceMetric(_ context.Context, res corev1.ResourceName, _ string, selector labels.Selector, container string) (metricsource.PodMetricsInfo, time.Time, error) {
	if w.fails(APIResourceMetrics, string(res)) {
		return nil, time.Time{}, fmt.Errorf("unable to fetch metrics from resource metrics API: %w", errUnavailable)
	}
	sel := overTheWire(selector)
	seen := map[string]bool{}
	var items []metricsv1beta1.PodMetrics
	for _, m := range w.podM {
		if seen[m.Pod] || !w.selectedPod(m.Pod, sel) {
			continue
		}
		seen[m.Pod] = true
		window := defaultPodMetricsWindow
		if m.Window != nil {
			window = time.Duration(*m.Window)
		}
		item := metricsv1beta1.PodMetrics{
			ObjectMeta: metav1.ObjectMeta{Name: m.Pod, Namespace: w.namespace},
			Timestamp:  w.at(m.Timestamp),
			Window:     metav1.Duration{Duration: window},
		}
		for _, name := range slices.Sorted(maps.Keys(m.Containers)) {
			item.Containers = append(item.Containers, metricsv1beta1.ContainerMetrics{Name: name, Usage: m.Containers[name]})
		}
		items = append(items, item)
	}
	return metricsource.FromPodMetrics(items, res, container, w.upstream)
}

func (w *world) PodsMetric(_ context.Context, metricName, _ string, selector, metricSelector labels.Selector) (metricsource.PodMetricsInfo, time.Time, error) {
	if w.fails(APICustomMetrics, metricName) {
		return nil, time.Time{}, fmt.Errorf("unable to fetch metrics from custom metrics API: %w", errUnavailable)
	}
	sel, msel := overTheWire(selector), overTheWire(metricSelector)
	var items []custommetricsv1beta2.MetricValue
	for _, p := range w.pods {
		if !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		for i := range w.custom {
			m := &w.custom[i]
			if m.Object.Kind != "Pod" || m.Object.Name != p.Name || m.Metric != metricName || !msel.Matches(labels.Set(m.Labels)) {
				continue
			}
			items = append(items, w.metricValue(m, corev1.ObjectReference{Kind: "Pod", Name: p.Name, Namespace: w.namespace}))
			break
		}
	}
	return metricsource.FromCustomMetrics(items, w.upstream)
}

func (w *world) metricValue(m *CustomMetric, obj corev1.ObjectReference) custommetricsv1beta2.MetricValue {
	window := defaultCustomMetricsWindow
	if m.Window != nil {
		window = time.Duration(*m.Window)
	}
	seconds := int64(window / time.Second)
	return custommetricsv1beta2.MetricValue{
		DescribedObject: obj,
		Metric:          custommetricsv1beta2.MetricIdentifier{Name: m.Metric},
		Timestamp:       w.at(m.Timestamp),
		WindowSeconds:   &seconds,
		Value:           m.Value,
	}
}

func (w *world) ObjectMetric(_ context.Context, metricName, namespace string, ref *autoscalingv2.CrossVersionObjectReference, metricSelector labels.Selector) (int64, time.Time, error) {
	if w.fails(APICustomMetrics, metricName) {
		return 0, time.Time{}, fmt.Errorf("unable to fetch metrics from custom metrics API: %w", errUnavailable)
	}
	gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
	name := ref.Name
	if gvk.Kind == "Namespace" && gvk.Group == "" {
		// The controller asks for its own namespace, whatever the name says.
		name = namespace
	}
	msel := overTheWire(metricSelector)
	for i := range w.custom {
		m := &w.custom[i]
		if m.Object.Kind != gvk.Kind || m.Object.Name != name || m.Metric != metricName || !msel.Matches(labels.Set(m.Labels)) {
			continue
		}
		if m.Object.APIVersion != "" {
			gv, err := schema.ParseGroupVersion(m.Object.APIVersion)
			if err != nil || gv.Group != gvk.Group {
				continue
			}
		}
		v := w.metricValue(m, corev1.ObjectReference{Kind: gvk.Kind, Name: name})
		return arith.MilliValue(v.Value, w.upstream), v.Timestamp.Time, nil
	}
	return 0, time.Time{}, fmt.Errorf("unable to fetch metrics from custom metrics API: the server could not find the metric %s for %s %s", metricName, gvk.Kind, name)
}

func (w *world) ExternalMetric(_ context.Context, metricName, _ string, selector labels.Selector) ([]int64, time.Time, error) {
	if w.fails(APIExternalMetrics, metricName) {
		return nil, time.Time{}, fmt.Errorf("unable to fetch metrics from external metrics API: %w", errUnavailable)
	}
	sel := overTheWire(selector)
	var items []externalmetricsv1beta1.ExternalMetricValue
	for i := range w.external {
		m := &w.external[i]
		if m.Metric != metricName || !sel.Matches(labels.Set(m.Labels)) {
			continue
		}
		items = append(items, externalmetricsv1beta1.ExternalMetricValue{
			MetricName: m.Metric, MetricLabels: m.Labels, Timestamp: w.at(m.Timestamp), Value: m.Value,
		})
	}
	return metricsource.FromExternalMetrics(items, w.upstream)
}
