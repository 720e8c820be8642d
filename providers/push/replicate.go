package push

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/memory"
	"github.com/metricscale/metricscale/providers/telemetry"
)

// Replication between the adapter's replicas.
//
// Every replica holds every pushed series. A replica that accepts a push
// stamps each sample with a version: the sample time (the pusher's, or the
// acceptance time when it gave none), the acceptance time, and the
// replica's id. Stores keep, per series, the value of the greatest version
// (a last-writer-wins register, providers/memory), so replicas converge to
// the same value whatever order the copies arrive in.
//
// Each peer has a queue that keeps only the latest value of each series
// (at most MaxQueuedSeries; past that the queue is dropped and the peer
// gets a full copy of the store instead, read from the store in batches),
// drained by one goroutine that retries with backoff. All peers share one
// http.Transport capped at MaxConnsPerPeer connections per peer, with
// timeouts, so a peer that hangs costs one goroutine, a bounded queue and
// at most MaxConnsPerPeer connections.
//
// A peer answers with its replica id (ReplicaHeader): a new id (a peer
// seen for the first time, or restarted) gets a full copy of this
// replica's store; this replica's own id means the address is this
// replica, which is then skipped. A starting replica copies the store of
// every peer it reaches (GET ReplicatePath) before it reports ready.

// ReplicatePath is the endpoint between replicas, on the push port and
// behind the push token: POST a batch of versioned samples, GET a copy of
// the whole store (one JSON object a line).
const ReplicatePath = "/replicate"

// ReplicaHeader carries the id of the replica that answers.
const ReplicaHeader = "X-Metricscale-Replica"

// JoinHeader, on a copy request (GET ReplicatePath), is the push address
// of the replica that copies: the peer forwards to it from before the copy
// on, without waiting for its own list (DNS, cached for seconds) to name it.
const JoinHeader = "X-Metricscale-Join"

// Defaults of the replication; see Replicator's fields.
const (
	DefaultMaxQueuedSeries = 50_000
	DefaultMaxConnsPerPeer = 2
	DefaultBootstrapWait   = 30 * time.Second
	// DefaultHoldMax bounds how long a push's change events wait for the
	// peers to store it.
	DefaultHoldMax = 2 * time.Second

	maxBatchSeries  = 1000
	maxBatchBytes   = 1 << 20
	requestTimeout  = 10 * time.Second
	probeInterval   = 2 * time.Second
	minBackoff      = 100 * time.Millisecond
	maxBackoff      = 5 * time.Second
	refreshInterval = 5 * time.Second
	maxSnapshots    = 2
	// joinGrace keeps a peer that joined while the peer list does not name
	// it yet (DNS answers are cached: CoreDNS's cache is 30 s by default).
	joinGrace = time.Minute
)

// Source reads the local store in batches (for full copies).
type Source func(batch int, fn func([]providers.Sample) error) error

// Replicator keeps the replicas' stores equal.
type Replicator struct {
	// MaxQueuedSeries bounds each peer's queue, in series.
	MaxQueuedSeries int
	// BootstrapWait bounds the copy of the peers' state at start.
	BootstrapWait time.Duration
	// HoldMax bounds a push's hold (Handler.Hold).
	HoldMax time.Duration
	// Advertise is this replica's push address (host:port) as the peers
	// list it, sent when it copies a peer's store (JoinHeader); "" sends
	// none.
	Advertise string

	id     uint64
	peers  Peers
	token  string
	sink   Sink
	source Source
	client *http.Client
	now    func() time.Time

	mu      sync.Mutex
	lastAcc int64
	seq     uint64
	byAddr  map[string]*peer
	waiters []waiter
	kick    chan struct{}

	bootMu   sync.Mutex
	booted   bool
	bootNote string

	snapshots chan struct{}
	ctx       context.Context // Start's, for the senders of joined peers
}

// waiter is a push whose hold is released once every peer stored it.
type waiter struct {
	seq      uint64
	deadline time.Time
	release  func()
}

