package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/metricscale/metricscale/providers/ondemand"
)

// The keyspace feed (feed: keyspace). The polling feed reads every watched
// metric each feedPollInterval: at a thousand lists, a thousand LLEN a
// second while nothing moves. This feed learns which keys were written from
// Redis' keyspace notifications instead:
//
//   - While metrics are watched (queried while the change feed has a
//     subscriber: ondemand's Watched, with its lease and cap), one pub/sub
//     connection is subscribed to __keyspace@<db>__:<key> of each watched
//     listLength/streamLength metric's key, or pattern-subscribed to
//     __keyspace@<db>__:<keyPattern>; no connection while none is watched.
//   - A watched metric is read once after the server confirmed its
//     subscription (so that no write falls between the read and the first
//     notification); from then on its series are served, to queries and to
//     the feed, from a snapshot the notifications keep current.
//   - The keys notified within keyspaceWindow are read together: one
//     pipeline of LLEN/XLEN (and TYPE for a pattern's key, which may be
//     new, gone, or of another type, unless the event says: eventType),
//     merged into the snapshot; the changed
//     metrics' series are published as the polling feed's are
//     (ondemand.Provider.Refresh). A key is read at most once per
//     feedPollInterval: a notification of a key read less than that ago is
//     read when that much has passed, so a busy queue costs at most what
//     polling it does, and an idle one nothing.
//   - Pub/sub drops what it cannot deliver, so every feedReconcileInterval
//     every watched key is read again (the SCANs and one pipeline), and
//     after the connection failed its metrics are served from Redis and
//     polled until the reconnected subscription is confirmed and they are
//     read again.
//   - Per-group stream metrics (streamPending, streamLag, streamBacklog)
//     are polled each feedPollInterval as before: XREADGROUP and XACK, which
//     change them, send no keyspace notification.
//   - The server's notify-keyspace-events must hold K, g and l (lists) / t
//     (streams), or A. When it does not, setNotifyKeyspaceEvents adds them
//     (CONFIG SET); otherwise, or when CONFIG GET is refused, the feed polls
//     for good, with a warning naming the setting. Checked at start and at
//     each reconciliation.
//
// Bounds: the watched metrics are ondemand's (feedMaxPolledMetrics), each
// pattern's keys maxKeys; two goroutines per provider (the loop and the
// receiver), none per key; notified keys pending beyond
// maxPendingKeyspaceKeys are dropped for a full read.

const (
	// keyspaceWindow coalesces the notifications of a burst (an LPUSH per
	// job) into one read.
	keyspaceWindow = 50 * time.Millisecond
	// keyspaceSync is how often the watched set is compared with the
	// subscriptions (in memory; a new metric waits at most this long).
	keyspaceSync = 250 * time.Millisecond
	// keyspaceRetry spaces attempts to start the feed when the server is
	// unreachable.
	keyspaceRetry = 5 * time.Second
	// keyspaceReceiveTimeout: an idle connection is pinged this often, so
	// that a dead one is noticed.
	keyspaceReceiveTimeout = 10 * time.Second
	// maxPendingKeyspaceKeys bounds the notified keys held between two
	// reads; beyond, every watched key is read instead.
	maxPendingKeyspaceKeys = 10000
	notifyKeyspaceEvents   = "notify-keyspace-events"
)

var (
	keyspaceFailed = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "metricscale", Subsystem: "adapter", Name: "feed_keyspace_failed",
		Help:           "1 when a redis provider with feed: keyspace polls instead, for good, because the server gives it no keyspace notifications (notify-keyspace-events off, CONFIG or SUBSCRIBE refused; the log says which), by provider.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"provider"})
	keyspaceNotifications = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "metricscale", Subsystem: "adapter", Name: "feed_keyspace_notifications_total",
		Help:           "Keyspace notifications a redis provider with feed: keyspace received, by provider.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"provider"})
)

func init() { legacyregistry.MustRegister(keyspaceFailed, keyspaceNotifications) }

