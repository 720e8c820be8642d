package decision

import (
	"errors"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/behavior"
	"github.com/metricscale/metricscale/autoscaler/schedule"
)

type schedStep struct {
	at       time.Duration
	external []int64

	wantReplicas  int32
	wantScheduled string // the Scheduled condition, status/reason
	wantLimited   string // ScalingLimited, when set
	wantEvents    string // schedule events, comma-separated
	wantReason    string // a part of the rescale reason, when set
	wantRule      Rule   // when set
}

// TestSchedules: the floor rises when a window starts, whatever the
// metrics, and falls when it ends; it never lowers a larger proposal,
// never passes maxReplicas, and holds a workload that scale to zero would
// take down. now is 12:00 UTC.
func TestSchedules(t *testing.T) {
	t.Parallel()
	const (
		active = "True/" + ReasonScheduleActive
		none   = "False/" + ReasonNoSchedule
	)
	// 2 per pod: 2 messages propose 1 replica.
	queue := func(minR int32) *autoscalingv2.HorizontalPodAutoscaler {
		return anyScaleDown(hpa(ptr(minR), 10, externalMetric("2")))
	}
	peak := v1alpha1.Schedule{Name: "peak", Start: "1 12 * * *", End: "3 12 * * *", MinReplicas: 5}
	for _, tc := range []struct {
		name      string
		hpa       *autoscalingv2.HorizontalPodAutoscaler
		schedules []v1alpha1.Schedule
		stz       *v1alpha1.ScaleToZero
		current   int32
		steps     []schedStep
	}{
		{
			name: "the floor rises on time and falls after", hpa: queue(1), schedules: []v1alpha1.Schedule{peak}, current: 1,
			steps: []schedStep{
				{at: 0, external: []int64{2000}, wantReplicas: 1, wantScheduled: none},
				{at: time.Minute, external: []int64{2000}, wantReplicas: 5, wantScheduled: active, wantEvents: ReasonScheduleStarted,
					wantReason: "schedule peak raised the floor to 5", wantRule: RuleSchedule},
				{at: 90 * time.Second, external: []int64{2000}, wantReplicas: 5, wantScheduled: active,
					wantLimited: "True/" + ReasonScheduledMinimum, wantRule: RuleSchedule},
				{at: 3 * time.Minute, external: []int64{2000}, wantReplicas: 1, wantScheduled: none, wantEvents: ReasonScheduleEnded},
			},
		},
		{
			// 16 messages propose 8: the floor of 5 takes nothing away.
			name: "the floor never lowers a proposal", hpa: queue(1), schedules: []v1alpha1.Schedule{peak}, current: 8,
			steps: []schedStep{
				{at: time.Minute, external: []int64{16000}, wantReplicas: 8, wantScheduled: active, wantEvents: ReasonScheduleStarted},
			},
		},
		{
			name: "never above maxReplicas", hpa: queue(1), current: 1,
			schedules: []v1alpha1.Schedule{{Name: "big", Start: "0 12 * * *", Duration: &metav1.Duration{Duration: time.Hour}, MinReplicas: 20}},
			steps: []schedStep{
				{at: 0, external: []int64{2000}, wantReplicas: 10, wantScheduled: active, wantEvents: ReasonScheduleStarted, wantReason: "floor to 10"},
			},
		},
		{
			// Scale to zero on, the queue empty and the cooldown over: the
			// window brings the target up from zero and keeps it up; after
			// it, to zero at once.
			name: "a window holds a scale-to-zero workload up", hpa: queue(0), schedules: []v1alpha1.Schedule{peak}, current: 0,
			stz: stz(time.Minute, act("queue", "5")),
			steps: []schedStep{
				{at: 0, external: []int64{0}, wantReplicas: 0, wantScheduled: none},
				{at: time.Minute, external: []int64{0}, wantReplicas: 5, wantScheduled: active, wantEvents: ReasonScheduleStarted,
					wantLimited: "True/" + ReasonScheduledMinimum, wantReason: "schedule peak"},
				{at: 2 * time.Minute, external: []int64{0}, wantReplicas: 5, wantScheduled: active, wantLimited: "True/" + ReasonScheduledMinimum},
				{at: 3 * time.Minute, external: []int64{0}, wantReplicas: 0, wantScheduled: none, wantEvents: ReasonScheduleEnded},
			},
		},
		{
			// The ramp: 1 → 5 over the 120s before 12:01, a replica every
			// 30s (rounded up), and back down over the 120s after 12:03.
			name: "a ramp raises the floor step by step", hpa: queue(1), current: 1,
			schedules: []v1alpha1.Schedule{{Name: "peak", Start: "1 12 * * *", End: "3 12 * * *", MinReplicas: 5, RampSeconds: 120}},
			steps: []schedStep{
				{at: -time.Minute, external: []int64{2000}, wantReplicas: 1, wantScheduled: none},
				{at: -30 * time.Second, external: []int64{2000}, wantReplicas: 2, wantScheduled: "True/" + ReasonScheduleRampUp, wantEvents: ReasonScheduleStarted},
				{at: 0, external: []int64{2000}, wantReplicas: 3, wantScheduled: "True/" + ReasonScheduleRampUp},
				{at: 40 * time.Second, external: []int64{2000}, wantReplicas: 5, wantScheduled: "True/" + ReasonScheduleRampUp},
				{at: time.Minute, external: []int64{2000}, wantReplicas: 5, wantScheduled: active},
				{at: 3*time.Minute + 30*time.Second, external: []int64{2000}, wantReplicas: 4, wantScheduled: "True/" + ReasonScheduleRampDown},
				{at: 5 * time.Minute, external: []int64{2000}, wantReplicas: 1, wantScheduled: none, wantEvents: ReasonScheduleEnded},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			set, errs := schedule.Compile(tc.schedules, field.NewPath("spec"))
			if len(errs) > 0 {
				t.Fatal(errs.ToAggregate())
			}
			pods := makePods(10)
			settings := DefaultSettings()
			settings.Gates.ScaleToZero = true
			a := tc.hpa.DeepCopy()
			current := tc.current
			var (
				hist  behavior.History
				state *v1alpha1.ScaleToZeroStatus
			)
			for i, st := range tc.steps {
				src := &source{pods: pods[:max(current, 1)], external: st.external}
				res := run(Input{
					Autoscaler: a, Scale: Scale{current, current, "app=web"}, Pods: pods[:current], Metrics: src,
					History: hist, Settings: settings, Now: now.Add(st.at), Schedules: set,
					ScaleToZero: tc.stz, ScaleToZeroState: state,
				}, nil)
				if res.Replicas != st.wantReplicas {
					t.Errorf("step %d: replicas %d, want %d (reason %q, err %v)", i, res.Replicas, st.wantReplicas, res.Reason, res.Err)
				}
				if got := condition(res.Status, ConditionScheduled); got != st.wantScheduled {
					t.Errorf("step %d: Scheduled %s, want %s", i, got, st.wantScheduled)
				}
				if st.wantLimited != "" {
					if got := condition(res.Status, autoscalingv2.ScalingLimited); got != st.wantLimited {
						t.Errorf("step %d: ScalingLimited %s, want %s", i, got, st.wantLimited)
					}
				}
				var events []string
				for _, e := range res.Events {
					if strings.HasPrefix(e.Reason, "Schedule") {
						events = append(events, e.Reason)
					}
				}
				if got := strings.Join(events, ","); got != st.wantEvents {
					t.Errorf("step %d: schedule events %q, want %q", i, got, st.wantEvents)
				}
				if st.wantReason != "" && !strings.Contains(res.Reason, st.wantReason) {
					t.Errorf("step %d: reason %q, want it to say %q", i, res.Reason, st.wantReason)
				}
				if st.wantRule != "" {
					if got := res.Explain.Rule(res.Metrics); got != st.wantRule {
						t.Errorf("step %d: rule %q, want %q", i, got, st.wantRule)
					}
				}
				a.Status, hist, state, current = res.Status, res.History, res.ScaleToZero, res.Replicas
			}
		})
	}
}

