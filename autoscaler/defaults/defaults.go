// Package defaults applies the autoscaling/v2 API defaulting that the API
// server gives a HorizontalPodAutoscaler, so that the decision core sees a
// spec exactly as kube-controller-manager would read it.
package defaults

import (
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
)

// DefaultCPUUtilization is the target of the metric an empty metrics list gets.
const DefaultCPUUtilization int32 = 80

// MinReplicas is spec.minReplicas' default, an HPA's and a
// MetricAutoscaler's (the CRD's +kubebuilder:default).
const MinReplicas int32 = 1

// SyncPeriod is kube-controller-manager's HPA sync period: the default of a
// MetricAutoscaler's spec.syncPeriod (the CRD's +kubebuilder:default) and
// of the controller's --hpa-sync-period.
const SyncPeriod = 15 * time.Second

// ScaleUpRules returns the scale-up rules a behavior gets when it omits them.
func ScaleUpRules() *autoscalingv2.HPAScalingRules {
	window := int32(0)
	sel := autoscalingv2.MaxChangePolicySelect
	return &autoscalingv2.HPAScalingRules{
		StabilizationWindowSeconds: &window,
		SelectPolicy:               &sel,
		Policies: []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15},
			{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
		},
	}
}

// ScaleDownRules returns the scale-down rules a behavior gets when it omits
// them. The window stays unset: the controller's own flag fills it.
func ScaleDownRules() *autoscalingv2.HPAScalingRules {
	sel := autoscalingv2.MaxChangePolicySelect
	return &autoscalingv2.HPAScalingRules{
		SelectPolicy: &sel,
		Policies: []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
		},
	}
}

// Spec defaults spec in place: minReplicas 1, a cpu 80% metric when metrics
// is empty, and a present behavior completed rule by rule.
func Spec(spec *autoscalingv2.HorizontalPodAutoscalerSpec) {
	if spec.MinReplicas == nil {
		one := MinReplicas
		spec.MinReplicas = &one
	}
	if len(spec.Metrics) == 0 {
		target := DefaultCPUUtilization
		spec.Metrics = []autoscalingv2.MetricSpec{{
			Type: autoscalingv2.ResourceMetricSourceType,
			Resource: &autoscalingv2.ResourceMetricSource{
				Name:   corev1.ResourceCPU,
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &target},
			},
		}}
	}
	if spec.Behavior != nil {
		spec.Behavior.ScaleUp = merge(spec.Behavior.ScaleUp, ScaleUpRules())
		spec.Behavior.ScaleDown = merge(spec.Behavior.ScaleDown, ScaleDownRules())
	}
}

// merge fills the fields from leaves unset with those of base.
func merge(from, base *autoscalingv2.HPAScalingRules) *autoscalingv2.HPAScalingRules {
	if from == nil {
		return base
	}
	if from.SelectPolicy != nil {
		base.SelectPolicy = from.SelectPolicy
	}
	if from.StabilizationWindowSeconds != nil {
		base.StabilizationWindowSeconds = from.StabilizationWindowSeconds
	}
	if from.Policies != nil {
		base.Policies = from.Policies
	}
	if from.Tolerance != nil {
		base.Tolerance = from.Tolerance
	}
	return base
}