// evented says the kind's changes are all notified: a list's or a stream's
// length changes only with a write to the key. A group's pending count and
// lag change with XREADGROUP and XACK, which notify nothing.
func (k Kind) evented() bool { return k == ListLength || k == StreamLength }

// sub is one subscription: a channel, or a pattern.
type sub struct {
	name    string
	pattern bool
}

// keyspaceFeed is a provider's keyspace feed.
type keyspaceFeed struct {
	p         *Provider
	client    keyspaceClient
	prefix    string // __keyspace@<db>__:
	flags     string // the notify-keyspace-events flags the metrics need
	poll      time.Duration
	reconcile time.Duration
	setNotify bool
	byName    map[string]*metricSettings

	// what queries read
	mu          sync.Mutex
	snap        *snapshot
	established map[string]bool
	failure     error // failed, for the tests

	// what the receiver fills
	emu       sync.Mutex
	pending   map[string]map[string]bool // key -> patterns it was notified by ("": its own channel)
	events    map[string]string          // key -> its last notification's event (lpush, del, ...)
	overflow  bool
	confirmed map[sub]bool
	lostGen   int   // bumped when the connection failed
	refused   error // the server refused a subscription
	wake      chan struct{}

	// the loop's own
	ps          subscriber
	stopRecv    context.CancelFunc
	recvDone    chan struct{}
	refs        map[sub]int
	watched     map[string]*metricSettings // evented and subscribed
	waiting     map[string]bool            // watched, not read since confirmed
	others      []string                   // watched, polled
	seenLostGen int
	failed      error // the server gives no notifications: poll for good
	startAfter  time.Time
	readAfter   time.Time            // after a failed read of waiting metrics
	recheck     bool                 // check notify-keyspace-events once reconnected
	lastRead    map[string]time.Time // notified keys' last reads (pruned at reconciliation)
}

func newKeyspaceFeed(p *Provider, s *settings, c keyspaceClient) *keyspaceFeed {
	ks := &keyspaceFeed{
		p: p, client: c, prefix: fmt.Sprintf("__keyspace@%d__:", s.db),
		poll: s.feed.Interval, reconcile: s.reconcile, setNotify: s.setNotify,
		byName: map[string]*metricSettings{}, wake: make(chan struct{}, 1),
	}
	if ks.poll == 0 {
		ks.poll = ondemand.DefaultFeedPollInterval
	}
	var lists, streams bool
	for i := range s.metrics {
		m := &s.metrics[i]
		ks.byName[m.Name] = m
		lists = lists || m.Type == ListLength
		streams = streams || m.Type == StreamLength
	}
	ks.flags = "Kg"
	if lists {
		ks.flags += "l"
	}
	if streams {
		ks.flags += "t"
	}
	ks.reset()
	return ks
}

// reset forgets every subscription and reading (no connection).
func (ks *keyspaceFeed) reset() {
	ks.mu.Lock()
	ks.snap, ks.established = newSnapshot(), map[string]bool{}
	ks.mu.Unlock()
	ks.emu.Lock()
	ks.pending, ks.events, ks.overflow, ks.confirmed = map[string]map[string]bool{}, map[string]string{}, false, map[sub]bool{}
	ks.seenLostGen = ks.lostGen
	ks.emu.Unlock()
	ks.refs, ks.watched, ks.waiting = map[sub]int{}, map[string]*metricSettings{}, map[string]bool{}
	ks.lastRead, ks.recheck = map[string]time.Time{}, false
}

func newSnapshot() *snapshot {
	return &snapshot{keys: map[scan][]string{}, scanErr: map[scan]error{}, replies: map[Command]Reply{}}
}

// series serves m from the notified snapshot; false when m is not kept
// current by notifications now (the caller reads Redis).
func (ks *keyspaceFeed) series(m *metricSettings) ([]ondemand.Series, bool, error) {
	if ks == nil {
		return nil, false, nil
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if !ks.established[m.Name] {
		return nil, false, nil
	}
	s, err := m.series(ks.snap)
	return s, true, err
}

// state says whether metric is served from notifications now, and why
// the feed polls for good, if it does.
func (ks *keyspaceFeed) state(metric string) (bool, error) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.established[metric], ks.failure
}

