package decision

import (
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/behavior"
	"github.com/metricscale/metricscale/autoscaler/replicas"
)

// TestExplanationNamesTheRule: for each rule that can produce a final
// count, a case where it does, and the explanation names it (and the
// numbers on the way: the proposal, the stabilized and the limited count).
func TestExplanationNamesTheRule(t *testing.T) {
	t.Parallel()
	pods := makePods(4)
	settled := behavior.History{Recommendations: []behavior.Recommendation{{Replicas: 1, Timestamp: now.Add(-time.Hour)}}}
	withBehavior := func(h *autoscalingv2.HorizontalPodAutoscaler, up, down *autoscalingv2.HPAScalingRules) *autoscalingv2.HorizontalPodAutoscaler {
		h.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: up, ScaleDown: down}
		return h
	}
	pods2 := func(v int32, period int32) *autoscalingv2.HPAScalingRules {
		return &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr[int32](0),
			Policies: []autoscalingv2.HPAScalingPolicy{
				{Type: autoscalingv2.PercentScalingPolicy, Value: 10, PeriodSeconds: period},
				{Type: autoscalingv2.PodsScalingPolicy, Value: v, PeriodSeconds: period}}}
	}
	free := &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr[int32](0),
		Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 1000, PeriodSeconds: 15}}}

	cases := []struct {
		name     string
		hpa      *autoscalingv2.HorizontalPodAutoscaler
		src      *source
		pods     podList // when the pods listed differ from those with samples
		scale    Scale
		history  behavior.History
		fallback *v1alpha1.Fallback
		state    *v1alpha1.FallbackStatus
		stz      *v1alpha1.ScaleToZero
		stzState *v1alpha1.ScaleToZeroStatus
		want     Rule
		// wantProposal, wantStabilized, wantDesired: -1 when not checked.
		wantProposal, wantStabilized, wantDesired int32
		wantMetricRule                            replicas.Rule
		wantPolicy                                int
	}{
		{
			// 42 messages for 4 pods at 10 each: ratio 1.05, within 10%.
			name: "tolerance", hpa: hpa(nil, 10, externalMetric("10")), src: &source{external: []int64{42000}, pods: pods},
			scale: Scale{4, 4, "app=web"}, history: settled, want: RuleTolerance,
			wantProposal: 4, wantStabilized: 4, wantDesired: 4, wantMetricRule: replicas.RuleTolerance, wantPolicy: -1,
		},
		{
			name: "metric", hpa: hpa(nil, 10, externalMetric("10")), src: &source{external: []int64{60000}, pods: pods},
			scale: Scale{4, 4, "app=web"}, history: settled, want: RuleMetric,
			wantProposal: 6, wantStabilized: 6, wantDesired: 6, wantMetricRule: replicas.RuleAverage, wantPolicy: -1,
		},
		{
			// Without behavior a scale-up is capped at max(2×4, 4) = 8.
			name: "scale-up limit", hpa: hpa(nil, 50, externalMetric("10")), src: &source{external: []int64{200000}, pods: pods},
			scale: Scale{4, 4, "app=web"}, history: settled, want: RuleScaleUpLimit,
			wantProposal: 20, wantStabilized: 20, wantDesired: 8, wantMetricRule: replicas.RuleAverage, wantPolicy: -1,
		},
		{
			// Percent 10 (5) and Pods 2 (6) per 60s, selectPolicy Max: the
			// Pods policy sets the bound.
			name: "scale-up policy", hpa: withBehavior(hpa(nil, 50, externalMetric("10")), pods2(2, 60), nil),
			src: &source{external: []int64{200000}, pods: pods}, scale: Scale{4, 4, "app=web"}, history: settled,
			want: RuleScaleUpPolicy, wantProposal: 20, wantStabilized: 20, wantDesired: 6, wantMetricRule: replicas.RuleAverage, wantPolicy: 1,
		},
		{
			// Percent 10 (3) and Pods 2 (2) per 60s, selectPolicy Max: the
			// largest change, the Pods policy's bound.
			name: "scale-down policy", hpa: withBehavior(hpa(nil, 50, externalMetric("10")), nil, pods2(2, 60)),
			src: &source{external: []int64{10000}, pods: pods}, scale: Scale{4, 4, "app=web"}, history: settled,
			want: RuleScaleDownPolicy, wantProposal: 1, wantStabilized: 1, wantDesired: 2, wantMetricRule: replicas.RuleAverage, wantPolicy: 1,
		},
		{
			// The first reconcile remembers the size: the 5m window holds 4.
			name: "stabilization window", hpa: hpa(nil, 10, externalMetric("10")), src: &source{external: []int64{10000}, pods: pods},
			scale: Scale{4, 4, "app=web"}, want: RuleStabilization,
			wantProposal: 1, wantStabilized: 4, wantDesired: 4, wantMetricRule: replicas.RuleAverage, wantPolicy: -1,
		},
		{
			name: "max clamp", hpa: withBehavior(hpa(nil, 10, externalMetric("10")), free, free),
			src: &source{external: []int64{300000}, pods: pods}, scale: Scale{4, 4, "app=web"}, history: settled,
			want: RuleMinMax, wantProposal: 30, wantStabilized: 30, wantDesired: 10, wantMetricRule: replicas.RuleAverage, wantPolicy: -1,
		},
		{
			name: "min clamp", hpa: withBehavior(hpa(ptr[int32](3), 10, externalMetric("10")), free, free),
			src: &source{external: []int64{0}, pods: pods}, scale: Scale{4, 4, "app=web"}, history: settled,
			want: RuleMinMax, wantProposal: 0, wantStabilized: 0, wantDesired: 3, wantMetricRule: replicas.RuleAverage, wantPolicy: -1,
		},
		{
			name: "above max", hpa: hpa(nil, 3, externalMetric("10")), src: &source{external: []int64{60000}, pods: pods},
			scale: Scale{4, 4, "app=web"}, history: settled, want: RuleMinMax, wantProposal: -1, wantStabilized: -1, wantDesired: 3,
		},
		{
			name: "scaling disabled at zero", hpa: hpa(nil, 10, externalMetric("10")), src: &source{external: []int64{60000}, pods: pods},
			scale: Scale{0, 0, "app=web"}, want: RuleScalingDisabled, wantProposal: -1, wantStabilized: -1, wantDesired: 0,
		},
		{
			// cpu wants fewer, the failing queue forbids a scale-down.
			name: "metrics failed", hpa: hpa(nil, 10, cpuMetric(50), externalMetric("10")),
			src: &source{cpu: 100, pods: pods, failExternal: true}, scale: Scale{4, 4, "app=web"}, history: settled,
			want: RuleMetricsFailed, wantProposal: -1, wantStabilized: -1, wantDesired: 4,
		},
		{
			// Two of four pods have a sample at 10% of 50%: on a scale-down the
			// missing ones count as 100%, (10+10+100+100)/4 = 55%: 1.1 × 4 → 5
			// is the other way, so the count stays at 4.
			name: "missing pods", hpa: hpa(nil, 10, cpuMetric(50)), src: &source{cpu: 100, pods: pods[:2]}, pods: pods,
			scale: Scale{4, 4, "app=web"}, history: settled, want: RuleMissingPods,
			wantProposal: 4, wantStabilized: 4, wantDesired: 4, wantMetricRule: replicas.RuleRebalancedHold, wantPolicy: -1,
		},
		{
			// The third failed read starts the fallback: 6, within the cap.
			name: "fallback", hpa: hpa(nil, 10, externalMetric("10")), src: &source{pods: pods, failExternal: true},
			scale: Scale{4, 4, "app=web"}, history: settled,
			fallback: &v1alpha1.Fallback{FailureThreshold: 3, Replicas: 6},
			state:    &v1alpha1.FallbackStatus{Metrics: []v1alpha1.MetricFailure{{Index: 0, Name: "External queue", Failures: 2}}},
			want:     RuleFallback, wantProposal: 6, wantStabilized: 6, wantDesired: 6, wantPolicy: -1,
		},
		{
			// 3 messages ask for 2 replicas at 2 each, but none is above the
			// activation value 5: the target stays at zero.
			name: "below activation", hpa: hpa(ptr[int32](0), 10, externalMetric("2")), src: &source{external: []int64{3000}, pods: pods},
			scale: Scale{0, 0, "app=web"}, history: settled, stz: stz(time.Minute, act("queue", "5")),
			want: RuleActivation, wantProposal: 2, wantStabilized: -1, wantDesired: 0, wantPolicy: -1,
		},
		{
			// An empty queue asks for zero, but the last activity was 10s ago
			// and the cooldown is a minute: one replica stays.
			name: "cooldown", hpa: hpa(ptr[int32](0), 10, externalMetric("2")), src: &source{external: []int64{0}, pods: pods[:1]},
			scale: Scale{1, 1, "app=web"}, history: settled, stz: stz(time.Minute, act("queue", "5")),
			stzState: &v1alpha1.ScaleToZeroStatus{LastActiveTime: &metav1.Time{Time: now.Add(-10 * time.Second)}},
			want:     RuleActivation, wantProposal: 0, wantStabilized: 0, wantDesired: 1, wantPolicy: -1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			listed := tc.pods
			if listed == nil {
				listed = tc.src.pods
			}
			in := Input{Autoscaler: tc.hpa, Scale: tc.scale, Pods: listed, Metrics: tc.src, History: tc.history,
				Settings: DefaultSettings(), Now: now, Fallback: tc.fallback, FallbackState: tc.state,
				ScaleToZero: tc.stz, ScaleToZeroState: tc.stzState}
			// The explanation is the same whichever half of the reconcile
			// returns it, and names the rule.
			plan := Decide(t.Context(), in)
			res := plan.Finish(nil)
			e := res.Explain
			if plan.Explain != e {
				t.Errorf("plan and result explain differently: %+v vs %+v", plan.Explain, e)
			}
			if got := e.Rule(res.Metrics); got != tc.want {
				t.Errorf("rule %q, want %q (explanation %+v)", got, tc.want, e)
			}
			if e.Desired != tc.wantDesired || res.Replicas != tc.wantDesired {
				t.Errorf("desired %d, replicas %d; want %d", e.Desired, res.Replicas, tc.wantDesired)
			}
			if tc.wantProposal >= 0 && e.Proposal != tc.wantProposal {
				t.Errorf("proposal %d, want %d", e.Proposal, tc.wantProposal)
			}
			if tc.wantStabilized >= 0 && e.Stabilized != tc.wantStabilized {
				t.Errorf("stabilized %d, want %d", e.Stabilized, tc.wantStabilized)
			}
			if tc.wantMetricRule != replicas.RuleNone {
				if e.Winner < 0 || res.Metrics[e.Winner].Why.Rule != tc.wantMetricRule {
					t.Errorf("winning metric %d rule %v, want %v", e.Winner, res.Metrics, tc.wantMetricRule)
				}
			}
			if tc.wantProposal >= 0 && e.Limit.Policy != tc.wantPolicy {
				t.Errorf("policy index %d, want %d", e.Limit.Policy, tc.wantPolicy)
			}
		})
	}
}
