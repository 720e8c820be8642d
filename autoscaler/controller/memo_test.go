package controller

import (
	"reflect"
	"testing"
	"time"

	"github.com/metricscale/metricscale/autoscaler/behavior"
)

// TestPackedHistory: a packed history unpacks to the same entries (wall
// times to the nanosecond), shares nothing with what it was packed from,
// and knows its newest entry.
func TestPackedHistory(t *testing.T) {
	t.Parallel()
	at := func(s int) time.Time { return time.Unix(1_780_000_000, int64(s)*1_000_000_123) }
	for _, tc := range []struct {
		name   string
		h      behavior.History
		latest time.Time
	}{
		{"empty", behavior.History{}, time.Time{}},
		{"recommendations", behavior.History{Recommendations: []behavior.Recommendation{{Replicas: 3, Timestamp: at(5)}, {Replicas: 7, Timestamp: at(2)}}}, at(5)},
		{"events newest", behavior.History{
			Recommendations: []behavior.Recommendation{{Replicas: 3, Timestamp: at(5)}},
			ScaleUpEvents:   []behavior.ScaleEvent{{Change: 2, Timestamp: at(4), Outdated: true}},
			ScaleDownEvents: []behavior.ScaleEvent{{Change: 1, Timestamp: at(9)}},
		}, at(9)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := packHistory(tc.h)
			got := p.unpack()
			if !reflect.DeepEqual(wallTimes(got), wallTimes(tc.h)) {
				t.Errorf("unpacked %+v, want %+v", got, tc.h)
			}
			if l := p.latest(); !l.Equal(tc.latest) {
				t.Errorf("latest %v, want %v", l, tc.latest)
			}
			if len(got.Recommendations) > 0 {
				got.Recommendations[0].Replicas = 99
				if p.unpack().Recommendations[0].Replicas == 99 {
					t.Error("the unpacked history shares memory with the packed one")
				}
			}
		})
	}
}

// wallTimes drops what packing drops (location, monotonic reading).
func wallTimes(h behavior.History) behavior.History {
	out := behavior.History{}
	for _, r := range h.Recommendations {
		out.Recommendations = append(out.Recommendations, behavior.Recommendation{Replicas: r.Replicas, Timestamp: time.Unix(0, r.Timestamp.UnixNano())})
	}
	for _, e := range h.ScaleUpEvents {
		out.ScaleUpEvents = append(out.ScaleUpEvents, behavior.ScaleEvent{Change: e.Change, Timestamp: time.Unix(0, e.Timestamp.UnixNano()), Outdated: e.Outdated})
	}
	for _, e := range h.ScaleDownEvents {
		out.ScaleDownEvents = append(out.ScaleDownEvents, behavior.ScaleEvent{Change: e.Change, Timestamp: time.Unix(0, e.Timestamp.UnixNano()), Outdated: e.Outdated})
	}
	return out
}