// NewReplicator returns a replicator storing into sink and reading full
// copies from source; it authenticates to peers with token. Call Start
// before serving pushes.
func NewReplicator(peers Peers, token string, sink Sink, source Source) *Replicator {
	var b [8]byte
	_, _ = rand.Read(b[:])
	id := binary.BigEndian.Uint64(b[:]) | 1 // never 0, the "unstamped" origin
	tr := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxConnsPerHost:       DefaultMaxConnsPerPeer,
		MaxIdleConnsPerHost:   DefaultMaxConnsPerPeer,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: requestTimeout,
		DisableCompression:    true,
	}
	return &Replicator{
		MaxQueuedSeries: DefaultMaxQueuedSeries,
		BootstrapWait:   DefaultBootstrapWait,
		HoldMax:         DefaultHoldMax,
		id:              id,
		peers:           peers,
		token:           token,
		sink:            sink,
		source:          source,
		client:          &http.Client{Transport: tr},
		now:             time.Now,
		byAddr:          map[string]*peer{},
		kick:            make(chan struct{}, 1),
		snapshots:       make(chan struct{}, maxSnapshots),
	}
}

// ID is this replica's id (random, per process).
func (r *Replicator) ID() uint64 { return r.id }

// Stamp gives samples of one push their version: this replica's id and an
// acceptance time after every earlier one (the clock, or just past the
// newest stamp seen from a peer if that is ahead), and that time as sample
// time where the pusher gave none.
func (r *Replicator) Stamp(samples []providers.Sample) {
	r.mu.Lock()
	acc := max(r.now().UnixNano(), r.lastAcc+1)
	r.lastAcc = acc
	r.mu.Unlock()
	for i := range samples {
		samples[i].Accepted, samples[i].Origin = acc, r.id
		if samples[i].Timestamp.IsZero() {
			samples[i].Timestamp = time.Unix(0, acc)
		}
	}
}

// observe moves the acceptance clock past a peer's stamp (within the
// store's future bound), so a push accepted here after a copy arrived wins
// over it even if the peer's clock is ahead.
func (r *Replicator) observe(samples []providers.Sample) {
	limit := r.now().Add(time.Minute).UnixNano()
	var hi int64
	for i := range samples {
		if a := samples[i].Accepted; a > hi && a < limit {
			hi = a
		}
	}
	r.mu.Lock()
	r.lastAcc = max(r.lastAcc, hi)
	r.mu.Unlock()
}

// Start finds the peers, starts their senders and, in the background,
// copies the peers' state (Ready reports when done); it runs until ctx is
// done.
func (r *Replicator) Start(ctx context.Context) {
	r.mu.Lock()
	r.ctx = ctx
	r.mu.Unlock()
	r.refresh(ctx)
	go func() {
		t := time.NewTicker(refreshInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				r.mu.Lock()
				for addr, p := range r.byAddr {
					close(p.stop)
					delete(r.byAddr, addr)
				}
				r.mu.Unlock()
				return
			case <-t.C:
				r.refresh(ctx)
			}
		}
	}()
	go r.holdLoop(ctx)
	go r.bootstrap(ctx)
}

// refresh starts a sender for each new peer and stops those of peers gone.
func (r *Replicator) refresh(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, requestTimeout)
	addrs, err := r.peers.Addresses(cctx)
	cancel()
	if err != nil {
		klog.ErrorS(err, "Cannot list the other replicas; keeping the last list")
		return
	}
	want := map[string]bool{}
	for _, a := range addrs {
		want[a] = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	for addr, p := range r.byAddr {
		switch {
		case want[addr]:
			p.joined = time.Time{} // listed now: a peer like the others
		case !p.joined.IsZero() && now.Sub(p.joined) < joinGrace:
		default:
			klog.InfoS("Push peer gone; its queue is dropped", "peer", addr, "queued", len(p.pending))
			close(p.stop)
			delete(r.byAddr, addr)
		}
	}
	for addr := range want {
		if r.byAddr[addr] == nil {
			r.addPeerLocked(ctx, addr)
		}
	}
	r.checkWaitersLocked()
}

