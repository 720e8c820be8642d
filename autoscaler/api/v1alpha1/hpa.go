package v1alpha1

import autoscalingv2 "k8s.io/api/autoscaling/v2"

// HPA is the HorizontalPodAutoscaler the decision core sees for a
// MetricAutoscaler: the same spec and status fields, deep-copied.
func (ma *MetricAutoscaler) HPA() *autoscalingv2.HorizontalPodAutoscaler {
	return ma.DeepCopy().HPAView()
}

// HPAView is HPA without the copy: it shares memory with ma, for a reader
// that copies before it writes (decision.Decide does).
func (ma *MetricAutoscaler) HPAView() *autoscalingv2.HorizontalPodAutoscaler {
	c := ma
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: c.ObjectMeta,
		Spec:       c.Spec.HPASpec(),
		Status: autoscalingv2.HorizontalPodAutoscalerStatus{
			LastScaleTime:   c.Status.LastScaleTime,
			CurrentReplicas: c.Status.CurrentReplicas,
			DesiredReplicas: c.Status.DesiredReplicas,
			CurrentMetrics:  c.Status.CurrentMetrics,
			Conditions:      c.Status.Conditions,
		},
	}
}

// HPASpec is the autoscaling/v2 part of the spec (not deep-copied).
func (s *MetricAutoscalerSpec) HPASpec() autoscalingv2.HorizontalPodAutoscalerSpec {
	return autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: s.ScaleTargetRef,
		MinReplicas:    s.MinReplicas,
		MaxReplicas:    s.MaxReplicas,
		Metrics:        s.Metrics,
		Behavior:       s.Behavior,
	}
}
