package convert_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/behavior"
	"github.com/metricscale/metricscale/autoscaler/convert"
	"github.com/metricscale/metricscale/autoscaler/defaults"
	"github.com/metricscale/metricscale/autoscaler/history"
)

var t0 = time.Date(2026, 1, 10, 9, 0, 0, 0, time.UTC)

func rescaleEvent(size int, first, last time.Duration, count int32) corev1.Event {
	return corev1.Event{
		Reason:         "SuccessfulRescale",
		Message:        "New size: " + strconv.Itoa(size) + "; reason: External metric queue_depth above target",
		FirstTimestamp: metav1.NewTime(t0.Add(first)),
		LastTimestamp:  metav1.NewTime(t0.Add(last)),
		Count:          count,
	}
}

func TestRescalesFromEvents(t *testing.T) {
	t.Parallel()
	events := []corev1.Event{
		rescaleEvent(6, 50*time.Second, 50*time.Second, 1),
		rescaleEvent(4, 10*time.Second, 10*time.Second, 1),
		{Reason: "FailedGetExternalMetric", Message: "New size: 9; reason: not a rescale", LastTimestamp: metav1.NewTime(t0)},
		rescaleEvent(8, 20*time.Second, 40*time.Second, 3), // folded: a third occurrence is lost in between
	}
	got := convert.RescalesFromEvents(events)
	want := []convert.Rescale{
		{Time: t0.Add(10 * time.Second), Replicas: 4},
		{Time: t0.Add(20 * time.Second), Replicas: 8},
		{Time: t0.Add(40 * time.Second), Replicas: 8, Uncertain: true},
		{Time: t0.Add(50 * time.Second), Replicas: 6},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if !got[i].Time.Equal(want[i].Time) || got[i].Replicas != want[i].Replicas || got[i].Uncertain != want[i].Uncertain {
			t.Errorf("[%d] got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func behaviorSpec(upPods, upPeriod, downPods, downPeriod int32) v1alpha1.MetricAutoscalerSpec {
	up := autoscalingv2.MaxChangePolicySelect
	return v1alpha1.MetricAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "w"},
		MaxReplicas:    20,
		Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
			ScaleUp:   &autoscalingv2.HPAScalingRules{SelectPolicy: &up, StabilizationWindowSeconds: ptr.To[int32](0), Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: upPods, PeriodSeconds: upPeriod}}},
			ScaleDown: &autoscalingv2.HPAScalingRules{SelectPolicy: &up, StabilizationWindowSeconds: ptr.To[int32](60), Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: downPods, PeriodSeconds: downPeriod}}},
		},
	}
}

