package convert

import (
	"strconv"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// resourceMeta is what a cpu or memory trigger's metadata says.
type resourceMeta struct {
	Type            string             `keda:"type"` // before metricType
	Value           string             `keda:"value,required"`
	ActivationValue *resource.Quantity `keda:"activationValue"`
	ContainerName   string             `keda:"containerName"`
}

// resourceTrigger converts a cpu or memory trigger to a Resource (or
// ContainerResource) metric.
func (c *soConverter) resourceTrigger(d *meta, t *KEDATrigger) *triggerOut {
	var m resourceMeta
	if !d.decode(&m) {
		return nil
	}
	typ := t.MetricType
	if m.Type != "" {
		if typ != "" {
			d.fail("type", "set metadata.type or metricType, not both")
			return nil
		}
		typ = autoscalingv2.MetricTargetType(m.Type)
	}
	var target autoscalingv2.MetricTarget
	switch typ {
	case autoscalingv2.UtilizationMetricType:
		n, err := strconv.ParseInt(m.Value, 10, 32)
		if err != nil || n <= 0 {
			d.fail("value", "%q: a Utilization target is a whole percentage above 0", m.Value)
			return nil
		}
		u := int32(n)
		target = autoscalingv2.MetricTarget{Type: typ, AverageUtilization: &u}
	case autoscalingv2.AverageValueMetricType:
		q, err := resource.ParseQuantity(m.Value)
		if err != nil || q.Sign() <= 0 {
			d.fail("value", "%q is not a quantity above 0", m.Value)
			return nil
		}
		target = autoscalingv2.MetricTarget{Type: typ, AverageValue: &q}
	case "":
		c.issue(true, d.field+".metricType", "required for a %s trigger: Utilization or AverageValue", t.Type)
		return nil
	default:
		c.issue(true, d.field+".metricType", "%q: a %s trigger takes Utilization or AverageValue", typ, t.Type)
		return nil
	}
	if m.ActivationValue != nil {
		d.warn("activationValue", "not converted: cpu and memory never activate a target from zero")
	}
	res := corev1.ResourceName(t.Type)
	out := &triggerOut{name: t.Type}
	if m.ContainerName != "" {
		out.metric = autoscalingv2.MetricSpec{Type: autoscalingv2.ContainerResourceMetricSourceType, ContainerResource: &autoscalingv2.ContainerResourceMetricSource{Name: res, Container: m.ContainerName, Target: target}}
	} else {
		out.metric = autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: res, Target: target}}
	}
	return out
}
