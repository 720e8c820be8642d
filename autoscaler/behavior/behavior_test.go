package behavior

import (
	"math"
	"runtime"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// at is a clock standing at t0+d that ticks a nanosecond per reading.
func at(d time.Duration) Clock {
	var n time.Duration
	return func() time.Time { n++; return t0.Add(d + n) }
}

func rules(up, down *autoscalingv2.HPAScalingRules, minR, maxR int32) Rules {
	return Rules{ScaleUp: up, ScaleDown: down, Min: minR, Max: maxR}
}

func policy(sel autoscalingv2.ScalingPolicySelect, window *int32, ps ...autoscalingv2.HPAScalingPolicy) *autoscalingv2.HPAScalingRules {
	return &autoscalingv2.HPAScalingRules{SelectPolicy: &sel, StabilizationWindowSeconds: window, Policies: ps}
}

func pods(v, period int32) autoscalingv2.HPAScalingPolicy {
	return autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PodsScalingPolicy, Value: v, PeriodSeconds: period}
}

func percent(v, period int32) autoscalingv2.HPAScalingPolicy {
	return autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PercentScalingPolicy, Value: v, PeriodSeconds: period}
}

func secs(s int32) *int32 { return &s }

func TestStabilizeWithoutBehavior(t *testing.T) {
	t.Parallel()
	var h History
	h.RecordInitial(6, at(0))
	// Within the 5m window the initial 6 holds a proposal of 2 at 6.
	if got := h.Stabilize(2, 5*time.Minute, at(time.Minute)); got != 6 {
		t.Errorf("at 1m: %d, want 6", got)
	}
	if got := h.Stabilize(4, 5*time.Minute, at(3*time.Minute)); got != 6 {
		t.Errorf("at 3m: %d, want 6", got)
	}
	// At 5m30s the 6 has left the window; 4 (3m) still holds.
	if got := h.Stabilize(2, 5*time.Minute, at(5*time.Minute+30*time.Second)); got != 4 {
		t.Errorf("at 5m30s: %d, want 4", got)
	}
	// The expired slot was reused rather than the list grown.
	if n := len(h.Recommendations); n != 3 {
		t.Errorf("%d recommendations kept, want 3", n)
	}
	// A zero window: the size recorded earlier in the same reconcile does
	// not hold the scale-down back.
	var z History
	clk := at(0)
	z.RecordInitial(6, clk)
	if got := z.Stabilize(2, 0, clk); got != 2 {
		t.Errorf("zero window: %d, want 2", got)
	}
}

func TestStabilizeWithBehavior(t *testing.T) {
	t.Parallel()
	up := policy(autoscalingv2.MaxChangePolicySelect, secs(60), pods(100, 15))
	down := policy(autoscalingv2.MaxChangePolicySelect, secs(120), pods(100, 15))
	r := rules(up, down, 1, 100)
	h := History{Recommendations: []Recommendation{{3, t0}, {10, t0.Add(30 * time.Second)}}}
	// At 50s: scale-up window (60s) holds min(3, 10, 20) = 3 from below.
	l := h.StabilizeWithBehavior(r, 3, 20, 5*time.Minute, at(50*time.Second))
	if l.Replicas != 3 || l.Reason != "ScaleUpStabilized" {
		t.Errorf("scale-up: %+v, want 3 ScaleUpStabilized", l)
	}
	// At 100s the 3 and 10 left the up-window but the down-window (120s)
	// still sees 10 and 20: a proposal of 1 is held at 20.
	l = h.StabilizeWithBehavior(r, 20, 1, 5*time.Minute, at(100*time.Second))
	if l.Replicas != 20 || l.Reason != "ScaleDownStabilized" {
		t.Errorf("scale-down: %+v, want 20 ScaleDownStabilized", l)
	}
	// A scale-down rule without its own window uses the controller's,
	// truncated to whole seconds.
	nilWin := rules(up, policy(autoscalingv2.MaxChangePolicySelect, nil, pods(100, 15)), 1, 100)
	h2 := History{Recommendations: []Recommendation{{9, t0}}}
	if l := h2.StabilizeWithBehavior(nilWin, 9, 2, 90*time.Second+900*time.Millisecond, at(90*time.Second+500*time.Millisecond)); l.Replicas != 2 {
		t.Errorf("window 90.9s at 90.5s: %d, want 2 (the window is 90s)", l.Replicas)
	}
}