func TestStartingStatus(t *testing.T) {
	t.Parallel()
	now := t0.Add(2 * time.Minute)
	last := metav1.NewTime(t0.Add(110 * time.Second))
	hpa := &autoscalingv2.HorizontalPodAutoscaler{Status: autoscalingv2.HorizontalPodAutoscalerStatus{
		LastScaleTime: &last, CurrentReplicas: 6, DesiredReplicas: 6,
		Conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.ScaledToZero, Status: corev1.ConditionFalse, Reason: "ScaledToZeroDisabled"}},
	}}
	rescales := []convert.Rescale{
		{Time: t0, Replicas: 2},                                         // before every period
		{Time: t0.Add(30 * time.Second), Replicas: 4},                   // +2, outside the 60s up period (age 90s)
		{Time: t0.Add(70 * time.Second), Replicas: 7},                   // +3, within
		{Time: t0.Add(90 * time.Second), Replicas: 5},                   // -2, within the 120s down period
		{Time: t0.Add(100 * time.Second), Replicas: 8, Uncertain: true}, // size before unknown: left out
		{Time: t0.Add(110 * time.Second), Replicas: 6},                  // -2
	}
	tests := []struct {
		name      string
		spec      v1alpha1.MetricAutoscalerSpec
		seed      convert.Seed
		wantUp    []int32
		wantDown  []int32
		wantNotes []string
	}{
		{name: "behavior: events within each direction's period", spec: behaviorSpec(4, 60, 2, 120),
			seed:   convert.Seed{HPA: hpa, Replicas: 6, Rescales: rescales, RescalesRead: true, Now: now},
			wantUp: []int32{3}, wantDown: []int32{2, 2}, wantNotes: []string{"rescale to 8"}},
		{name: "the oldest rescale's size before is unknown", spec: behaviorSpec(4, 300, 2, 300),
			seed:   convert.Seed{HPA: hpa, Replicas: 6, Rescales: rescales, RescalesRead: true, Now: now},
			wantUp: []int32{2, 3}, wantDown: []int32{2, 2}, wantNotes: []string{"rescale to 2", "rescale to 8"}},
		{name: "no behavior: no events kept", spec: v1alpha1.MetricAutoscalerSpec{MaxReplicas: 9},
			seed: convert.Seed{HPA: hpa, Replicas: 6, Rescales: rescales, RescalesRead: true, Now: now}},
		{name: "events unreadable, last rescale within a period", spec: behaviorSpec(4, 60, 2, 120),
			seed:      convert.Seed{HPA: hpa, Replicas: 6, Now: now},
			wantNotes: []string{"could not be read"}},
		{name: "events unreadable, last rescale long ago", spec: behaviorSpec(4, 60, 2, 120),
			seed: convert.Seed{HPA: hpa, Replicas: 6, Now: now.Add(time.Hour)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st, notes := convert.StartingStatus(tt.spec, tt.seed)
			if st.CurrentReplicas != 6 || st.DesiredReplicas != 6 || !st.LastScaleTime.Equal(&last) || len(st.Conditions) != 1 || st.Conditions[0].Type != autoscalingv2.ScaledToZero {
				t.Errorf("status %+v: want the HPA's status carried over", st)
			}
			if r := st.History.Recommendations; len(r) != 1 || r[0].Replicas != 6 || !r[0].Time.Time.Equal(tt.seed.Now) {
				t.Errorf("recommendations %+v: want the current size, now", r)
			}
			changes := func(evs []v1alpha1.ScaleEvent) []int32 {
				var out []int32
				for _, e := range evs {
					out = append(out, e.Change)
				}
				return out
			}
			if got := changes(st.History.ScaleUpEvents); !equal(got, tt.wantUp) {
				t.Errorf("scale-up events %v, want %v", got, tt.wantUp)
			}
			if got := changes(st.History.ScaleDownEvents); !equal(got, tt.wantDown) {
				t.Errorf("scale-down events %v, want %v", got, tt.wantDown)
			}
			if len(notes) != len(tt.wantNotes) {
				t.Fatalf("notes %q, want %d containing %q", notes, len(tt.wantNotes), tt.wantNotes)
			}
			for i, w := range tt.wantNotes {
				if !strings.Contains(notes[i], w) {
					t.Errorf("note %q does not say %q", notes[i], w)
				}
			}
		})
	}
}

func equal(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSeededHistoryHoldsTheHPAsCourse runs the decision core's own rules
// on the seeded history: what the HPA would have done next, the
// MetricAutoscaler does, where an empty history would jump.
func TestSeededHistoryHoldsTheHPAsCourse(t *testing.T) {
	t.Parallel()
	now := t0.Add(time.Minute)
	last := metav1.NewTime(t0.Add(50 * time.Second))
	hpa := &autoscalingv2.HorizontalPodAutoscaler{Status: autoscalingv2.HorizontalPodAutoscalerStatus{LastScaleTime: &last, CurrentReplicas: 6, DesiredReplicas: 6}}
	spec := behaviorSpec(2, 60, 1, 60) // up 2 pods per 60s, down 1 pod per 60s, down window 60s
	rescales := []convert.Rescale{{Time: t0, Replicas: 4}, {Time: t0.Add(50 * time.Second), Replicas: 6}}
	st, _ := convert.StartingStatus(spec, convert.Seed{HPA: hpa, Replicas: 6, Rescales: rescales, RescalesRead: true, Now: now})

	hpaSpec := spec.HPASpec()
	defaults.Spec(&hpaSpec)
	rules := behavior.Rules{ScaleUp: hpaSpec.Behavior.ScaleUp, ScaleDown: hpaSpec.Behavior.ScaleDown, Min: 1, Max: 20}
	clock := func() time.Time { return now.Add(time.Second) }
	for _, tc := range []struct {
		name     string
		hist     behavior.History
		proposal int32
		want     int32
	}{
		// the HPA used its 2-pod budget 10s before: no more scale-up this period
		{"seeded: scale-up budget spent", history.FromStatus(st.History), 12, 6},
		{"empty history: jumps by the whole budget", behavior.History{}, 12, 8},
		// the scale-down window holds the current size, as after a restart of kube-controller-manager
		{"seeded: scale-down held by the window", history.FromStatus(st.History), 1, 6},
	} {
		h := tc.hist.DeepCopy()
		stab := h.StabilizeWithBehavior(rules, 6, tc.proposal, 5*time.Minute, clock)
		got := h.LimitByRate(rules, 6, stab.Replicas, clock).Replicas
		if got != tc.want {
			t.Errorf("%s: proposal %d → %d, want %d", tc.name, tc.proposal, got, tc.want)
		}
	}
}
