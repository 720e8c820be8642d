// Package objectmetrics exports each MetricAutoscaler's state as gauges,
// as kube-state-metrics does for HPAs: replicas, each spec metric's value
// and target, conditions, fallback, activation and the last scale time.
// The series are set from the status the controller writes and are bounded
// by the objects and their spec metrics: a metric removed from the spec, a
// condition no longer reported and a deleted object lose theirs.
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
	Default.MustRegister(legacyregistry.Register)
}

// conditionStatuses are the statuses each reported condition has a series
// for, as kube-state-metrics' kube_horizontalpodautoscaler_status_condition.
var conditionStatuses = []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown}

// Gauges holds the per-object gauges and which series each object has.
type Gauges struct {
	current, desired, minimum, maximum *metrics.GaugeVec
	value, target                      *metrics.GaugeVec
	condition                          *metrics.GaugeVec
	fallback, active, lastScale        *metrics.GaugeVec

	mu      sync.Mutex
	objects map[objectKey]*series
}

type objectKey struct{ namespace, name string }

// series are the label values beyond namespace and name one object has.
type series struct {
	values     map[[2]string]bool // metric_name, metric_type
	targets    map[[3]string]bool // metric_name, metric_type, target_type
	conditions map[string]bool
	lastScale  bool
}

func gauge(name, help string, labels ...string) *metrics.GaugeVec {
	return metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      namespace,
		Subsystem:      subsystem,
		Name:           name,
		Help:           help,
		StabilityLevel: metrics.ALPHA,
	}, append([]string{"namespace", "name"}, labels...))
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
		objects:   map[objectKey]*series{},
	}
}

func (g *Gauges) all() []*metrics.GaugeVec {
	return []*metrics.GaugeVec{g.current, g.desired, g.minimum, g.maximum, g.value, g.target, g.condition, g.fallback, g.active, g.lastScale}
}

// MustRegister registers every gauge with register (a registry's
// MustRegister or legacyregistry.Register, whose error it panics on).
func (g *Gauges) MustRegister(register func(metrics.Registerable) error) {
	for _, v := range g.all() {
		if err := register(v); err != nil {
			panic(err)
		}
	}
}

// Observe sets ma's series from status, the status the controller writes
// for it. present is called under the lock that Forget takes: a reconcile
// that ends after the object's deletion (present false) adds no series back.
func (g *Gauges) Observe(ma *v1alpha1.MetricAutoscaler, status *v1alpha1.MetricAutoscalerStatus, present func() bool) {
	ns, name := ma.Namespace, ma.Name
	g.mu.Lock()
	defer g.mu.Unlock()
	if present != nil && !present() {
		return
	}
	key := objectKey{ns, name}
	old := g.objects[key]
	cur := &series{values: map[[2]string]bool{}, targets: map[[3]string]bool{}, conditions: map[string]bool{}}
	g.objects[key] = cur

	g.current.WithLabelValues(ns, name).Set(float64(status.CurrentReplicas))
	g.desired.WithLabelValues(ns, name).Set(float64(status.DesiredReplicas))
	minimum := int32(1)
	if ma.Spec.MinReplicas != nil {
		minimum = *ma.Spec.MinReplicas
	}
	g.minimum.WithLabelValues(ns, name).Set(float64(minimum))
	g.maximum.WithLabelValues(ns, name).Set(float64(ma.Spec.MaxReplicas))

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
		if !cur.targets[tk] {
			if v, ok := targetValue(target); ok {
				cur.targets[tk] = true
				g.target.WithLabelValues(ns, name, tk[0], tk[1], tk[2]).Set(v)
			}
		}
		vk := [2]string{metricName, metricType}
		if cur.values[vk] {
			continue
		}
		// status.currentMetrics is in spec order, an empty entry for a
		// metric that could not be read.
		if i >= len(status.CurrentMetrics) || status.CurrentMetrics[i].Type != spec.Type {
			continue
		}
		if v, ok := currentValue(&status.CurrentMetrics[i], target.Type); ok {
			cur.values[vk] = true
			g.value.WithLabelValues(ns, name, vk[0], vk[1]).Set(v)
		}
	}

	for _, c := range status.Conditions {
		t := string(c.Type)
		if cur.conditions[t] {
			continue
		}
		cur.conditions[t] = true
		for _, s := range conditionStatuses {
			v := 0.0
			if c.Status == s {
				v = 1
			}
			g.condition.WithLabelValues(ns, name, t, string(s)).Set(v)
		}
	}

	g.fallback.WithLabelValues(ns, name).Set(boolValue(status.Fallback != nil && status.Fallback.Active))
	// Without spec.scaleToZero there is no activation state: the object is
	// never held at zero by it.
	g.active.WithLabelValues(ns, name).Set(boolValue(status.ScaleToZero == nil || status.ScaleToZero.Active))
	if status.LastScaleTime != nil && !status.LastScaleTime.IsZero() {
		cur.lastScale = true
		g.lastScale.WithLabelValues(ns, name).Set(float64(status.LastScaleTime.Unix()))
	}

	if old != nil {
		g.drop(ns, name, old, cur)
	}
}

// Forget deletes every series of the object ns/name.
func (g *Gauges) Forget(ns, name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	key := objectKey{ns, name}
	old, ok := g.objects[key]
	if !ok {
		return
	}
	delete(g.objects, key)
	for _, v := range []*metrics.GaugeVec{g.current, g.desired, g.minimum, g.maximum, g.fallback, g.active} {
		v.DeleteLabelValues(ns, name)
	}
	g.drop(ns, name, old, &series{})
}

// drop deletes the series old has and cur does not.
func (g *Gauges) drop(ns, name string, old, cur *series) {
	for k := range old.values {
		if !cur.values[k] {
			g.value.DeleteLabelValues(ns, name, k[0], k[1])
		}
	}
	for k := range old.targets {
		if !cur.targets[k] {
			g.target.DeleteLabelValues(ns, name, k[0], k[1], k[2])
		}
	}
	for t := range old.conditions {
		if !cur.conditions[t] {
			for _, s := range conditionStatuses {
				g.condition.DeleteLabelValues(ns, name, t, string(s))
			}
		}
	}
	if old.lastScale && !cur.lastScale {
		g.lastScale.DeleteLabelValues(ns, name)
	}
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
