package controller

import (
	"time"

	"github.com/metricscale/metricscale/autoscaler/behavior"
)

// packedHistory is a behavior.History in half the bytes, as the controller
// keeps one per object between reconciles: times as Unix nanoseconds (their
// monotonic reading goes, as it goes across a restart: the core then
// compares wall-clock times) and slices exactly as long as their content.
type packedHistory struct {
	recs     []packedRecommendation
	up, down []packedEvent
}

type packedRecommendation struct {
	at       int64
	replicas int32
}

type packedEvent struct {
	at       int64
	change   int32
	outdated bool
}

func packHistory(h behavior.History) packedHistory {
	p := packedHistory{up: packEvents(h.ScaleUpEvents), down: packEvents(h.ScaleDownEvents)}
	if len(h.Recommendations) > 0 {
		p.recs = make([]packedRecommendation, len(h.Recommendations))
		for i, r := range h.Recommendations {
			p.recs[i] = packedRecommendation{r.Timestamp.UnixNano(), r.Replicas}
		}
	}
	return p
}

func packEvents(in []behavior.ScaleEvent) []packedEvent {
	if len(in) == 0 {
		return nil
	}
	out := make([]packedEvent, len(in))
	for i, e := range in {
		out[i] = packedEvent{e.Timestamp.UnixNano(), e.Change, e.Outdated}
	}
	return out
}

// unpack returns the history as the core takes it; it shares nothing with p.
func (p packedHistory) unpack() behavior.History {
	var h behavior.History
	if len(p.recs) > 0 {
		h.Recommendations = make([]behavior.Recommendation, len(p.recs))
		for i, r := range p.recs {
			h.Recommendations[i] = behavior.Recommendation{Replicas: r.replicas, Timestamp: time.Unix(0, r.at)}
		}
	}
	h.ScaleUpEvents, h.ScaleDownEvents = unpackEvents(p.up), unpackEvents(p.down)
	return h
}

func unpackEvents(in []packedEvent) []behavior.ScaleEvent {
	if len(in) == 0 {
		return nil
	}
	out := make([]behavior.ScaleEvent, len(in))
	for i, e := range in {
		out[i] = behavior.ScaleEvent{Change: e.change, Timestamp: time.Unix(0, e.at), Outdated: e.outdated}
	}
	return out
}

// latest is the time of the newest entry (zero when empty): about when a
// history read from a status was saved.
func (p packedHistory) latest() time.Time {
	var n int64
	for _, r := range p.recs {
		n = max(n, r.at)
	}
	for _, events := range [][]packedEvent{p.up, p.down} {
		for _, e := range events {
			n = max(n, e.at)
		}
	}
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}
