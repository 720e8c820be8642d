package decision

import (
	"fmt"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/metricscale/metricscale/autoscaler/behavior"
	"github.com/metricscale/metricscale/autoscaler/schedule"
)

// ConditionScheduled is the MetricAutoscaler condition that says whether a
// window of spec.schedules raises the floor, which, and until when.
const ConditionScheduled autoscalingv2.HorizontalPodAutoscalerConditionType = "Scheduled"

// Reasons of the Scheduled condition, its events, and of ScalingLimited
// when a schedule's floor sets the size.
const (
	ReasonScheduleActive   = "ScheduleActive"
	ReasonScheduleRampUp   = "ScheduleRampUp"
	ReasonScheduleRampDown = "ScheduleRampDown"
	ReasonNoSchedule       = "NoActiveSchedule"
	ReasonInvalidSchedule  = "InvalidSchedule"
	ReasonScheduleStarted  = "ScheduleStarted"
	ReasonScheduleEnded    = "ScheduleEnded"
	ReasonScheduledMinimum = "ScheduledMinimum"
)

// applySchedules raises p.minimum to the schedules' floor at in.Now (never
// above maxReplicas) and reports the Scheduled condition; the spec's own
// minimum stays in p.specMinimum, which decides whether scale to zero is
// on. Without schedules the condition is removed.
func (p *Plan) applySchedules(in Input) {
	if len(in.Schedules) == 0 && in.ScheduleErr == nil {
		p.removeCondition(ConditionScheduled)
		return
	}
	was := conditionTrue(p.hpa, ConditionScheduled)
	floor := in.Schedules.Floor(in.Now, p.minimum)
	if floor.Raised() {
		p.floor = floor
		p.minimum = min(floor.Replicas, max(p.hpa.Spec.MaxReplicas, p.specMinimum))
	}
	status, reason, msg := corev1.ConditionFalse, ReasonNoSchedule, fmt.Sprintf("no schedule raises the floor: minReplicas %d applies", p.specMinimum)
	if next := in.Schedules.Next(in.Now, p.specMinimum); !floor.Raised() && !next.IsZero() {
		msg += "; the next change is at " + stamp(next)
	}
	switch {
	case floor.Raised():
		status, reason, msg = corev1.ConditionTrue, floorReason(floor), p.scheduleMessage()
	case in.ScheduleErr != nil:
		reason, msg = ReasonInvalidSchedule, fmt.Sprintf("%v; %s", in.ScheduleErr, msg)
	}
	if in.ScheduleErr != nil {
		p.event(corev1.EventTypeWarning, ReasonInvalidSchedule, in.ScheduleErr.Error())
		if floor.Raised() {
			msg += fmt.Sprintf("; %v", in.ScheduleErr)
		}
	}
	p.setCondition(ConditionScheduled, status, reason, msg)
	switch {
	case floor.Raised() && !was:
		p.event(corev1.EventTypeNormal, ReasonScheduleStarted, msg)
	case !floor.Raised() && was:
		p.event(corev1.EventTypeNormal, ReasonScheduleEnded, msg)
	}
}

func floorReason(f schedule.Floor) string {
	switch f.Phase {
	case schedule.RampUp:
		return ReasonScheduleRampUp
	case schedule.RampDown:
		return ReasonScheduleRampDown
	}
	return ReasonScheduleActive
}

// scheduleMessage describes the floor in force, as `kubectl describe` shows
// it in the Scheduled condition.
func (p *Plan) scheduleMessage() string {
	f := p.floor
	var msg string
	switch f.Phase {
	case schedule.RampUp:
		msg = fmt.Sprintf("schedule %s ramps the floor up: %d now, %d from %s", f.Name, f.Replicas, f.MinReplicas, stamp(f.Until))
	case schedule.RampDown:
		msg = fmt.Sprintf("schedule %s ramps the floor down: %d now, minReplicas %d from %s", f.Name, f.Replicas, p.specMinimum, stamp(f.Until))
	default:
		msg = fmt.Sprintf("schedule %s raises the floor to %d", f.Name, f.Replicas)
		if !f.Until.IsZero() {
			msg += " until " + stamp(f.Until)
		}
		msg += fmt.Sprintf(" (minReplicas %d)", p.specMinimum)
	}
	if p.minimum < f.Replicas {
		msg += fmt.Sprintf("; capped at maxReplicas %d", p.minimum)
	}
	return msg
}

// scheduleReason is the rescale reason and ScalingLimited message when the
// schedules' floor set the size.
func (p *Plan) scheduleReason() string {
	return fmt.Sprintf("schedule %s raised the floor to %d", p.floor.Name, p.minimum)
}

// scheduleBinds records that the schedules' floor set the size: it names
// the schedule in the reason, ScalingLimited and the explanation.
func (p *Plan) scheduleBinds() {
	p.Reason = p.scheduleReason()
	p.Explain.Schedule = p.scheduleReason()
	p.setCondition(autoscalingv2.ScalingLimited, corev1.ConditionTrue, ReasonScheduledMinimum,
		"the desired replica count is less than the floor: "+p.scheduleReason())
}

func stamp(t time.Time) string {
	return t.UTC().Format(time.RFC3339)
}

// scheduleLimited names the schedule when the min/max clamp raised the
// count to its floor.
func (p *Plan) scheduleLimited(lim behavior.Limit, before int32) {
	if p.floor.Raised() && lim.Reason == "TooFewReplicas" && lim.Replicas != before {
		p.scheduleBinds()
	}
}