func (r *Replicator) addPeerLocked(ctx context.Context, addr string) *peer {
	p := &peer{r: r, addr: addr, pending: map[string]entry{}, wake: make(chan struct{}, 1), stop: make(chan struct{})}
	r.byAddr[addr] = p
	go p.run(ctx)
	return p
}

// join makes the replica id at addr a peer before this replica copies its
// store to it: every push queued from now on goes to it as well, and the
// copy holds every one stored before. The copy is the full copy a new id
// asks for, so none is queued. serveReplicate has answered a request of
// this replica's own id already.
func (r *Replicator) join(addr string, id uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx == nil {
		return
	}
	p := r.byAddr[addr]
	if p == nil {
		p = r.addPeerLocked(r.ctx, addr)
		p.joined = r.now()
		klog.InfoS("Push peer joined before the peer list names it", "peer", addr)
	}
	if p.self {
		return
	}
	p.id = id
}

// Enqueue queues stamped samples for every peer; release, if not nil, is
// called once every peer stored them, was found down, or HoldMax passed.
func (r *Replicator) Enqueue(samples []providers.Sample, release func()) {
	keys := make([]string, len(samples))
	for i := range samples {
		keys[i] = seriesKey(&samples[i])
	}
	r.mu.Lock()
	r.seq++
	seq := r.seq
	for _, p := range r.byAddr {
		if !p.self {
			p.enqueueLocked(samples, keys, seq)
		}
	}
	if release != nil {
		r.waiters = append(r.waiters, waiter{seq: seq, deadline: r.now().Add(r.HoldMax), release: release})
	}
	r.checkWaitersLocked()
	r.mu.Unlock()
}

// checkWaitersLocked releases the holds every peer satisfied or whose time
// is up; the caller holds r.mu. Releases run in their own goroutine: they
// take the change hub's lock.
func (r *Replicator) checkWaitersLocked() {
	if len(r.waiters) == 0 {
		return
	}
	now := r.now()
	var done []func()
	keep := r.waiters[:0]
	for _, w := range r.waiters {
		if now.After(w.deadline) || r.storedEverywhereLocked(w.seq) {
			done = append(done, w.release)
			continue
		}
		keep = append(keep, w)
	}
	for i := len(keep); i < len(r.waiters); i++ {
		r.waiters[i] = waiter{}
	}
	r.waiters = keep
	if len(done) > 0 {
		go func() {
			for _, f := range done {
				f()
			}
		}()
	}
}

// Flush hands this replica's state over before it stops: every peer not
// found down gets a full copy of the store (which holds the pushes taken
// here and the values forwarded from other peers) and every push queued so
// far; Flush returns when they have, or when ctx ends. A stopping replica
// flushes after its push endpoint has closed and before it stops serving
// reads: the replica its readers move to then already serves every value
// this one served.
func (r *Replicator) Flush(ctx context.Context) error {
	r.mu.Lock()
	target := r.seq
	gens := map[*peer]uint64{}
	for _, p := range r.byAddr {
		if !p.self {
			p.fullGen++
			gens[p] = p.fullGen
			select {
			case p.wake <- struct{}{}:
			default:
			}
		}
	}
	r.mu.Unlock()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		r.mu.Lock()
		done := true
		for p, gen := range gens {
			if !p.self && !p.down && (p.fullDone < gen || p.acked < target) {
				done = false
			}
		}
		r.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("handing the pushed series over to the peers: %w", ctx.Err())
		case <-t.C:
		}
	}
}

func (r *Replicator) storedEverywhereLocked(seq uint64) bool {
	for _, p := range r.byAddr {
		if !p.self && !p.down && p.acked < seq {
			return false
		}
	}
	return true
}

// holdLoop releases the holds whose time is up.
func (r *Replicator) holdLoop(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			r.mu.Lock()
			for _, w := range r.waiters {
				go w.release()
			}
			r.waiters = nil
			r.mu.Unlock()
			return
		case <-t.C:
			r.mu.Lock()
			r.checkWaitersLocked()
			r.mu.Unlock()
		}
	}
}

