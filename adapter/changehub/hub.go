// Package changehub is the adapter's change feed: providers that know when
// a value changes (the memory store, fed by pushes) publish to a Hub, and
// each subscriber of the feed (the autoscaler, over GET /changes on the
// secure port, see Handler) receives which series of which metrics changed
// (wire format: package changefeed).
//
// Publishing never blocks and never grows memory without bound: each
// subscriber has its own pending set, where repeated changes of one series
// coalesce into one, many series of one metric collapse into one "every
// series" change, and a subscriber that falls behind by more than its
// limit gets one resync marker instead of the changes it missed. A change
// is taken by the subscriber's writer as soon as it can write, so a burst
// (a push of many series) goes out as one batch.
package changehub

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"sync"
	"time"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/changefeed"
)

// Default limits of a subscriber's pending changes.
const (
	// DefaultMaxPending bounds the changes waiting for one subscriber;
	// beyond it the subscriber gets a resync.
	DefaultMaxPending = 4096
	// DefaultMaxSeriesPerMetric is how many series of one metric may wait
	// for a subscriber before they become one "every series" change.
	DefaultMaxSeriesPerMetric = 64
)

// Options are a hub's limits; zero values take the defaults.
type Options struct {
	MaxPending         int
	MaxSeriesPerMetric int
}

// Hub fans changes out to its subscribers. It is safe for concurrent use.
type Hub struct {
	maxPending, maxSeriesPerMetric int
	// replica names this hub's process (changefeed's hello and
	// ReplicaHeader).
	replica string

	mu     sync.Mutex
	subs   map[*Subscription]struct{}
	closed bool
	// covered: the metrics the providers cover (see Cover), by kind and
	// name, then by owner.
	covered map[string]map[any]coverage

	// Holds delay changes published after they began until they end (see
	// Hold). seq numbers changes; holds maps each open hold to the seq it
	// began at; held are the delayed changes, in order.
	seq          uint64
	nextHold     uint64
	holds        map[uint64]uint64
	held         []heldChange
	heldOverflow uint64 // the last seq dropped from held (0: none)
}

type heldChange struct {
	seq uint64
	c   change
}

// change is a published change with its keys computed once.
type change struct {
	ev        changefeed.Event
	metricKey string // kind, namespace and name
	seriesKey string // the sorted labels
}

var (
	_ providers.ChangeSink     = (*Hub)(nil)
	_ providers.ChangeAudience = (*Hub)(nil) // the polled providers poll while someone listens
	_ providers.CoverageSink   = (*Hub)(nil)
)

// coverage is one covered metric, or the end of its coverage (off).
type coverage struct {
	kind, name    string
	lease, maxAge time.Duration
	off           bool
}

func (c coverage) key() string { return c.kind + "\x00" + c.name }

func (c coverage) event() changefeed.Event {
	if c.off {
		return changefeed.Event{Type: changefeed.TypeUncovered, Kind: c.kind, Name: c.name}
	}
	return changefeed.Event{Type: changefeed.TypeCovered, Kind: c.kind, Name: c.name,
		LeaseSeconds: int(c.lease / time.Second), MaxAgeMillis: c.maxAge.Milliseconds()}
}

// New returns a hub without subscribers.
func New(o Options) *Hub {
	if o.MaxPending <= 0 {
		o.MaxPending = DefaultMaxPending
	}
	if o.MaxSeriesPerMetric <= 0 {
		o.MaxSeriesPerMetric = DefaultMaxSeriesPerMetric
	}
	return &Hub{maxPending: o.MaxPending, maxSeriesPerMetric: o.MaxSeriesPerMetric, replica: newReplicaName(),
		subs: map[*Subscription]struct{}{}, holds: map[uint64]uint64{}, covered: map[string]map[any]coverage{}}
}

// newReplicaName is a name no other process will have: 64 random bits.
func newReplicaName() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// Replica names the process the hub is in: the feed's hello carries it.
func (h *Hub) Replica() string { return h.replica }

// NameReplica names the hub's process in the changefeed.ReplicaHeader of
// every answer next serves, so that a subscriber knows which of its metric
// reads this replica answered (changefeed's covered).
func (h *Hub) NameReplica(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()[changefeed.ReplicaHeader] = []string{h.replica}
		next.ServeHTTP(w, r)
	})
}

// Cover implements providers.CoverageSink: every subscriber hears that the
// metric is covered (a new one too, after its hello). Not held: a
// subscriber trusts only what it reads after hearing it.
func (h *Hub) Cover(owner any, kind, metric string, lease, maxAge time.Duration) {
	c := coverage{kind: kind, name: metric, lease: lease, maxAge: maxAge}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	owners := h.covered[c.key()]
	if owners == nil {
		owners = map[any]coverage{}
		h.covered[c.key()] = owners
	}
	before := merged(owners)
	owners[owner] = c
	if now := merged(owners); now != before {
		for s := range h.subs {
			s.cover(now)
		}
	}
}

