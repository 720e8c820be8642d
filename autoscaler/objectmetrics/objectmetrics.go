// Package objectmetrics exports each MetricAutoscaler's state as gauges,
// as kube-state-metrics does for HPAs: replicas, each spec metric's value
// and target, conditions, fallback, activation and the last scale time.
// The series are made at each scrape from the last status the controller
// wrote for each object (a collector, as kube-state-metrics', not gauge
// vectors: those kept about 14 KiB of label pairs an object), so a metric
// removed from the spec, a condition no longer reported and a deleted
// object have none.
package objectmetrics

import (
	"sync"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
)

const (
	namespace = "metricscale"
	subsystem = "metricautoscaler"
)

// Default is the set the controller writes, registered in the legacy
// registry that the autoscaler's /metrics serves.
var Default = New()

func init() {
	Default.MustRegister(legacyregistry.CustomRegister)
}

// conditionStatuses are the statuses each reported condition has a series
// for, as kube-state-metrics' kube_horizontalpodautoscaler_status_condition.
var conditionStatuses = []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown}

// Gauges is the collector of the per-object gauges.
type Gauges struct {
	metrics.BaseStableCollector

	current, desired, minimum, maximum *metrics.Desc
	value, target                      *metrics.Desc
	condition                          *metrics.Desc
	fallback, active, lastScale        *metrics.Desc

	mu      sync.Mutex
	objects map[objectKey]*object
}

type objectKey struct{ namespace, name string }

// object is what one object's series show; Observe replaces it whole, so
// a scrape reads it without the lock.
type object struct {
	current, desired, minimum, maximum float64
	fallback, active                   float64
	lastScale                          *float64
	values                             []sample // metric_name, metric_type
	targets                            []sample // metric_name, metric_type, target_type
	conditions                         []condition
}

type sample struct {
	labels [3]string
	v      float64
}

type condition struct {
	condition string
	status    corev1.ConditionStatus
}

func gauge(name, help string, labels ...string) *metrics.Desc {
	return metrics.NewDesc(metrics.BuildFQName(namespace, subsystem, name), help,
		append([]string{"namespace", "name"}, labels...), nil, metrics.ALPHA, "")
}

// New makes an unregistered set (tests register it in their own registry).
func New() *Gauges {
	return &Gauges{
		current:   gauge("current_replicas", "The target's replicas when the MetricAutoscaler last read them (status.currentReplicas)."),
		desired:   gauge("desired_replicas", "The replicas the MetricAutoscaler last computed (status.desiredReplicas)."),
		minimum:   gauge("min_replicas", "spec.minReplicas (1 when unset)."),
		maximum:   gauge("max_replicas", "spec.maxReplicas."),
		value:     gauge("metric_value", "Each spec metric's last read value, in the metric's units (the utilization percent for Utilization targets, the average per pod for AverageValue ones); absent while it cannot be read.", "metric_name", "metric_type"),
		target:    gauge("metric_target", "Each spec metric's target, by target type (Value, AverageValue, Utilization).", "metric_name", "metric_type", "target_type"),
		condition: gauge("condition", "1 for each status condition's current status (True, False, Unknown), 0 for the others.", "condition", "status"),
		fallback:  gauge("fallback_active", "1 while the fallback size is in force (status.fallback.active), else 0."),
		active:    gauge("active", "0 while activation holds the target at zero replicas (status.scaleToZero.active false), else 1."),
		lastScale: gauge("last_scale_time_seconds", "When the target was last rescaled, in Unix seconds (status.lastScaleTime); absent until it has been."),
		objects:   map[objectKey]*object{},
	}
}

func (g *Gauges) all() []*metrics.Desc {
	return []*metrics.Desc{g.current, g.desired, g.minimum, g.maximum, g.value, g.target, g.condition, g.fallback, g.active, g.lastScale}
}

// MustRegister registers the collector with register (a registry's
// CustomRegister or legacyregistry.CustomRegister), panicking on its error.
func (g *Gauges) MustRegister(register func(metrics.StableCollector) error) {
	if err := register(g); err != nil {
		panic(err)
	}
}

// DescribeWithStability implements metrics.StableCollector.
func (g *Gauges) DescribeWithStability(ch chan<- *metrics.Desc) {
	for _, d := range g.all() {
		ch <- d
	}
}

// CollectWithStability implements metrics.StableCollector.
func (g *Gauges) CollectWithStability(ch chan<- metrics.Metric) {
	g.mu.Lock()
	keys := make([]objectKey, 0, len(g.objects))
	objs := make([]*object, 0, len(g.objects))
	for k, o := range g.objects {
		keys, objs = append(keys, k), append(objs, o)
	}
	g.mu.Unlock()
	// The label values of one series; the metric made from them copies them.
	lv := make([]string, 5)
	for i, o := range objs {
		lv[0], lv[1] = keys[i].namespace, keys[i].name
		emit := func(d *metrics.Desc, v float64, labels ...string) {
			n := copy(lv[2:], labels)
			ch <- metrics.NewLazyConstMetric(d, metrics.GaugeValue, v, lv[:2+n]...)
		}
		emit(g.current, o.current)
		emit(g.desired, o.desired)
		emit(g.minimum, o.minimum)
		emit(g.maximum, o.maximum)
		for _, s := range o.targets {
			emit(g.target, s.v, s.labels[:]...)
		}
		for _, s := range o.values {
			emit(g.value, s.v, s.labels[:2]...)
		}
		for _, c := range o.conditions {
			for _, s := range conditionStatuses {
				v := 0.0
				if c.status == s {
					v = 1
				}
				emit(g.condition, v, c.condition, string(s))
			}
		}
		emit(g.fallback, o.fallback)
		emit(g.active, o.active)
		if o.lastScale != nil {
			emit(g.lastScale, *o.lastScale)
		}
	}
}

