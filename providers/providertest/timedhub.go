package providertest

import (
	"time"

	"github.com/metricscale/metricscale/providers"
)

// TimedHub is a change hub with one subscriber that hands each change, with
// when it came, to the test: a polled provider's feed tests measure the
// time from a backend change to its publication with it.
type TimedHub struct {
	C chan TimedChange
}

// TimedChange is a published change and when it was published.
type TimedChange struct {
	providers.Change
	At time.Time
}

// NewTimedHub returns a hub that keeps up to 64 changes unread; later ones
// are dropped.
func NewTimedHub() *TimedHub { return &TimedHub{C: make(chan TimedChange, 64)} }

// Publish implements providers.ChangeSink.
func (h *TimedHub) Publish(c providers.Change) {
	select {
	case h.C <- TimedChange{Change: c, At: time.Now()}:
	default:
	}
}

// Subscribers implements providers.ChangeAudience: always one.
func (h *TimedHub) Subscribers() int { return 1 }

// Drain discards the changes published so far.
func (h *TimedHub) Drain() {
	for len(h.C) > 0 {
		<-h.C
	}
}
