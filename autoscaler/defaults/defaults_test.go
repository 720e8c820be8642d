package defaults

import (
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestSpec(t *testing.T) {
	t.Parallel()
	var empty autoscalingv2.HorizontalPodAutoscalerSpec
	Spec(&empty)
	if *empty.MinReplicas != 1 {
		t.Errorf("minReplicas %d, want 1", *empty.MinReplicas)
	}
	if len(empty.Metrics) != 1 || empty.Metrics[0].Resource.Name != corev1.ResourceCPU || *empty.Metrics[0].Resource.Target.AverageUtilization != 80 {
		t.Errorf("metrics %+v, want cpu at 80%%", empty.Metrics)
	}
	if empty.Behavior != nil {
		t.Errorf("an absent behavior must stay absent, got %+v", empty.Behavior)
	}

	// A behavior that sets only a scale-down window and a scale-up
	// tolerance is completed around them.
	window := int32(60)
	tol := resource.MustParse("0.05")
	spec := autoscalingv2.HorizontalPodAutoscalerSpec{Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp:   &autoscalingv2.HPAScalingRules{Tolerance: &tol},
		ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: &window},
	}}
	Spec(&spec)
	up, down := spec.Behavior.ScaleUp, spec.Behavior.ScaleDown
	if *up.StabilizationWindowSeconds != 0 || *up.SelectPolicy != autoscalingv2.MaxChangePolicySelect || len(up.Policies) != 2 || up.Tolerance.Cmp(tol) != 0 {
		t.Errorf("scaleUp %+v, want window 0, Max, Pods 4 + Percent 100, tolerance kept", up)
	}
	if *down.StabilizationWindowSeconds != 60 || *down.SelectPolicy != autoscalingv2.MaxChangePolicySelect ||
		len(down.Policies) != 1 || down.Policies[0].Type != autoscalingv2.PercentScalingPolicy || down.Policies[0].Value != 100 {
		t.Errorf("scaleDown %+v, want window 60 kept, Max, Percent 100", down)
	}

	// Without a scale-down section the window stays unset for the
	// controller's flag to fill.
	b := autoscalingv2.HorizontalPodAutoscalerSpec{Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{}}
	Spec(&b)
	if b.Behavior.ScaleDown.StabilizationWindowSeconds != nil {
		t.Errorf("scaleDown window %d, want unset", *b.Behavior.ScaleDown.StabilizationWindowSeconds)
	}
	// Defaulting twice changes nothing.
	again := *b.DeepCopy()
	Spec(&again)
	if len(again.Behavior.ScaleUp.Policies) != 2 {
		t.Errorf("defaulting twice changed the policies: %+v", again.Behavior.ScaleUp.Policies)
	}
}
