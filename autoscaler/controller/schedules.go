package controller

import (
	"time"

	"github.com/metricscale/metricscale/autoscaler/schedule"
)

// untilNextEdge is the wait before the next reconcile: the period, or less
// when a window of the schedules starts or ends (or a ramp takes a step)
// sooner. minReplicas is the spec's (nil: 1), which ramps start from.
func untilNextEdge(s schedule.Set, minReplicas *int32, now time.Time, period time.Duration) time.Duration {
	if len(s) == 0 {
		return period
	}
	base := int32(1)
	if minReplicas != nil {
		base = *minReplicas
	}
	next := s.Next(now, base)
	if next.IsZero() {
		return period
	}
	// At least a millisecond: a zero delay would not requeue at all.
	return min(period, max(next.Sub(now), time.Millisecond))
}