// Queued returns the samples queued for each peer (tests, metrics).
func (r *Replicator) Queued() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for a, p := range r.byAddr {
		out[a] = len(p.pending)
	}
	return out
}

// seriesKey identifies a series: its name and sorted labels.
func seriesKey(s *providers.Sample) string {
	keys := make([]string, 0, len(s.Labels))
	n := len(s.Name)
	for k, v := range s.Labels {
		keys = append(keys, k)
		n += len(k) + len(v) + 2
	}
	sort.Strings(keys)
	var b strings.Builder
	b.Grow(n)
	b.WriteString(s.Name)
	for _, k := range keys {
		b.WriteByte(0xff)
		b.WriteString(k)
		b.WriteByte(0xfe)
		b.WriteString(s.Labels[k])
	}
	return b.String()
}

// newerSample reports whether a's version is greater than b's (the
// store's order).
func newerSample(a, b *providers.Sample) bool {
	at, bt := a.Timestamp.UnixNano(), b.Timestamp.UnixNano()
	if at != bt {
		return at > bt
	}
	if a.Accepted != b.Accepted {
		return a.Accepted > b.Accepted
	}
	return a.Origin > b.Origin
}

type entry struct {
	s   providers.Sample
	seq uint64
}

// peer is one other replica: its queue and its sender's state, guarded by
// the replicator's mutex.
type peer struct {
	r    *Replicator
	addr string
	wake chan struct{}
	stop chan struct{}

	pending  map[string]entry
	maxSeq   uint64 // the last push queued
	acked    uint64 // every push up to it is stored by the peer
	fullGen  uint64 // asks for a full copy while fullGen > fullDone
	fullDone uint64
	down     bool      // the last attempt failed
	self     bool      // the address is this replica
	id       uint64    // the peer's replica id, 0 until it answered
	joined   time.Time // joined (JoinHeader) and not yet listed
}

func (p *peer) enqueueLocked(samples []providers.Sample, keys []string, seq uint64) {
	p.maxSeq = seq
	max := p.r.MaxQueuedSeries
	for i := range samples {
		if old, ok := p.pending[keys[i]]; ok {
			if newerSample(&samples[i], &old.s) {
				p.pending[keys[i]] = entry{s: samples[i], seq: seq}
			}
			continue
		}
		if max > 0 && len(p.pending) >= max {
			// The store holds every queued value (a push is stored before
			// it is queued): a full copy sends them all.
			telemetry.PushForwards.WithLabelValues("overflow").Inc()
			p.pending = map[string]entry{}
			p.fullGen++
			break
		}
		p.pending[keys[i]] = entry{s: samples[i], seq: seq}
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run drains the queue until the peer is gone.
func (p *peer) run(ctx context.Context) {
	backoff := minBackoff
	probe := time.NewTimer(0) // first contact at once: it learns the peer's id
	defer probe.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.stop:
			return
		case <-p.wake:
		case <-probe.C:
		}
		err := p.drain(ctx)
		r := p.r
		r.mu.Lock()
		wasDown := p.down
		p.down = err != nil
		self := p.self
		r.checkWaitersLocked()
		r.mu.Unlock()
		if self {
			klog.InfoS("Push peer is this replica; not forwarding to it", "peer", p.addr)
			return
		}
		if err != nil {
			if !wasDown {
				klog.ErrorS(err, "Forwarding to a push peer failed; retrying with backoff", "peer", p.addr)
			} else {
				klog.V(2).InfoS("Forwarding to a push peer failed again", "peer", p.addr, "err", err)
			}
			d := backoff/2 + mrand.N(backoff/2+1)
			backoff = min(backoff*2, maxBackoff)
			select {
			case <-ctx.Done():
				return
			case <-p.stop:
				return
			case <-time.After(d):
			}
			select { // retry now
			case p.wake <- struct{}{}:
			default:
			}
			continue
		}
		if wasDown {
			klog.InfoS("Push peer reachable again", "peer", p.addr)
		}
		backoff = minBackoff
		probe.Reset(probeInterval)
	}
}