func TestLimitByRate(t *testing.T) {
	t.Parallel()
	maxSel, minSel, off := autoscalingv2.MaxChangePolicySelect, autoscalingv2.MinChangePolicySelect, autoscalingv2.DisabledPolicySelect
	up := policy(maxSel, secs(0), pods(4, 60), percent(100, 60))
	down := policy(maxSel, nil, percent(100, 15))
	cases := []struct {
		name          string
		r             Rules
		h             History
		current, want int32
		desired       int32
		wantReason    string
	}{
		// Max of +4 pods and +100%: from 2, max(6, 4) = 6.
		{"max policy", rules(up, down, 1, 30), History{}, 2, 6, 20, "ScaleUpLimit"},
		// Min of the two: min(6, 4) = 4.
		{"min policy", rules(policy(minSel, secs(0), pods(4, 60), percent(100, 60)), down, 1, 30), History{}, 2, 4, 20, "ScaleUpLimit"},
		// 4 were added 30s ago: the period started at 2; max(2+4, 2×2) = 6.
		{"events in period", rules(up, down, 1, 30), History{ScaleUpEvents: []ScaleEvent{{Change: 4, Timestamp: t0.Add(-30 * time.Second)}}}, 6, 6, 20, "ScaleUpLimit"},
		// Events older than the period do not count: from 6, max(10, 12) = 12.
		{"events past period", rules(up, down, 1, 30), History{ScaleUpEvents: []ScaleEvent{{Change: 4, Timestamp: t0.Add(-90 * time.Second)}}}, 6, 12, 20, "ScaleUpLimit"},
		// Max replicas below the rate limit: TooManyReplicas.
		{"max replicas", rules(up, down, 1, 5), History{}, 2, 5, 20, "TooManyReplicas"},
		{"scale-up disabled", rules(policy(off, secs(0)), down, 1, 30), History{}, 2, 2, 20, "ScaleUpLimit"},
		{"scale-down disabled", rules(up, policy(off, nil), 1, 30), History{}, 8, 8, 1, "ScaleDownLimit"},
		// Down by at most 2 pods per minute: 8 → 6.
		{"scale-down pods", rules(up, policy(maxSel, nil, pods(2, 60)), 1, 30), History{}, 8, 6, 1, "ScaleDownLimit"},
		// Percent down rounds down: 9 × 0.5 = 4.5 → 4.
		{"scale-down percent", rules(up, policy(maxSel, nil, percent(50, 60)), 1, 30), History{}, 9, 4, 1, "ScaleDownLimit"},
		{"min replicas", rules(up, down, 3, 30), History{}, 8, 3, 1, "TooFewReplicas"},
		{"within range", rules(up, down, 1, 30), History{}, 8, 7, 7, "DesiredWithinRange"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := tc.h.LimitByRate(tc.r, tc.current, tc.desired, at(0))
			if got.Replicas != tc.want || got.Reason != tc.wantReason {
				t.Errorf("got %d %s, want %d %s", got.Replicas, got.Reason, tc.want, tc.wantReason)
			}
		})
	}
}

func TestClampWithoutBehavior(t *testing.T) {
	t.Parallel()
	cases := []struct {
		current, desired, minR, maxR, want int32
		reason                             string
	}{
		{1, 12, 1, 20, 4, "ScaleUpLimit"},   // max(2×1, 4) = 4
		{4, 12, 1, 20, 8, "ScaleUpLimit"},   // 2×4 = 8
		{4, 12, 1, 6, 6, "TooManyReplicas"}, // max below the cap
		{4, 0, 2, 20, 2, "TooFewReplicas"},
		{4, 7, 1, 20, 7, "DesiredWithinRange"},
	}
	for _, tc := range cases {
		if got := ClampWithoutBehavior(tc.current, tc.desired, tc.minR, tc.maxR, false); got.Replicas != tc.want || got.Reason != tc.reason {
			t.Errorf("Clamp(%d→%d, [%d,%d]) = %d %s, want %d %s", tc.current, tc.desired, tc.minR, tc.maxR, got.Replicas, got.Reason, tc.want, tc.reason)
		}
	}
}

