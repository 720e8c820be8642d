// Package v1alpha1 is the autoscaling.metricscale.dev/v1alpha1 API: the
// MetricAutoscaler, an autoscaling/v2 HorizontalPodAutoscaler with a sync
// period of its own, pausing, dry-run and a history that survives restarts.
//
// +kubebuilder:object:generate=true
// +groupName=autoscaling.metricscale.dev
package v1alpha1