// drain sends a full copy if one is due, then the queue, batch by batch,
// or an empty batch (a probe) when there is nothing to send.
func (p *peer) drain(ctx context.Context) error {
	r := p.r
	probed := false
	for {
		r.mu.Lock()
		if p.self {
			r.mu.Unlock()
			return nil
		}
		if p.fullGen > p.fullDone {
			gen, seq := p.fullGen, r.seq
			// what is queued is in the store, which the copy reads
			p.pending = map[string]entry{}
			r.mu.Unlock()
			if err := p.fullCopy(ctx); err != nil {
				r.mu.Lock()
				p.fullGen = max(p.fullGen, gen) // still due
				r.mu.Unlock()
				return err
			}
			r.mu.Lock()
			p.fullDone = gen
			p.acked = max(p.acked, seq)
			r.mu.Unlock()
			continue
		}
		if len(p.pending) == 0 {
			p.acked = max(p.acked, p.maxSeq)
			r.mu.Unlock()
			if probed {
				return nil
			}
			// a probe: learns the peer's id (a new one makes a full copy due)
			if err := p.send(ctx, nil); err != nil {
				return err
			}
			probed = true
			continue
		}
		batch := make([]entry, 0, min(len(p.pending), maxBatchSeries))
		size := 0
		for k, e := range p.pending {
			batch = append(batch, e)
			delete(p.pending, k)
			size += approxBytes(&e.s)
			if len(batch) == maxBatchSeries || size >= maxBatchBytes {
				break
			}
		}
		drained, upTo := len(p.pending) == 0, p.maxSeq
		r.mu.Unlock()
		samples := make([]providers.Sample, len(batch))
		for i := range batch {
			samples[i] = batch[i].s
		}
		err := p.send(ctx, samples)
		r.mu.Lock()
		if err != nil {
			var perm *permanentError
			if errors.As(err, &perm) {
				telemetry.PushForwards.WithLabelValues("dropped").Add(float64(len(batch)))
				klog.ErrorS(err, "A push peer refused a batch; dropped", "peer", p.addr, "series", len(batch))
			} else {
				// back in the queue unless a newer value took the place
				for _, e := range batch {
					k := seriesKey(&e.s)
					if cur, ok := p.pending[k]; !ok || newerSample(&e.s, &cur.s) {
						p.pending[k] = e
					}
				}
				r.mu.Unlock()
				return err
			}
		}
		if drained && len(p.pending) == 0 {
			p.acked = max(p.acked, upTo)
		}
		r.checkWaitersLocked()
		r.mu.Unlock()
		probed = true
	}
}

// fullCopy sends the whole local store to the peer.
func (p *peer) fullCopy(ctx context.Context) error {
	if p.r.source == nil {
		return nil
	}
	start := time.Now()
	n := 0
	err := p.r.source(maxBatchSeries, func(batch []providers.Sample) error {
		n += len(batch)
		return p.send(ctx, batch)
	})
	if err != nil {
		return fmt.Errorf("full copy to %s: %w", p.addr, err)
	}
	klog.InfoS("Sent a full copy of the pushed series to a peer", "peer", p.addr, "series", n, "took", time.Since(start))
	return nil
}

// permanentError is a batch the peer will never accept (400, 413).
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }

// wireSample is a versioned sample between replicas.
type wireSample struct {
	Name     string            `json:"n"`
	Labels   map[string]string `json:"l,omitempty"`
	Value    float64           `json:"v"`
	TS       int64             `json:"t"`
	Accepted int64             `json:"a"`
	Origin   uint64            `json:"o"`
	// Age is how long ago the sender last received the series (copies).
	Age int64 `json:"g,omitempty"`
}

type wireBatch struct {
	Samples []wireSample `json:"samples"`
}

func toWire(s *providers.Sample, now time.Time) wireSample {
	w := wireSample{Name: s.Name, Labels: s.Labels, Value: s.Value, TS: s.Timestamp.UnixNano(), Accepted: s.Accepted, Origin: s.Origin}
	if !s.Seen.IsZero() {
		w.Age = max(0, now.Sub(s.Seen).Nanoseconds())
	}
	return w
}