func TestRecordScaleReusesOutdatedSlots(t *testing.T) {
	t.Parallel()
	b := &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp:   policy(autoscalingv2.MaxChangePolicySelect, secs(0), pods(4, 60)),
		ScaleDown: policy(autoscalingv2.MaxChangePolicySelect, nil, percent(100, 15)),
	}
	var h History
	h.RecordScale(b, 2, 6, at(0))
	h.RecordScale(b, 6, 8, at(30*time.Second))
	if len(h.ScaleUpEvents) != 2 {
		t.Fatalf("%d up events, want 2", len(h.ScaleUpEvents))
	}
	// At 2m the first two are older than 60s: the newest replaces the last
	// outdated one, and both stay marked until reused.
	h.RecordScale(b, 8, 9, at(2*time.Minute))
	if len(h.ScaleUpEvents) != 2 || h.ScaleUpEvents[1].Change != 1 || !h.ScaleUpEvents[0].Outdated {
		t.Errorf("events %+v, want the second slot reused and the first outdated", h.ScaleUpEvents)
	}
	h.RecordScale(b, 9, 5, at(3*time.Minute))
	if len(h.ScaleDownEvents) != 1 || h.ScaleDownEvents[0].Change != 4 {
		t.Errorf("down events %+v, want one of 4", h.ScaleDownEvents)
	}
	// Without behavior no events are kept.
	var none History
	none.RecordScale(nil, 1, 5, at(0))
	if len(none.ScaleUpEvents) != 0 {
		t.Errorf("events kept without behavior: %+v", none.ScaleUpEvents)
	}
}

// TestArithmeticDeviations: policy limits and the scale-up cap saturate
// where upstream's int32 arithmetic wraps (UpstreamArithmetic keeps that).
func TestArithmeticDeviations(t *testing.T) {
	t.Parallel()
	maxSel := autoscalingv2.MaxChangePolicySelect
	down := policy(maxSel, nil, percent(100, 15))
	cases := []struct {
		name                   string
		r                      Rules
		current, desired       int32
		want, wantUpstream     int32
		reason, reasonUpstream string
	}{
		// 2 + (2^31-1) wraps negative upstream: the limit falls back to
		// the current size and no scale-up ever happens.
		{"pods value near 2^31", rules(policy(maxSel, secs(0), pods(math.MaxInt32, 60)), down, 1, 20), 2, 10, 10, 2, "DesiredWithinRange", "ScaleUpLimit"},
		// 2^30 × (1 + 100%) = 2^31 does not fit either.
		{"percent over 2^31", rules(policy(maxSel, secs(0), percent(100, 60)), down, 1, math.MaxInt32), 1 << 30, math.MaxInt32, math.MaxInt32, 1 << 30, "DesiredWithinRange", "ScaleUpLimit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var h History
			if got := h.LimitByRate(tc.r, tc.current, tc.desired, at(0)); got.Replicas != tc.want || got.Reason != tc.reason {
				t.Errorf("got %d %s, want %d %s", got.Replicas, got.Reason, tc.want, tc.reason)
			}
			if runtime.GOARCH != "amd64" {
				return
			}
			tc.r.UpstreamArithmetic = true
			if got := h.LimitByRate(tc.r, tc.current, tc.desired, at(0)); got.Replicas != tc.wantUpstream || got.Reason != tc.reasonUpstream {
				t.Errorf("upstream: got %d %s, want %d %s", got.Replicas, got.Reason, tc.wantUpstream, tc.reasonUpstream)
			}
		})
	}
	// Without behavior the cap is max(2×current, 4): above 2^30 replicas
	// 2×current wraps upstream, to a negative count.
	if got := ClampWithoutBehavior(1<<30+1, math.MaxInt32, 1, math.MaxInt32, false); got.Replicas != math.MaxInt32 {
		t.Errorf("cap at 2^30+1: %d, want MaxInt32", got.Replicas)
	}
	if runtime.GOARCH == "amd64" {
		if got := ClampWithoutBehavior(1<<30+1, math.MaxInt32, 1, math.MaxInt32, true); got.Replicas >= 0 {
			t.Errorf("upstream cap at 2^30+1: %d, want upstream's negative count", got.Replicas)
		}
	}
}