// Observe sets ma's series from status, the status the controller writes
// for it. present is called under the lock that Forget takes: a reconcile
// that ends after the object's deletion (present false) adds no series back.
func (g *Gauges) Observe(ma *v1alpha1.MetricAutoscaler, status *v1alpha1.MetricAutoscalerStatus, present func() bool) {
	o := &object{
		current: float64(status.CurrentReplicas),
		desired: float64(status.DesiredReplicas),
		minimum: 1,
		maximum: float64(ma.Spec.MaxReplicas),
		// Without spec.scaleToZero there is no activation state: the
		// object is never held at zero by it.
		fallback: boolValue(status.Fallback != nil && status.Fallback.Active),
		active:   boolValue(status.ScaleToZero == nil || status.ScaleToZero.Active),
	}
	if ma.Spec.MinReplicas != nil {
		o.minimum = float64(*ma.Spec.MinReplicas)
	}
	for i := range ma.Spec.Metrics {
		spec := &ma.Spec.Metrics[i]
		metricName, target, ok := specTarget(spec)
		if !ok {
			continue
		}
		metricType := string(spec.Type)
		// Two spec metrics of one name and type share a series: the first
		// one's (the labels are the ones the brief fixes, without an index).
		tk := [3]string{metricName, metricType, string(target.Type)}
		if !has(o.targets, tk) {
			if v, ok := targetValue(target); ok {
				o.targets = append(o.targets, sample{tk, v})
			}
		}
		vk := [3]string{metricName, metricType}
		if has(o.values, vk) {
			continue
		}
		// status.currentMetrics is in spec order, an empty entry for a
		// metric that could not be read.
		if i >= len(status.CurrentMetrics) || status.CurrentMetrics[i].Type != spec.Type {
			continue
		}
		if v, ok := currentValue(&status.CurrentMetrics[i], target.Type); ok {
			o.values = append(o.values, sample{vk, v})
		}
	}
	for _, c := range status.Conditions {
		if !hasCondition(o.conditions, string(c.Type)) {
			o.conditions = append(o.conditions, condition{string(c.Type), c.Status})
		}
	}
	if status.LastScaleTime != nil && !status.LastScaleTime.IsZero() {
		v := float64(status.LastScaleTime.Unix())
		o.lastScale = &v
	}

	g.mu.Lock()
	defer g.mu.Unlock()
	if present != nil && !present() {
		return
	}
	g.objects[objectKey{ma.Namespace, ma.Name}] = o
}

// Forget deletes every series of the object ns/name.
func (g *Gauges) Forget(ns, name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.objects, objectKey{ns, name})
}

func has(samples []sample, labels [3]string) bool {
	for _, s := range samples {
		if s.labels == labels {
			return true
		}
	}
	return false
}

func hasCondition(cs []condition, t string) bool {
	for _, c := range cs {
		if c.condition == t {
			return true
		}
	}
	return false
}

// specTarget returns a spec metric's name (the resource's for Resource and
// ContainerResource metrics, as activation names them) and target.
func specTarget(m *autoscalingv2.MetricSpec) (string, *autoscalingv2.MetricTarget, bool) {
	switch {
	case m.Type == autoscalingv2.ExternalMetricSourceType && m.External != nil:
		return m.External.Metric.Name, &m.External.Target, true
	case m.Type == autoscalingv2.ObjectMetricSourceType && m.Object != nil:
		return m.Object.Metric.Name, &m.Object.Target, true
	case m.Type == autoscalingv2.PodsMetricSourceType && m.Pods != nil:
		return m.Pods.Metric.Name, &m.Pods.Target, true
	case m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil:
		return string(m.Resource.Name), &m.Resource.Target, true
	case m.Type == autoscalingv2.ContainerResourceMetricSourceType && m.ContainerResource != nil:
		return string(m.ContainerResource.Name), &m.ContainerResource.Target, true
	}
	return "", nil, false
}

func targetValue(t *autoscalingv2.MetricTarget) (float64, bool) {
	switch t.Type {
	case autoscalingv2.ValueMetricType:
		return quantity(t.Value)
	case autoscalingv2.AverageValueMetricType:
		return quantity(t.AverageValue)
	case autoscalingv2.UtilizationMetricType:
		if t.AverageUtilization != nil {
			return float64(*t.AverageUtilization), true
		}
	}
	return 0, false
}

// currentValue is the reading comparable with a target of type tt.
func currentValue(s *autoscalingv2.MetricStatus, tt autoscalingv2.MetricTargetType) (float64, bool) {
	var v *autoscalingv2.MetricValueStatus
	switch {
	case s.External != nil:
		v = &s.External.Current
	case s.Object != nil:
		v = &s.Object.Current
	case s.Pods != nil:
		v = &s.Pods.Current
	case s.Resource != nil:
		v = &s.Resource.Current
	case s.ContainerResource != nil:
		v = &s.ContainerResource.Current
	default:
		return 0, false
	}
	switch tt {
	case autoscalingv2.ValueMetricType:
		return quantity(v.Value)
	case autoscalingv2.AverageValueMetricType:
		return quantity(v.AverageValue)
	case autoscalingv2.UtilizationMetricType:
		if v.AverageUtilization != nil {
			return float64(*v.AverageUtilization), true
		}
	}
	return 0, false
}

func quantity(q *resource.Quantity) (float64, bool) {
	if q == nil {
		return 0, false
	}
	return q.AsApproximateFloat64(), true
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