func fromWire(w *wireSample, now time.Time) (providers.Sample, error) {
	if math.IsNaN(w.Value) || math.IsInf(w.Value, 0) {
		return providers.Sample{}, fmt.Errorf("series %s: value is not finite", w.Name)
	}
	if w.TS <= 0 || w.Accepted <= 0 || w.Origin == 0 {
		return providers.Sample{}, fmt.Errorf("series %s: missing time, acceptance time or origin", w.Name)
	}
	s := providers.Sample{Name: w.Name, Labels: w.Labels, Value: w.Value, Timestamp: time.Unix(0, w.TS), Accepted: w.Accepted, Origin: w.Origin}
	if w.Age > 0 {
		s.Seen = now.Add(-time.Duration(w.Age))
	}
	return s, nil
}

func approxBytes(s *providers.Sample) int {
	n := 80 + len(s.Name)
	for k, v := range s.Labels {
		n += len(k) + len(v) + 6
	}
	return n
}

// send posts samples (none: a probe) and records the peer's id.
func (p *peer) send(ctx context.Context, samples []providers.Sample) error {
	now := time.Now()
	b := wireBatch{Samples: make([]wireSample, len(samples))}
	for i := range samples {
		b.Samples[i] = toWire(&samples[i], now)
	}
	body, err := json.Marshal(b)
	if err != nil {
		return &permanentError{fmt.Errorf("encoding a batch for %s: %w", p.addr, err)}
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.addr+ReplicatePath, bytes.NewReader(body))
	if err != nil {
		return &permanentError{fmt.Errorf("forwarding to %s: %w", p.addr, err)}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+p.r.token)
	req.Header.Set(ReplicaHeader, strconv.FormatUint(p.r.id, 10))
	resp, err := p.r.client.Do(req)
	if err != nil {
		telemetry.PushForwards.WithLabelValues("error").Inc()
		return fmt.Errorf("forwarding to %s: %w", p.addr, err)
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	resp.Body.Close()
	id, _ := strconv.ParseUint(resp.Header.Get(ReplicaHeader), 10, 64)
	if id != 0 {
		p.sawID(id)
	}
	switch {
	case resp.StatusCode == http.StatusNoContent:
		if len(samples) > 0 {
			telemetry.PushForwards.WithLabelValues("ok").Inc()
		}
		return nil
	case resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusRequestEntityTooLarge:
		telemetry.PushForwards.WithLabelValues("error").Inc()
		return &permanentError{fmt.Errorf("forwarding to %s: status %d: %s", p.addr, resp.StatusCode, sanitize(msg))}
	default:
		telemetry.PushForwards.WithLabelValues("error").Inc()
		return fmt.Errorf("forwarding to %s: status %d: %s", p.addr, resp.StatusCode, sanitize(msg))
	}
}

// sawID records the id a peer answered with: this replica's own marks the
// address as itself; a new one (first contact, or the peer restarted with
// an empty store) makes a full copy due.
func (p *peer) sawID(id uint64) {
	r := p.r
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case id == r.id:
		p.self = true
		p.pending = map[string]entry{}
	case id != p.id:
		if p.id != 0 {
			klog.InfoS("Push peer restarted; sending it a full copy", "peer", p.addr)
		}
		p.id = id
		p.fullGen++
	}
}

