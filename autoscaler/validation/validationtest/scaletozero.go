package validationtest

import (
	"fmt"
	"strings"
)

// InvalidScaleToZero is a MetricAutoscaler spec, valid but for its
// scaleToZero (or the bound on metrics it needs), that the CRD and the
// simulator's validation both reject. Field is where the simulator reports
// it; the CRD reports it there or at an enclosing field (a CEL rule on the
// list or the spec).
type InvalidScaleToZero struct {
	Name  string
	Spec  map[string]any
	Field string
}

// ScaleToZeroSpec is a valid spec with scaleToZero, edited by mutate.
func ScaleToZeroSpec(mutate func(spec, scaleToZero map[string]any)) map[string]any {
	stz := map[string]any{
		"cooldownPeriod": "30s",
		"activation": []any{
			map[string]any{"metric": "queue_messages_ready", "value": "5"},
			map[string]any{"metric": "cpu", "value": "50"},
		},
	}
	spec := map[string]any{
		"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "workers"},
		"minReplicas":    0,
		"maxReplicas":    10,
		"metrics": []any{
			map[string]any{"type": "External", "external": map[string]any{
				"metric": map[string]any{"name": "queue_messages_ready"},
				"target": map[string]any{"type": "AverageValue", "averageValue": "30"},
			}},
			map[string]any{"type": "Resource", "resource": map[string]any{
				"name": "cpu", "target": map[string]any{"type": "Utilization", "averageUtilization": 80},
			}},
		},
		"scaleToZero": stz,
	}
	if mutate != nil {
		mutate(spec, stz)
	}
	return spec
}

func activation(metric string, value any) map[string]any {
	a := map[string]any{"metric": metric}
	if value != nil {
		a["value"] = value
	}
	return a
}

// InvalidScaleToZeros are the invalid specs both must reject.
func InvalidScaleToZeros() []InvalidScaleToZero {
	// 17 metrics, each with its activation value.
	var seventeen, manyActivations []any
	for i := range 17 {
		name := fmt.Sprintf("queue_%d", i)
		seventeen = append(seventeen, map[string]any{"type": "External", "external": map[string]any{
			"metric": map[string]any{"name": name},
			"target": map[string]any{"type": "Value", "value": "1"},
		}})
		manyActivations = append(manyActivations, activation(name, "5"))
	}
	manyMetrics := make([]any, 1001)
	for i := range manyMetrics {
		manyMetrics[i] = map[string]any{"type": "External", "external": map[string]any{
			"metric": map[string]any{"name": "queue_messages_ready"},
			"target": map[string]any{"type": "Value", "value": "1"},
		}}
	}
	return []InvalidScaleToZero{
		{"activation naming no metric", ScaleToZeroSpec(func(_, s map[string]any) {
			s["activation"] = []any{activation("queue_messages_ready", "5"), activation("queue_depth", "1")}
		}), "spec.scaleToZero.activation[1].metric"},
		{"activation naming a resource no metric reads", ScaleToZeroSpec(func(_, s map[string]any) {
			s["activation"] = []any{activation("memory", "1Gi")}
		}), "spec.scaleToZero.activation[0].metric"},
		{"two values for one metric", ScaleToZeroSpec(func(_, s map[string]any) {
			s["activation"] = []any{activation("cpu", "50"), activation("cpu", "60")}
		}), "spec.scaleToZero.activation[1].metric"},
		{"empty metric name", ScaleToZeroSpec(func(_, s map[string]any) {
			s["activation"] = []any{activation("", "5")}
		}), "spec.scaleToZero.activation[0].metric"},
		{"metric name too long", ScaleToZeroSpec(func(_, s map[string]any) {
			s["activation"] = []any{activation(strings.Repeat("q", 254), "5")}
		}), "spec.scaleToZero.activation[0].metric"},
		{"no value", ScaleToZeroSpec(func(_, s map[string]any) {
			s["activation"] = []any{activation("queue_messages_ready", nil)}
		}), "spec.scaleToZero.activation[0].value"},
		{"more than 16 activations", ScaleToZeroSpec(func(spec, s map[string]any) {
			spec["metrics"] = seventeen
			s["activation"] = manyActivations
		}), "spec.scaleToZero.activation"},
		{"negative cooldown", ScaleToZeroSpec(func(_, s map[string]any) {
			s["cooldownPeriod"] = "-1s"
		}), "spec.scaleToZero.cooldownPeriod"},
		{"minReplicas 1", ScaleToZeroSpec(func(spec, _ map[string]any) {
			spec["minReplicas"] = 1
		}), "spec.scaleToZero"},
		{"minReplicas unset (1)", ScaleToZeroSpec(func(spec, _ map[string]any) {
			delete(spec, "minReplicas")
		}), "spec.scaleToZero"},
		{"more than 1000 metrics", ScaleToZeroSpec(func(spec, s map[string]any) {
			spec["metrics"] = manyMetrics
			s["activation"] = []any{activation("queue_messages_ready", "5")}
		}), "spec.metrics"},
	}
}

// ValidScaleToZeros are specs both must accept: every kind of metric named,
// no activation list, a zero cooldown, the default cooldown.
func ValidScaleToZeros() map[string]map[string]any {
	return map[string]map[string]any{
		"base": ScaleToZeroSpec(nil),
		"every kind named": ScaleToZeroSpec(func(spec, s map[string]any) {
			spec["metrics"] = append(spec["metrics"].([]any),
				map[string]any{"type": "Pods", "pods": map[string]any{"metric": map[string]any{"name": "rps"}, "target": map[string]any{"type": "AverageValue", "averageValue": "5"}}},
				map[string]any{"type": "Object", "object": map[string]any{"describedObject": map[string]any{"apiVersion": "v1", "kind": "Service", "name": "front"}, "metric": map[string]any{"name": "requests"}, "target": map[string]any{"type": "Value", "value": "10"}}},
				map[string]any{"type": "ContainerResource", "containerResource": map[string]any{"name": "memory", "container": "app", "target": map[string]any{"type": "AverageValue", "averageValue": "100Mi"}}},
			)
			s["activation"] = []any{activation("rps", "0.5"), activation("requests", 3), activation("memory", "50Mi"), activation("queue_messages_ready", "-1")}
		}),
		"no activation list": ScaleToZeroSpec(func(_, s map[string]any) { delete(s, "activation") }),
		"zero cooldown":      ScaleToZeroSpec(func(_, s map[string]any) { s["cooldownPeriod"] = "0s" }),
		"default cooldown":   ScaleToZeroSpec(func(_, s map[string]any) { delete(s, "cooldownPeriod") }),
		"exactly 1000 metrics": ScaleToZeroSpec(func(spec, s map[string]any) {
			ms := make([]any, 1000)
			for i := range ms {
				ms[i] = map[string]any{"type": "External", "external": map[string]any{
					"metric": map[string]any{"name": "queue_messages_ready"},
					"target": map[string]any{"type": "Value", "value": "1"},
				}}
			}
			spec["metrics"] = ms
			s["activation"] = []any{activation("queue_messages_ready", "5")}
		}),
	}
}
