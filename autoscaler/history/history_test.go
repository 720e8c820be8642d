package history

import (
	"math/rand/v2"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"

	"github.com/metricscale/metricscale/autoscaler/behavior"
)

// TestToStatusKeepsWhatTheDefaultedSpecUses: a behavior that gives only one
// direction still has the other direction's default rules (scale-up: Pods 4
// and Percent 100 per 15s; scale-down: the controller's 5m window), so the
// saved history keeps what those rules read after a restart.
func TestToStatusKeepsWhatTheDefaultedSpecUses(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	zero, period := int32(0), int32(60)
	h := behavior.History{
		Recommendations: []behavior.Recommendation{{Replicas: 9, Timestamp: now.Add(-2 * time.Minute)}, {Replicas: 3, Timestamp: now.Add(-time.Second)}},
		ScaleUpEvents:   []behavior.ScaleEvent{{Change: 4, Timestamp: now.Add(-10 * time.Second)}},
		ScaleDownEvents: []behavior.ScaleEvent{{Change: 1, Timestamp: now.Add(-30 * time.Second)}},
	}
	cases := []struct {
		name             string
		b                *autoscalingv2.HorizontalPodAutoscalerBehavior
		wantRecs, wantUp int
		wantDown         int
	}{
		{
			// Only scaleDown: the default scale-up policies (15s) keep the
			// scale-up event of 10s ago.
			name: "scaleDown only", b: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{
				StabilizationWindowSeconds: &zero, Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: period}}}},
			wantRecs: 1, wantUp: 1, wantDown: 1,
		},
		{
			// Only scaleUp: the scale-down rules take the controller's 5m
			// window, which still holds the 9 of 2m ago, and the default
			// Percent 100 per 15s, past which the event of 30s ago is.
			name: "scaleUp only", b: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: &autoscalingv2.HPAScalingRules{
				StabilizationWindowSeconds: &zero, Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: period}}}},
			wantRecs: 2, wantUp: 1, wantDown: 0,
		},
		{
			// No behavior: the 5m window, and no policy events at all.
			name: "no behavior", wantRecs: 2, wantUp: 0, wantDown: 0,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec := &autoscalingv2.HorizontalPodAutoscalerSpec{Behavior: tc.b}
			before := spec.DeepCopy()
			got := ToStatus(h, spec, 5*time.Minute, now)
			if len(got.Recommendations) != tc.wantRecs || len(got.ScaleUpEvents) != tc.wantUp || len(got.ScaleDownEvents) != tc.wantDown {
				t.Errorf("kept %d recommendations, %d up and %d down events; want %d, %d, %d",
					len(got.Recommendations), len(got.ScaleUpEvents), len(got.ScaleDownEvents), tc.wantRecs, tc.wantUp, tc.wantDown)
			}
			if (before.Behavior == nil) != (spec.Behavior == nil) || (before.Behavior != nil && (before.Behavior.ScaleUp == nil) != (spec.Behavior.ScaleUp == nil)) {
				t.Errorf("ToStatus changed the spec it was given")
			}
		})
	}
}