func sanitize(b []byte) string {
	s := strings.TrimSpace(string(b))
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// Ready reports whether the copy of the peers' state at start ended (or
// was given up); the adapter's readiness check.
func (r *Replicator) Ready() error {
	r.bootMu.Lock()
	defer r.bootMu.Unlock()
	if !r.booted {
		return errors.New("copying the pushed series from the other replicas")
	}
	return nil
}

// BootstrapNote says how the copy at start ended.
func (r *Replicator) BootstrapNote() string {
	r.bootMu.Lock()
	defer r.bootMu.Unlock()
	return r.bootNote
}

// bootstrap copies every reachable peer's store, within BootstrapWait.
// A peer that refuses connections runs no adapter (it has nothing to give);
// other failures are retried until the wait is over.
func (r *Replicator) bootstrap(ctx context.Context) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, r.BootstrapWait)
	defer cancel()
	var addrs []string
	for {
		a, err := r.peers.Addresses(ctx)
		if err == nil {
			addrs = a
			break
		}
		if !sleepCtx(ctx, time.Second) {
			r.bootDone(fmt.Sprintf("ready without a copy: the replicas could not be listed within %s: %v", r.BootstrapWait, err))
			return
		}
	}
	type result struct {
		addr   string
		series int
		err    error
		self   bool
	}
	results := make(chan result, len(addrs))
	for _, addr := range addrs {
		go func(addr string) {
			backoff := 200 * time.Millisecond
			for {
				n, self, err := r.copyFrom(ctx, addr)
				if err == nil || errors.Is(err, syscall.ECONNREFUSED) || ctx.Err() != nil {
					results <- result{addr, n, err, self}
					return
				}
				klog.V(2).InfoS("Copying a peer's series failed; retrying", "peer", addr, "err", err)
				if !sleepCtx(ctx, backoff) {
					results <- result{addr, n, err, false}
					return
				}
				backoff = min(backoff*2, 2*time.Second)
			}
		}(addr)
	}
	copied, total := 0, 0
	var failed []string
	for range addrs {
		res := <-results
		switch {
		case res.self:
		case res.err == nil:
			copied++
			total += res.series
		default:
			failed = append(failed, res.addr+": "+res.err.Error())
		}
	}
	var note string
	switch {
	case copied > 0:
		note = fmt.Sprintf("copied %d series from %d replica(s) in %s", total, copied, time.Since(start).Round(time.Millisecond))
	case len(failed) == 0:
		note = "no other replica: ready with what is pushed from now on"
	default:
		note = fmt.Sprintf("ready without a copy: no other replica answered within %s", r.BootstrapWait)
	}
	if len(failed) > 0 {
		klog.InfoS("Some replicas could not be copied", "failed", failed)
	}
	r.bootDone(note)
}

func (r *Replicator) bootDone(note string) {
	r.bootMu.Lock()
	r.booted, r.bootNote = true, note
	r.bootMu.Unlock()
	klog.InfoS("Push replication: state copy at start ended", "result", note)
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// copyFrom streams one peer's store into the local one.
func (r *Replicator) copyFrom(ctx context.Context, addr string) (int, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+ReplicatePath, nil)
	if err != nil {
		return 0, false, err
	}
	req.Header.Set("Authorization", "Bearer "+r.token)
	req.Header.Set(ReplicaHeader, strconv.FormatUint(r.id, 10))
	if r.Advertise != "" {
		req.Header.Set(JoinHeader, r.Advertise)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	if id, _ := strconv.ParseUint(resp.Header.Get(ReplicaHeader), 10, 64); id == r.id {
		return 0, true, nil
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return 0, false, fmt.Errorf("copying from %s: status %d: %s", addr, resp.StatusCode, sanitize(msg))
	}
	n := 0
	batch := make([]providers.Sample, 0, maxBatchSeries)
	flush := func() {
		if len(batch) > 0 {
			r.apply(batch)
			n += len(batch)
			batch = batch[:0]
		}
	}
	dec := json.NewDecoder(bufio.NewReader(resp.Body))
	now := time.Now()
	for {
		var w wireSample
		if err := dec.Decode(&w); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			flush()
			return n, false, fmt.Errorf("copying from %s: %w", addr, err)
		}
		s, err := fromWire(&w, now)
		if err != nil {
			continue
		}
		batch = append(batch, s)
		if len(batch) == maxBatchSeries {
			flush()
		}
	}
	flush()
	return n, false, nil
}