// Uncover implements providers.CoverageSink: every subscriber hears that
// all the metric's series changed, and that it is no longer covered when
// no other owner covers it.
func (h *Hub) Uncover(owner any, kind, metric string) {
	c := coverage{kind: kind, name: metric, off: true}
	h.mu.Lock()
	defer h.mu.Unlock()
	owners := h.covered[c.key()]
	if _, ok := owners[owner]; h.closed || !ok {
		return
	}
	before := merged(owners)
	delete(owners, owner)
	now := merged(owners)
	if len(owners) == 0 {
		delete(h.covered, c.key())
		now = c
	}
	ch := newChange(providers.Change{Kind: kind, Metric: metric, All: true})
	for s := range h.subs {
		if now != before {
			s.cover(now)
		}
		s.add(&ch)
	}
}

// merged is the coverage its owners give together: the shortest lease and
// the largest age (zero when none covers).
func merged(owners map[any]coverage) coverage {
	var out coverage
	first := true
	for _, c := range owners {
		if first {
			out, first = c, false
			continue
		}
		out.lease = min(out.lease, c.lease)
		out.maxAge = max(out.maxAge, c.maxAge)
	}
	return out
}

// Publish implements providers.ChangeSink: it hands c to every subscriber
// without waiting for any.
func (h *Hub) Publish(c providers.Change) {
	ch := newChange(c)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.seq++
	if len(h.holds) > 0 {
		if len(h.held) >= h.maxPending {
			// Too much held: what was held is dropped, and replaced by a
			// resync once the holds that cover it end.
			h.held = h.held[:0]
			h.heldOverflow = h.seq
			return
		}
		h.held = append(h.held, heldChange{seq: h.seq, c: ch})
		return
	}
	for s := range h.subs {
		s.add(&ch)
	}
}

// Hold delays the changes published from now on until release is called
// (and every hold begun before them is released), then hands them out in
// order. The adapter holds the changes of a push while it forwards the push
// to the other replicas, so that a subscriber of this replica does not read
// the metric from another replica that has not stored it yet. release may
// be called more than once.
func (h *Hub) Hold() (release func()) {
	h.mu.Lock()
	h.nextHold++
	id := h.nextHold
	h.holds[id] = h.seq
	h.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { h.release(id) }) }
}

func (h *Hub) release(id uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.holds, id)
	// Changes published before the oldest open hold began belong to holds
	// that have ended: hand them out.
	limit := ^uint64(0)
	for _, start := range h.holds {
		limit = min(limit, start)
	}
	n := 0
	for n < len(h.held) && h.held[n].seq <= limit {
		n++
	}
	if h.closed {
		h.held = nil
		return
	}
	if h.heldOverflow != 0 && h.heldOverflow <= limit {
		h.heldOverflow = 0
		for s := range h.subs {
			s.overflow()
		}
	}
	for i := range n {
		for s := range h.subs {
			s.add(&h.held[i].c)
		}
	}
	h.held = append(h.held[:0], h.held[n:]...)
}

// Subscribe returns a new subscription; it receives every change published
// from now on. Close it when done.
func (h *Hub) Subscribe() *Subscription {
	s := &Subscription{hub: h, notify: make(chan struct{}, 1), done: make(chan struct{}),
		pending: map[string]*pendingMetric{}, maxPending: h.maxPending, maxSeries: h.maxSeriesPerMetric}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		s.closed = true
		close(s.done)
		return s
	}
	h.subs[s] = struct{}{}
	s.mu.Lock()
	s.coverAll()
	s.mu.Unlock()
	return s
}

// Subscribers is the number of open subscriptions.
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// Close ends every subscription (their Done channels close) and drops
// whatever is published afterwards.
func (h *Hub) Close() {
	h.mu.Lock()
	subs := h.subs
	h.subs = map[*Subscription]struct{}{}
	h.closed = true
	h.held = nil
	h.mu.Unlock()
	for s := range subs {
		s.close()
	}
}

func newChange(c providers.Change) change {
	ev := changefeed.Event{Type: changefeed.TypeChange, Kind: c.Kind, Namespace: c.Namespace, Name: c.Metric, All: c.All}
	ch := change{metricKey: c.Kind + "\x00" + c.Namespace + "\x00" + c.Metric}
	if !c.All {
		ev.Labels = c.Labels
		ch.seriesKey = providers.LabelsKey(c.Labels)
	}
	ch.ev = ev
	return ch
}

// Subscription is one subscriber's queue of pending changes.
type Subscription struct {
	hub                   *Hub
	notify                chan struct{} // has a token when something is pending
	done                  chan struct{} // closed by Close or the hub's Close
	maxPending, maxSeries int

	mu        sync.Mutex
	closed    bool
	resync    bool
	pending   map[string]*pendingMetric
	order     []*pendingMetric // in order of arrival
	count     int              // pending entries: one per series, or one per "every series" metric
	overflows int              // resyncs caused by this subscriber's limit
	// coverage waiting to be told, the latest of each metric, in order of
	// arrival; kept through a resync, which it follows.
	coverage   map[string]coverage
	coverOrder []string
}