// TestInvalidSchedule: what did not compile is reported in the Scheduled
// condition and a warning event; without spec.schedules the condition goes.
func TestInvalidSchedule(t *testing.T) {
	t.Parallel()
	a := anyScaleDown(hpa(ptr[int32](1), 10, externalMetric("2")))
	pods := makePods(2)
	in := Input{
		Autoscaler: a, Scale: Scale{2, 2, "app=web"}, Pods: pods, Metrics: &source{pods: pods, external: []int64{4000}},
		Settings: DefaultSettings(), Now: now,
		ScheduleErr: errors.New("spec.schedules[0].start: not a cron expression"),
	}
	res := run(in, nil)
	if got := condition(res.Status, ConditionScheduled); got != "False/"+ReasonInvalidSchedule {
		t.Errorf("Scheduled %s, want False/%s", got, ReasonInvalidSchedule)
	}
	found := false
	for _, e := range res.Events {
		found = found || (e.Reason == ReasonInvalidSchedule && strings.Contains(e.Message, "spec.schedules[0].start"))
	}
	if !found {
		t.Errorf("no %s event naming the field: %v", ReasonInvalidSchedule, res.Events)
	}
	in.ScheduleErr = nil
	in.Autoscaler = a.DeepCopy()
	in.Autoscaler.Status = res.Status
	if got := condition(run(in, nil).Status, ConditionScheduled); got != "absent" {
		t.Errorf("Scheduled %s without spec.schedules, want it removed", got)
	}
}