// apply stores replicated samples: as one batch, or one by one if the
// batch is refused (a series this replica's config does not route, say),
// so one bad series does not hold back the others. It returns the error of
// the batch if no sample could be stored.
func (r *Replicator) apply(samples []providers.Sample) error {
	r.observe(samples)
	err := r.sink.Append(samples)
	if err == nil || len(samples) == 1 {
		return err
	}
	refused := 0
	var first error
	for i := range samples {
		if err := r.sink.Append(samples[i : i+1]); err != nil {
			refused++
			if first == nil {
				first = err
			}
		}
	}
	if refused > 0 {
		klog.V(2).InfoS("Replicated series refused", "refused", refused, "of", len(samples), "err", first)
	}
	if refused == len(samples) {
		return first
	}
	return nil
}

// serveReplicate answers a peer: POST stores a batch, GET streams a copy.
func (h *Handler) serveReplicate(w http.ResponseWriter, req *http.Request) {
	r := h.Replicator
	if !h.authorized(req) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="metricscale-push"`)
		h.fail(w, req, http.StatusUnauthorized, "unauthorized: a valid bearer token is required")
		return
	}
	w.Header().Set(ReplicaHeader, strconv.FormatUint(r.id, 10))
	from, _ := strconv.ParseUint(req.Header.Get(ReplicaHeader), 10, 64)
	if from == r.id {
		w.WriteHeader(http.StatusNoContent) // this replica, through its own peer list
		return
	}
	switch req.Method {
	case http.MethodGet:
		select {
		case r.snapshots <- struct{}{}:
			defer func() { <-r.snapshots }()
		default:
			w.Header().Set("Retry-After", "1")
			h.fail(w, req, http.StatusTooManyRequests, "too many copies at once (at most %d): retry later", maxSnapshots)
			return
		}
		if addr := req.Header.Get(JoinHeader); addr != "" {
			if _, _, err := net.SplitHostPort(addr); err != nil || from == 0 {
				h.fail(w, req, http.StatusBadRequest, "%s %q: want host:port, with %s", JoinHeader, addr, ReplicaHeader)
				return
			}
			r.join(addr, from) // before the copy is read: nothing falls between
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
		enc := json.NewEncoder(w)
		now := time.Now()
		if r.source != nil {
			_ = r.source(maxBatchSeries, func(batch []providers.Sample) error {
				for i := range batch {
					if err := enc.Encode(toWire(&batch[i], now)); err != nil {
						return err
					}
				}
				return nil
			})
		}
	case http.MethodPost:
		if !h.admit(&h.replInflight, w, func(code int, msg string) { h.fail(w, req, code, "%s", msg) }, "batches") {
			return
		}
		defer h.replInflight.Add(-1)
		var b wireBatch
		if err := json.NewDecoder(http.MaxBytesReader(w, req.Body, h.maxBodyBytes)).Decode(&b); err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				h.fail(w, req, http.StatusRequestEntityTooLarge, "batch larger than %d bytes", h.maxBodyBytes)
				return
			}
			h.fail(w, req, http.StatusBadRequest, "invalid batch: %v", err)
			return
		}
		if len(b.Samples) == 0 { // a probe
			w.WriteHeader(http.StatusNoContent)
			return
		}
		now := time.Now()
		samples := make([]providers.Sample, 0, len(b.Samples))
		for i := range b.Samples {
			s, err := fromWire(&b.Samples[i], now)
			if err != nil {
				h.fail(w, req, http.StatusBadRequest, "invalid batch: %v", err)
				return
			}
			samples = append(samples, s)
		}
		if err := r.apply(samples); err != nil {
			if errors.Is(err, providers.ErrStoreFull) {
				h.fail(w, req, http.StatusInsufficientStorage, "not stored: %v", err)
				return
			}
			h.fail(w, req, http.StatusBadRequest, "not stored: %v", err)
			return
		}
		if h.OnAppend != nil {
			h.OnAppend()
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Allow", "GET, POST")
		h.fail(w, req, http.StatusMethodNotAllowed, "method %s not allowed", req.Method)
	}
}

// StoreSource reads, for full copies, the stores that stores returns (the
// memory providers of the current config).
func StoreSource(stores func() []*memory.Store) Source {
	return func(n int, fn func([]providers.Sample) error) error {
		for _, s := range stores() {
			if err := s.Snapshot(n, fn); err != nil {
				return err
			}
		}
		return nil
	}
}
