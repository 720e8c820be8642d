package replay

import (
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"

	"github.com/metricscale/metricscale/autoscaler/record"
	"github.com/metricscale/metricscale/autoscaler/scenario"
)

// TestDisagreementLines: where a replay decides otherwise than the recorded
// reconciles, `autoscaler record` names each step once, with what differs.
func TestDisagreementLines(t *testing.T) {
	t.Parallel()
	recorded := []record.Decision{
		{At: "0s", Replicas: 2, CurrentReplicas: 2, DesiredReplicas: 2},
		{At: "15s", Replicas: 4, Rescaled: true, CurrentReplicas: 2, DesiredReplicas: 4},
		{At: "30s", Replicas: 4, CurrentReplicas: 4, DesiredReplicas: 4, Error: "metrics unavailable"},
	}
	status := func(cur, des int32) autoscalingv2.HorizontalPodAutoscalerStatus {
		return autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: cur, DesiredReplicas: des}
	}
	tests := []struct {
		name     string
		replayed []scenario.StepResult
		want     []string
	}{
		{name: "agrees", replayed: []scenario.StepResult{
			{Replicas: 2, Status: status(2, 2)},
			{Replicas: 4, Rescaled: true, Status: status(2, 4)},
			{Replicas: 4, Status: status(4, 4), Error: "another error"},
		}},
		{name: "differs", replayed: []scenario.StepResult{
			{Replicas: 2, Status: status(2, 2)},
			{Replicas: 3, Rescaled: true, Status: status(2, 3)},
		}, want: []string{
			"2 steps replayed, 3 recorded",
			"step 1 (at 15s): replicas 3 (rescaled true), recorded 4 (rescaled true); current/desired 2/3, recorded 2/4",
		}},
		{name: "error", replayed: []scenario.StepResult{
			{Replicas: 2, Status: status(2, 2), Error: "boom"},
			{Replicas: 4, Rescaled: true, Status: status(2, 4)},
			{Replicas: 4, Status: status(4, 4)},
		}, want: []string{
			`step 0 (at 0s): error "boom", recorded ""`,
			`step 2 (at 30s): error "", recorded "metrics unavailable"`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := scenario.DecisionDisagreements(tt.replayed, Results(recorded))
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tt.want, "\n  "))
			}
		})
	}
}