// subOf is the subscription m needs.
func (ks *keyspaceFeed) subOf(m *metricSettings) sub {
	if m.KeyPattern != "" {
		return sub{ks.prefix + m.KeyPattern, true}
	}
	return sub{ks.prefix + m.Key, false}
}

// run is the feed's loop; it returns when ctx is done.
func (ks *keyspaceFeed) run(ctx context.Context) {
	defer ks.stop()
	keyspaceFailed.WithLabelValues(ks.p.Name()).Set(0)
	defer keyspaceFailed.DeleteLabelValues(ks.p.Name())
	defer keyspaceNotifications.DeleteLabelValues(ks.p.Name())
	syncT := time.NewTicker(keyspaceSync)
	defer syncT.Stop()
	pollT := time.NewTicker(ks.poll)
	defer pollT.Stop()
	recT := time.NewTicker(ks.reconcile)
	defer recT.Stop()
	window := time.NewTimer(time.Hour)
	window.Stop()
	var due time.Time // when the window timer fires; zero: not armed
	arm := func(d time.Duration) {
		if due.IsZero() || time.Until(due) > d {
			due = time.Now().Add(d)
			window.Reset(d) // Go 1.23+: no stale tick after Reset
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-ks.wake:
			arm(keyspaceWindow)
		case <-window.C:
			due = time.Time{}
			if next := ks.flush(ctx); next > 0 {
				arm(next)
			}
		case <-syncT.C:
			ks.sync(ctx)
		case <-pollT.C:
			ks.pollOthers(ctx)
		case <-recT.C:
			ks.reconcileAll(ctx)
		}
	}
}

// sync matches the subscriptions to the watched metrics, starting or
// stopping the connection, and reads the metrics whose subscription the
// server confirmed.
func (ks *keyspaceFeed) sync(ctx context.Context) {
	names := ks.p.Watched()
	ks.emu.Lock()
	refused := ks.refused
	ks.refused = nil
	ks.emu.Unlock()
	if refused != nil && ks.failed == nil {
		ks.fail(refused)
	}
	ks.emu.Lock()
	lost := ks.lostGen != ks.seenLostGen
	ks.seenLostGen = ks.lostGen
	confirmed := make(map[sub]bool, len(ks.confirmed))
	for s := range ks.confirmed {
		confirmed[s] = true
	}
	ks.emu.Unlock()
	if lost {
		// notifications may have been missed: serve from Redis until read again
		ks.mu.Lock()
		ks.established = map[string]bool{}
		ks.mu.Unlock()
		for name := range ks.watched {
			ks.waiting[name] = true
		}
		// a restarted server has its config file's notify-keyspace-events
		// again, not what CONFIG SET made it: check once reconnected
		ks.recheck = true
	}
	want := map[string]*metricSettings{}
	var others []string
	for _, name := range names {
		if m := ks.byName[name]; m != nil && m.Type.evented() && ks.failed == nil {
			want[name] = m
		} else {
			others = append(others, name)
		}
	}
	for name, m := range ks.watched {
		if want[name] == nil {
			ks.unwatch(ctx, m)
		}
	}
	if len(want) > 0 && ks.ps == nil {
		if err := ks.start(ctx); err != nil {
			for name := range want {
				others = append(others, name)
			}
			want = nil
		}
	}
	for name, m := range want {
		if ks.watched[name] == nil {
			ks.watch(ctx, m)
		}
	}
	if len(ks.watched) == 0 && ks.ps != nil {
		ks.stop()
	}
	var ready []*metricSettings
	for name := range ks.waiting {
		if m := ks.watched[name]; confirmed[ks.subOf(m)] {
			ready = append(ready, m)
		} else {
			others = append(others, name)
		}
	}
	if len(ready) > 0 && ks.recheck {
		// the subscriptions are confirmed again: the server is back
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := ks.checkConfig(cctx)
		cancel()
		switch {
		case err == nil:
			ks.recheck = false
		case definitive(err):
			ks.fail(err)
			ks.others = names
			return
		default:
			ready = nil // still waiting: polled below
		}
	}
	ks.others = others
	if len(ready) > 0 && !time.Now().Before(ks.readAfter) {
		ks.establish(ctx, ready)
	}
	for name := range ks.waiting {
		if !slices.Contains(ks.others, name) {
			ks.others = append(ks.others, name)
		}
	}
}