func TestToStatusKeepsEventsWithinPolicyPeriods(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	window := int32(60)
	h := behavior.History{
		Recommendations: []behavior.Recommendation{{Replicas: 4, Timestamp: now.Add(-10 * time.Second)}},
		ScaleUpEvents:   []behavior.ScaleEvent{{Change: 2, Timestamp: now.Add(-10 * time.Second)}, {Change: 1, Timestamp: now.Add(-20 * time.Second)}},
		ScaleDownEvents: []behavior.ScaleEvent{{Change: 1, Timestamp: now.Add(-5 * time.Second)}},
	}
	for _, tc := range []struct {
		name     string
		behavior *autoscalingv2.HorizontalPodAutoscalerBehavior
		up, down int
	}{
		// No behavior: the core uses no events, so none are kept.
		{name: "no behavior", behavior: nil, up: 0, down: 0},
		// An omitted scaleUp decides with the default policies (15 s periods):
		// the event 10 s old still limits the next scale-up, so it is kept.
		{name: "scaleUp omitted", behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: &window},
		}, up: 1, down: 1},
		{name: "scaleDown omitted", behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleUp: &autoscalingv2.HPAScalingRules{Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: 30}}},
		}, up: 2, down: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec := &autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 10, Behavior: tc.behavior}
			got := ToStatus(h, spec, 5*time.Minute, now)
			if len(got.ScaleUpEvents) != tc.up || len(got.ScaleDownEvents) != tc.down {
				t.Errorf("kept %d scale-up and %d scale-down events, want %d and %d", len(got.ScaleUpEvents), len(got.ScaleDownEvents), tc.up, tc.down)
			}
			if len(got.Recommendations) != 1 {
				t.Errorf("kept %d recommendations, want 1", len(got.Recommendations))
			}
			if tc.behavior != nil && tc.behavior.ScaleUp == nil && spec.Behavior.ScaleUp != nil {
				t.Error("ToStatus defaulted the caller's spec in place")
			}
		})
	}
}

// TestToStatusNewestOfEachSize: the status keeps, of the recommendations
// within the window, the newest of each size; stabilizing on the history
// read back from it gives what stabilizing on the whole history gives, for
// any windows up to the saved one.
func TestToStatusNewestOfEachSize(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return now.Add(time.Duration(s) * time.Second) }
	h := behavior.History{Recommendations: []behavior.Recommendation{
		{Replicas: 3, Timestamp: at(-290)}, {Replicas: 5, Timestamp: at(-200)}, {Replicas: 3, Timestamp: at(-100)},
		{Replicas: 3, Timestamp: at(-15)}, {Replicas: 7, Timestamp: at(-400)},
	}}
	got := ToStatus(h, &autoscalingv2.HorizontalPodAutoscalerSpec{}, 5*time.Minute, now).Recommendations
	if len(got) != 2 || got[0].Replicas != 3 || !got[0].Time.Time.Equal(at(-15)) || got[1].Replicas != 5 || !got[1].Time.Time.Equal(at(-200)) {
		t.Fatalf("recommendations %v; want 3 at -15s and 5 at -200s", got)
	}

	rng := rand.New(rand.NewPCG(29, 1))
	for i := range 2000 {
		full := behavior.History{}
		for range rng.IntN(25) {
			full.Recommendations = append(full.Recommendations, behavior.Recommendation{
				Replicas: int32(1 + rng.IntN(4)), Timestamp: now.Add(-time.Duration(rng.IntN(400)) * time.Second)})
		}
		up, down := int32(rng.IntN(300)), int32(rng.IntN(300))
		b := &autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleUp:   &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: &up},
			ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: &down},
		}
		saved := FromStatus(ToStatus(full, &autoscalingv2.HorizontalPodAutoscalerSpec{Behavior: b}, 5*time.Minute, now))
		current, desired := int32(1+rng.IntN(4)), int32(1+rng.IntN(4))
		clock := func() time.Time { return now }
		rules := behavior.Rules{ScaleUp: b.ScaleUp, ScaleDown: b.ScaleDown, Min: 1, Max: 10}
		a, c := full.DeepCopy(), saved.DeepCopy()
		if x, y := a.StabilizeWithBehavior(rules, current, desired, 5*time.Minute, clock), c.StabilizeWithBehavior(rules, current, desired, 5*time.Minute, clock); x.Replicas != y.Replicas {
			t.Fatalf("case %d: with behavior, the whole history gives %d, the saved one %d (%v / %v)", i, x.Replicas, y.Replicas, full.Recommendations, saved.Recommendations)
		}
		saved = FromStatus(ToStatus(full, &autoscalingv2.HorizontalPodAutoscalerSpec{}, 5*time.Minute, now))
		a, c = full.DeepCopy(), saved.DeepCopy()
		if x, y := a.Stabilize(desired, 5*time.Minute, clock), c.Stabilize(desired, 5*time.Minute, clock); x != y {
			t.Fatalf("case %d: without behavior, the whole history gives %d, the saved one %d", i, x, y)
		}
	}
}
