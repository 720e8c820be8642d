package record

import (
	"github.com/metricscale/metricscale/autoscaler/behavior"
)

// historyDelta is how one reconcile's input history differs from the one
// before it: the entries that changed (a reconcile records one
// recommendation and at most one scale event, each appended or in the slot
// of an expired one) and the new lengths.
type historyDelta struct {
	recs       []indexed[behavior.Recommendation]
	up, down   []indexed[behavior.ScaleEvent]
	nRecs      int
	nUp, nDown int
}

type indexed[T any] struct {
	i int
	v T
}

func diffHistory(old, cur behavior.History) historyDelta {
	return historyDelta{
		recs:  diffSlice(old.Recommendations, cur.Recommendations, sameRecommendation),
		up:    diffSlice(old.ScaleUpEvents, cur.ScaleUpEvents, sameEvent),
		down:  diffSlice(old.ScaleDownEvents, cur.ScaleDownEvents, sameEvent),
		nRecs: len(cur.Recommendations), nUp: len(cur.ScaleUpEvents), nDown: len(cur.ScaleDownEvents),
	}
}

func diffSlice[T any](old, cur []T, same func(a, b T) bool) []indexed[T] {
	var out []indexed[T]
	for i, v := range cur {
		if i >= len(old) || !same(old[i], v) {
			out = append(out, indexed[T]{i, v})
		}
	}
	return out
}

// apply turns h, the input history of the step before, into this step's,
// in place (h is the recorder's own copy).
func (d *historyDelta) apply(h *behavior.History) {
	h.Recommendations = applySlice(h.Recommendations, d.recs, d.nRecs)
	h.ScaleUpEvents = applySlice(h.ScaleUpEvents, d.up, d.nUp)
	h.ScaleDownEvents = applySlice(h.ScaleDownEvents, d.down, d.nDown)
}

func applySlice[T any](s []T, changes []indexed[T], n int) []T {
	if n <= len(s) {
		s = s[:n]
	} else {
		s = append(s, make([]T, n-len(s))...)
	}
	for _, c := range changes {
		s[c.i] = c.v
	}
	if n == 0 {
		return nil
	}
	return s
}

func sameRecommendation(a, b behavior.Recommendation) bool {
	return a.Replicas == b.Replicas && a.Timestamp.Equal(b.Timestamp)
}

func sameEvent(a, b behavior.ScaleEvent) bool {
	return a.Change == b.Change && a.Outdated == b.Outdated && a.Timestamp.Equal(b.Timestamp)
}

func sameHistory(a, b behavior.History) bool {
	return sameSlice(a.Recommendations, b.Recommendations, sameRecommendation) &&
		sameSlice(a.ScaleUpEvents, b.ScaleUpEvents, sameEvent) &&
		sameSlice(a.ScaleDownEvents, b.ScaleDownEvents, sameEvent)
}

func sameSlice[T any](a, b []T, same func(x, y T) bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !same(a[i], b[i]) {
			return false
		}
	}
	return true
}