// start checks the server's notify-keyspace-events and opens the pub/sub
// connection. A server that answered no (the flags are off and may not
// be set, CONFIG refused) makes the feed poll for good.
func (ks *keyspaceFeed) start(ctx context.Context) error {
	if time.Now().Before(ks.startAfter) {
		return errors.New("waiting to retry")
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := ks.checkConfig(cctx); err != nil {
		if definitive(err) {
			ks.fail(err)
			return err
		}
		ks.startAfter = time.Now().Add(keyspaceRetry)
		klog.V(2).InfoS("Change feed: cannot reach Redis to start keyspace notifications; polling meanwhile",
			"provider", ks.p.Name(), "retryIn", keyspaceRetry, "err", err)
		return err
	}
	ks.ps = ks.client.Subscriber(ctx)
	rctx, cancel := context.WithCancel(ctx)
	ks.stopRecv, ks.recvDone = cancel, make(chan struct{})
	go ks.receive(rctx, ks.ps, ks.recvDone)
	klog.V(2).InfoS("Change feed: listening to keyspace notifications", "provider", ks.p.Name(), "channelPrefix", ks.prefix)
	return nil
}

// definitive says a failed check is the server's answer (the flags are
// off, a command refused), not a connection's failure.
func definitive(err error) bool {
	var rerr goredis.Error
	return errors.As(err, &rerr) || errors.Is(err, errNotifyOff)
}

// verify checks the server's notify-keyspace-events again, turning the
// feed into polling when it answers no; false then.
func (ks *keyspaceFeed) verify(ctx context.Context) bool {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := ks.checkConfig(cctx); err != nil && definitive(err) {
		ks.fail(err)
		return false
	}
	return true
}

// fail turns the feed into polling for good.
func (ks *keyspaceFeed) fail(err error) {
	ks.failed = err
	ks.mu.Lock()
	ks.failure = err
	ks.mu.Unlock()
	keyspaceFailed.WithLabelValues(ks.p.Name()).Set(1)
	ks.stop()
	klog.Warningf("Change feed of provider %s: keyspace notifications unavailable, polling every %s instead: %v", ks.p.Name(), ks.poll, err)
}

var errNotifyOff = errors.New("keyspace notifications are off")

// checkConfig makes sure the server sends the notifications the metrics
// need, setting them when allowed.
func (ks *keyspaceFeed) checkConfig(ctx context.Context) error {
	cur, err := ks.client.ConfigGet(ctx, notifyKeyspaceEvents)
	if err != nil {
		return fmt.Errorf("feed keyspace reads the server's %s (grant +config|get, or set feed: poll): %w", notifyKeyspaceEvents, err)
	}
	missing := missingFlags(cur, ks.flags)
	if missing == "" {
		return nil
	}
	if !ks.setNotify {
		return fmt.Errorf("%w: the server's %s is %q, without %q (%s): set it to %q on the server, or setNotifyKeyspaceEvents: true to let the adapter set it",
			errNotifyOff, notifyKeyspaceEvents, cur, missing, flagMeaning(missing), cur+missing)
	}
	if err := ks.client.ConfigSet(ctx, notifyKeyspaceEvents, cur+missing); err != nil {
		return fmt.Errorf("feed keyspace sets the server's %s (setNotifyKeyspaceEvents; grant +config|set): %w", notifyKeyspaceEvents, err)
	}
	klog.InfoS("Change feed: set the server's notify-keyspace-events", "provider", ks.p.Name(), "was", cur, "now", cur+missing)
	return nil
}

// missingFlags are the flags of need that cur lacks (A stands for g$lshzxetd).
func missingFlags(cur, need string) string {
	var out strings.Builder
	for _, c := range need {
		if strings.ContainsRune(cur, c) || c != 'K' && c != 'E' && strings.ContainsRune(cur, 'A') && strings.ContainsRune("g$lshzxetd", c) {
			continue
		}
		out.WriteRune(c)
	}
	return out.String()
}

func flagMeaning(flags string) string {
	names := map[rune]string{'K': "K: keyspace events", 'g': "g: DEL, EXPIRE, RENAME", 'l': "l: list commands", 't': "t: stream commands"}
	var out []string
	for _, c := range flags {
		out = append(out, names[c])
	}
	return strings.Join(out, ", ")
}

// stop closes the connection and forgets its state.
func (ks *keyspaceFeed) stop() {
	if ks.ps == nil {
		return
	}
	ks.stopRecv()
	_ = ks.ps.Close()
	<-ks.recvDone
	ks.ps = nil
	ks.reset()
}

func (ks *keyspaceFeed) watch(ctx context.Context, m *metricSettings) {
	s := ks.subOf(m)
	if ks.refs[s] == 0 {
		var err error
		if s.pattern {
			err = ks.ps.PSubscribe(ctx, s.name)
		} else {
			err = ks.ps.Subscribe(ctx, s.name)
		}
		if err != nil {
			// kept: the client subscribes again when it reconnects
			klog.V(2).InfoS("Change feed: subscribing failed", "provider", ks.p.Name(), "channel", s.name, "err", err)
		}
	}
	ks.refs[s]++
	ks.watched[m.Name] = m
	ks.waiting[m.Name] = true
}

func (ks *keyspaceFeed) unwatch(ctx context.Context, m *metricSettings) {
	delete(ks.watched, m.Name)
	delete(ks.waiting, m.Name)
	ks.mu.Lock()
	delete(ks.established, m.Name)
	ks.mu.Unlock()
	s := ks.subOf(m)
	if ks.refs[s]--; ks.refs[s] > 0 {
		return
	}
	delete(ks.refs, s)
	ks.emu.Lock()
	delete(ks.confirmed, s)
	ks.emu.Unlock()
	var err error
	if s.pattern {
		err = ks.ps.PUnsubscribe(ctx, s.name)
	} else {
		err = ks.ps.Unsubscribe(ctx, s.name)
	}
	if err != nil {
		klog.V(4).InfoS("Change feed: unsubscribing failed", "provider", ks.p.Name(), "channel", s.name, "err", err)
	}
}

// receive reads the connection until ctx is done: notifications into
// pending, confirmations into confirmed, a failure into lostGen.
func (ks *keyspaceFeed) receive(ctx context.Context, ps subscriber, done chan<- struct{}) {
	defer close(done)
	for {
		msg, err := ps.ReceiveTimeout(ctx, keyspaceReceiveTimeout)
		if ctx.Err() != nil || errors.Is(err, goredis.ErrClosed) {
			return
		}
		if err != nil {
			var nerr net.Error
			if errors.As(err, &nerr) && nerr.Timeout() {
				_ = ps.Ping(ctx)
				continue
			}
			var rerr goredis.Error
			if errors.As(err, &rerr) {
				// the server's answer to a command on this connection
				// (SUBSCRIBE refused by the ACL): no connection problem,
				// and no notification is coming
				ks.emu.Lock()
				ks.refused = fmt.Errorf("subscribing to keyspace notifications (%s*) refused (the user needs the channel &%s<key> of each key metric and, for a keyPattern, the pattern &%s<keyPattern> itself: PSUBSCRIBE is checked against it literally): %w", ks.prefix, ks.prefix, ks.prefix, err)
				ks.emu.Unlock()
				select {
				case ks.wake <- struct{}{}:
				default:
				}
				continue
			}
			ks.emu.Lock()
			ks.lostGen++
			ks.confirmed = map[sub]bool{}
			ks.emu.Unlock()
			klog.V(2).InfoS("Change feed: keyspace notifications connection failed; reading from Redis until it is back", "provider", ks.p.Name(), "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		switch m := msg.(type) {
		case *goredis.Message:
			keyspaceNotifications.WithLabelValues(ks.p.Name()).Inc()
			ks.notified(m.Channel, m.Pattern, m.Payload)
		case *goredis.Subscription:
			if m.Kind == "subscribe" || m.Kind == "psubscribe" {
				ks.emu.Lock()
				ks.confirmed[sub{m.Channel, m.Kind == "psubscribe"}] = true
				ks.emu.Unlock()
			}
		}
	}
}

// notified records a notification of channel (through pattern, if any)
// and its event.
func (ks *keyspaceFeed) notified(channel, pattern, event string) {
	key, ok := strings.CutPrefix(channel, ks.prefix)
	if !ok {
		return
	}
	if pattern != "" {
		if pattern, ok = strings.CutPrefix(pattern, ks.prefix); !ok {
			return
		}
	}
	ks.emu.Lock()
	switch pats := ks.pending[key]; {
	case pats != nil:
		pats[pattern] = true
		ks.events[key] = event
	case len(ks.pending) >= maxPendingKeyspaceKeys:
		ks.overflow = true
	default:
		ks.pending[key] = map[string]bool{pattern: true}
		ks.events[key] = event
	}
	ks.emu.Unlock()
	select {
	case ks.wake <- struct{}{}:
	default:
	}
}

// flush reads the keys notified since the last flush, but a key read less
// than feedPollInterval ago only once that much has passed: a busy queue
// costs no more reads than polling it would. It returns when to flush
// again for the keys it put off (0: none).
func (ks *keyspaceFeed) flush(ctx context.Context) time.Duration {
	ks.emu.Lock()
	pending, events, overflow := ks.pending, ks.events, ks.overflow
	ks.pending, ks.events, ks.overflow = map[string]map[string]bool{}, map[string]string{}, false
	ks.emu.Unlock()
	if overflow {
		ks.reconcileAll(ctx)
		return 0
	}
	now := time.Now()
	deferred, next := putOff(pending, ks.lastRead, now, ks.poll)
	if len(deferred) > 0 {
		ks.emu.Lock()
		for key, pats := range deferred {
			if cur := ks.pending[key]; cur != nil {
				for p := range pats {
					cur[p] = true
				}
			} else {
				ks.pending[key], ks.events[key] = pats, events[key]
			}
		}
		ks.emu.Unlock()
	}
	if len(pending) > 0 {
		ks.read(ctx, pending, events, now)
	}
	return next
}

// putOff moves from pending the keys read less than spacing before now
// into deferred, and says when the first of them is due.
func putOff(pending map[string]map[string]bool, lastRead map[string]time.Time, now time.Time, spacing time.Duration) (map[string]map[string]bool, time.Duration) {
	var deferred map[string]map[string]bool
	var next time.Duration
	for key, pats := range pending {
		last, ok := lastRead[key]
		if !ok {
			continue
		}
		wait := spacing - now.Sub(last)
		if wait <= 0 {
			continue
		}
		if deferred == nil {
			deferred = map[string]map[string]bool{}
		}
		deferred[key] = pats
		delete(pending, key)
		if next == 0 || wait < next {
			next = wait
		}
	}
	return deferred, next
}

// read reads notified keys into the snapshot and publishes what changed.
func (ks *keyspaceFeed) read(ctx context.Context, pending map[string]map[string]bool, events map[string]string, now time.Time) {
	ks.mu.Lock()
	var est []*metricSettings
	for name := range ks.established {
		est = append(est, ks.watched[name])
	}
	ks.mu.Unlock()
	cmds, affected := commandsFor(pending, events, est)
	if len(cmds) == 0 {
		return
	}
	for _, c := range cmds {
		ks.lastRead[c.Key] = now
	}
	rctx, cancel := context.WithTimeout(ctx, max(ks.poll, time.Second))
	defer cancel()
	replies, err := ks.p.client.Pipeline(rctx, cmds)
	if err == nil && len(replies) != len(cmds) {
		err = fmt.Errorf("pipeline of %d commands got %d replies", len(cmds), len(replies))
	}
	if err != nil {
		// the change is not in the snapshot: serve and poll from Redis
		// until read again
		klog.V(2).InfoS("Change feed: reading notified keys failed", "provider", ks.p.Name(), "keys", len(pending), "err", ks.p.redact(err))
		ks.mu.Lock()
		for _, name := range affected {
			delete(ks.established, name)
			ks.waiting[name] = true
		}
		ks.mu.Unlock()
		ks.readAfter = time.Now().Add(ks.poll)
		return
	}
	for i := range replies {
		replies[i].Err = ks.p.redact(replies[i].Err)
	}
	ks.mu.Lock()
	applyReplies(ks.snap, pending, events, est, cmds, replies, ks.p.settings.maxKeys)
	ks.mu.Unlock()
	ks.p.Refresh(ctx, affected)
}

// commandsFor are the reads of the notified keys for the metrics keeping
// them (each command once), and those metrics' names. A pattern's key is
// asked its TYPE unless its last event says it (eventType).
func commandsFor(pending map[string]map[string]bool, events map[string]string, metrics []*metricSettings) ([]Command, []string) {
	byKey, byPattern := map[string][]*metricSettings{}, map[string][]*metricSettings{}
	for _, m := range metrics {
		if m.KeyPattern != "" {
			byPattern[m.KeyPattern] = append(byPattern[m.KeyPattern], m)
		} else {
			byKey[m.Key] = append(byKey[m.Key], m)
		}
	}
	var cmds []Command
	queued := map[Command]bool{}
	add := func(c Command) {
		if !queued[c] {
			queued[c] = true
			cmds = append(cmds, c)
		}
	}
	hit := map[string]bool{}
	keys := make([]string, 0, len(pending))
	for k := range pending {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, key := range keys {
		for pat := range pending[key] {
			ms := byKey[key]
			if pat != "" {
				ms = byPattern[pat]
			}
			for _, m := range ms {
				hit[m.Name] = true
				add(Command{Op: m.op(), Key: key})
				if _, known := eventType(events[key]); pat != "" && !known {
					add(Command{Op: OpType, Key: key})
				}
			}
		}
	}
	names := make([]string, 0, len(hit))
	for n := range hit {
		names = append(names, n)
	}
	slices.Sort(names)
	return cmds, names
}

// applyReplies merges the reads of notified keys into snap: the replies,
// and for each pattern whether the key is (still) one of its keys: it is
// when it exists with the pattern's type. A pattern whose keys exceed
// maxKeys fails as SCAN does, until a full read; one whose SCAN failed
// stays failed until then.
func applyReplies(snap *snapshot, pending map[string]map[string]bool, events map[string]string, metrics []*metricSettings, cmds []Command, replies []Reply, maxKeys int) {
	types := map[string]Reply{}
	for key, event := range events {
		if typ, ok := eventType(event); ok {
			types[key] = Reply{Type: typ}
		}
	}
	for i, c := range cmds {
		if c.Op == OpType {
			types[c.Key] = replies[i]
			continue
		}
		snap.replies[c] = replies[i]
		// The key changed again after its event (a WRONGTYPE: now a
		// string, say): not a member, as a TYPE would have said; its own
		// notification follows.
		if t, ok := types[c.Key]; ok && t.Err == nil && replies[i].Err != nil {
			types[c.Key] = Reply{Err: replies[i].Err}
		}
	}
	for _, m := range metrics {
		if m.KeyPattern == "" {
			continue
		}
		sc := scan{m.KeyPattern, m.Type.redisType()}
		if snap.scanErr[sc] != nil {
			continue
		}
		keys := snap.keys[sc]
		for key, pats := range pending {
			t, ok := types[key]
			if !pats[m.KeyPattern] || !ok {
				continue
			}
			i := slices.Index(keys, key)
			switch member := t.Err == nil && t.Type == sc.typ; {
			case member && i < 0:
				keys = append(keys, key)
			case !member && i >= 0:
				keys = slices.Delete(keys, i, i+1)
			}
		}
		if len(keys) > maxKeys {
			delete(snap.keys, sc)
			snap.scanErr[sc] = fmt.Errorf("SCAN MATCH %q TYPE %s: more than %d keys match (maxKeys): narrow keyPattern", sc.pattern, sc.typ, maxKeys)
			continue
		}
		snap.keys[sc] = keys
	}
}

// eventType is the type a key has after a keyspace notification of event,
// when the event says it: a list or stream command's event (the key exists
// with that type: a command that empties it sends del after its own), or
// del, expired, evicted or rename_from ("none"). Other events (rename_to,
// restore, copy_to, a string command's) say nothing: TYPE asks.
func eventType(event string) (string, bool) {
	switch event {
	case "lpush", "rpush", "lpop", "rpop", "linsert", "lset", "lrem", "ltrim":
		return "list", true
	case "xadd", "xtrim", "xdel", "xsetid", "xgroup-create", "xgroup-createconsumer", "xgroup-delconsumer", "xgroup-destroy", "xgroup-setid", "xautoclaim", "xclaim":
		return "stream", true
	case "del", "expired", "evicted", "rename_from":
		return "none", true
	}
	return "", false
}

// establish reads metrics whose subscription was confirmed and serves them
// from the snapshot from then on.
func (ks *keyspaceFeed) establish(ctx context.Context, ms []*metricSettings) {
	rctx, cancel := context.WithTimeout(ctx, max(ks.poll, time.Second))
	defer cancel()
	snap, err := ks.p.read(rctx, &batch{metrics: ms})
	if err != nil {
		ks.readAfter = time.Now().Add(ks.poll)
		klog.V(2).InfoS("Change feed: reading newly watched metrics failed; polling them meanwhile", "provider", ks.p.Name(), "metrics", len(ms), "err", err)
		return
	}
	names := make([]string, len(ms))
	ks.mu.Lock()
	mergeSnapshot(ks.snap, snap)
	for i, m := range ms {
		names[i] = m.Name
		ks.established[m.Name] = true
		delete(ks.waiting, m.Name)
	}
	ks.mu.Unlock()
	ks.p.Refresh(ctx, names)
}

// mergeSnapshot puts a full read of some metrics into dst.
func mergeSnapshot(dst, src *snapshot) {
	for sc, keys := range src.keys {
		dst.keys[sc] = keys
		delete(dst.scanErr, sc)
	}
	for sc, err := range src.scanErr {
		dst.scanErr[sc] = err
		delete(dst.keys, sc)
	}
	for c, r := range src.replies {
		dst.replies[c] = r
	}
}

// reconcileAll reads every key of the notified metrics again, catching up
// with whatever notification was lost, and checks that the server still
// sends them.
func (ks *keyspaceFeed) reconcileAll(ctx context.Context) {
	if ks.ps == nil {
		return
	}
	for key, at := range ks.lastRead {
		if time.Since(at) > ks.poll {
			delete(ks.lastRead, key)
		}
	}
	if !ks.verify(ctx) {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, max(ks.poll, 5*time.Second))
	defer cancel()
	ks.mu.Lock()
	var ms []*metricSettings
	names := make([]string, 0, len(ks.established))
	for name := range ks.established {
		ms = append(ms, ks.watched[name])
		names = append(names, name)
	}
	ks.mu.Unlock()
	if len(ms) == 0 {
		return
	}
	snap, err := ks.p.read(rctx, &batch{metrics: ms})
	if err != nil {
		klog.V(2).InfoS("Change feed: reconciliation read failed", "provider", ks.p.Name(), "err", err)
		return
	}
	ks.mu.Lock()
	ks.snap = snap
	ks.mu.Unlock()
	ks.p.Refresh(ctx, names)
}

// pollOthers reads the watched metrics notifications do not keep current,
// as the polling feed does.
func (ks *keyspaceFeed) pollOthers(ctx context.Context) {
	if len(ks.others) == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(ondemand.WithMaxAge(ctx, ks.poll/2), max(ks.poll, time.Second))
	defer cancel()
	ks.p.Refresh(rctx, ks.others)
}