// pendingMetric is what waits of one metric (kind, namespace, name).
type pendingMetric struct {
	ev     changefeed.Event // the metric's fields
	all    bool
	series map[string]map[string]string // seriesKey -> labels
	keys   []string                     // series in order of arrival
}

// add queues a change; the caller holds the hub's lock.
func (s *Subscription) add(c *change) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.resync {
		return // a resync covers everything
	}
	pm := s.pending[c.metricKey]
	if pm == nil {
		pm = &pendingMetric{ev: changefeed.Event{Type: changefeed.TypeChange, Kind: c.ev.Kind, Namespace: c.ev.Namespace, Name: c.ev.Name}}
		s.pending[c.metricKey] = pm
		s.order = append(s.order, pm)
		s.count++ // counted as one until it holds series
	}
	switch {
	case pm.all:
		// already every series
	case c.ev.All || len(pm.series) >= s.maxSeries && pm.series[c.seriesKey] == nil:
		if len(pm.series) > 0 {
			s.count -= len(pm.series) - 1
		}
		pm.all, pm.series, pm.keys = true, nil, nil
	default:
		if pm.series == nil {
			pm.series = map[string]map[string]string{}
		}
		if _, ok := pm.series[c.seriesKey]; !ok {
			if len(pm.series) > 0 {
				s.count++
			}
			pm.series[c.seriesKey] = c.ev.Labels
			pm.keys = append(pm.keys, c.seriesKey)
		}
	}
	if s.count > s.maxPending {
		s.overflowLocked()
		s.overflows++
	}
	s.signal()
}

// overflow replaces whatever is pending by a resync; the caller holds the
// hub's lock.
func (s *Subscription) overflow() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.overflowLocked()
		s.signal()
	}
}

func (s *Subscription) overflowLocked() {
	s.resync = true
	s.pending = map[string]*pendingMetric{}
	s.order = nil
	s.count = 0
	s.coverAll()
}

// cover queues a change of coverage; the caller holds the hub's lock.
func (s *Subscription) cover(c coverage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.coverLocked(c)
	s.signal()
}

func (s *Subscription) coverLocked(c coverage) {
	if s.coverage == nil {
		s.coverage = map[string]coverage{}
	}
	k := c.key()
	if _, ok := s.coverage[k]; !ok {
		s.coverOrder = append(s.coverOrder, k)
	}
	s.coverage[k] = c
}

// coverAll queues every covered metric, for a subscriber that forgets
// what it knew (a new one, one that gets a resync); the caller holds the
// hub's lock and s.mu.
func (s *Subscription) coverAll() {
	s.coverage, s.coverOrder = nil, nil
	for _, owners := range s.hub.covered {
		s.coverLocked(merged(owners))
	}
	if len(s.coverOrder) > 0 {
		s.signal()
	}
}

func (s *Subscription) signal() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// Ready has a value when changes are pending: call Take.
func (s *Subscription) Ready() <-chan struct{} { return s.notify }

// Done is closed when the subscription ends.
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Take returns the pending changes, in order of arrival, and clears them:
// a resync event if changes were dropped, else one change event per series
// (or per metric, for "every series"); then the changes of coverage.
func (s *Subscription) Take() []changefeed.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resync {
		s.resync = false
		return s.takeCoverage([]changefeed.Event{{Type: changefeed.TypeResync}})
	}
	if len(s.order) == 0 {
		return s.takeCoverage(nil)
	}
	out := make([]changefeed.Event, 0, s.count+len(s.coverOrder))
	for _, pm := range s.order {
		if pm.all || len(pm.keys) == 0 {
			ev := pm.ev
			ev.All = true
			out = append(out, ev)
			continue
		}
		for _, k := range pm.keys {
			ev := pm.ev
			ev.Labels = pm.series[k]
			out = append(out, ev)
		}
	}
	s.pending = map[string]*pendingMetric{}
	s.order = nil
	s.count = 0
	return s.takeCoverage(out)
}

// takeCoverage appends the pending changes of coverage to out and clears
// them.
func (s *Subscription) takeCoverage(out []changefeed.Event) []changefeed.Event {
	for _, k := range s.coverOrder {
		out = append(out, s.coverage[k].event())
	}
	s.coverage, s.coverOrder = nil, nil
	return out
}

// Overflows is how many times this subscriber fell behind by more than
// its limit.
func (s *Subscription) Overflows() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.overflows
}

// Close ends the subscription; the hub forgets it.
func (s *Subscription) Close() {
	s.hub.mu.Lock()
	delete(s.hub.subs, s)
	s.hub.mu.Unlock()
	s.close()
}

func (s *Subscription) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	s.pending, s.order = nil, nil
	close(s.done)
}
