package push

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/memory"
	"github.com/metricscale/metricscale/providers/push/replicationtest"
)

const testToken = "tok"

// listPeers is a peer list a test changes.
type listPeers struct {
	mu    sync.Mutex
	addrs []string
}

func (l *listPeers) Addresses(context.Context) ([]string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.addrs...), nil
}

func (l *listPeers) set(addrs ...string) {
	l.mu.Lock()
	l.addrs = addrs
	l.mu.Unlock()
}

// replica is one adapter's push side: a real memory store behind the real
// handler and replicator, on a loopback server whose handler a restart
// replaces.
type replica struct {
	t      *testing.T
	store  *memory.Store
	h      *Handler
	r      *Replicator
	peers  *listPeers
	srv    *httptest.Server
	cur    atomic.Pointer[http.Handler]
	cancel context.CancelFunc
}

func newReplica(t *testing.T) *replica {
	t.Helper()
	rp := &replica{t: t, peers: &listPeers{}}
	rp.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		(*rp.cur.Load()).ServeHTTP(w, r)
	}))
	t.Cleanup(rp.srv.Close)
	rp.reset()
	return rp
}

// proxyTo puts a fault-injecting proxy in front of r, closed when the test ends.
func proxyTo(t *testing.T, r *replica) *replicationtest.Proxy {
	t.Helper()
	px, err := replicationtest.NewProxy(r.addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.Close)
	return px
}

// reset gives the replica a new, empty store and replicator (a restart).
func (rp *replica) reset() {
	if rp.cancel != nil {
		rp.cancel()
	}
	rp.store = memory.NewStore(clock.RealClock{}, time.Hour, 0)
	h, err := NewHandler(rp.store, testToken, 0)
	if err != nil {
		rp.t.Fatal(err)
	}
	rp.h = h
	rp.r = NewReplicator(rp.peers, testToken, rp.store, rp.store.Snapshot)
	h.Replicator = rp.r
	var mux http.Handler = h.Mux()
	rp.cur.Store(&mux)
}

func (rp *replica) start() {
	ctx, cancel := context.WithCancel(context.Background())
	rp.cancel = cancel
	rp.t.Cleanup(cancel)
	rp.r.Start(ctx)
}

func (rp *replica) addr() string { return strings.TrimPrefix(rp.srv.URL, "http://") }

func (rp *replica) push(body string) {
	rp.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, rp.srv.URL+"/push", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		rp.t.Fatalf("push: %v", err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		rp.t.Fatalf("push %q: %d %s", body, resp.StatusCode, msg)
	}
}

// values returns the stored value of each series, by "name{labels}".
func values(s *memory.Store) map[string]float64 {
	out := map[string]float64{}
	_ = s.Snapshot(100, func(b []providers.Sample) error {
		for _, smp := range b {
			out[smp.Name+" "+fmt.Sprint(smp.Labels)] = smp.Value
		}
		return nil
	})
	return out
}

// eventually polls cond until it holds or a generous deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not so after 30s: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// delivered reports whether every push queued at rp reached the peer at
// addr.
func (rp *replica) delivered(addr string) bool {
	rp.r.mu.Lock()
	defer rp.r.mu.Unlock()
	p := rp.r.byAddr[addr]
	return p != nil && len(p.pending) == 0 && p.acked >= rp.r.seq && p.fullDone >= p.fullGen
}

func TestForwardingReachesEveryReplicaOnce(t *testing.T) {
	t.Parallel()
	var rs []*replica
	for range 3 {
		rs = append(rs, newReplica(t))
	}
	for i, r := range rs {
		var addrs []string
		for j, o := range rs {
			if j != i {
				addrs = append(addrs, o.addr())
			}
		}
		r.peers.set(addrs...)
		r.start()
	}
	rs[0].push("q{queue=\"a\"} 1\n")
	eventually(t, "every replica stores the series", func() bool {
		for _, r := range rs {
			if fmt.Sprint(values(r.store)) != "map[q map[queue:a]:1]" {
				return false
			}
		}
		return true
	})
	// nothing bounces back: the receivers queued nothing
	for i, r := range rs[1:] {
		for a, n := range r.r.Queued() {
			if n != 0 {
				t.Errorf("replica %d queued %d series for %s: a replicated push was sent on", i+1, n, a)
			}
		}
	}
}

// TestSlowForwardDoesNotWinOverANewerPush is defect 1: v=1 to A, then v=2
// to B while A's forward to B is slow. B stamped the late forward with its
// arrival time and served 1 until the next push; with versions from the
// first replica both serve 2.
func TestSlowForwardDoesNotWinOverANewerPush(t *testing.T) {
	t.Parallel()
	a, b := newReplica(t), newReplica(t)
	slow := proxyTo(t, b)
	slow.Set(replicationtest.Faults{Delay: 300 * time.Millisecond})
	a.peers.set(slow.Addr())
	b.peers.set(a.addr())
	a.start()
	b.start()
	a.push("q 1\n")
	time.Sleep(50 * time.Millisecond)
	b.push("q 2\n")
	eventually(t, "A's forward reached B", func() bool { return a.delivered(slow.Addr()) })
	eventually(t, "B's forward reached A", func() bool { return b.delivered(a.addr()) })
	for name, rp := range map[string]*replica{"A": a, "B": b} {
		if got := values(rp.store)["q map[]"]; got != 2 {
			t.Errorf("replica %s serves %v, want 2 (the newest push)", name, got)
		}
	}
}

// TestRefusedForwardsAreRetried is defect 1: a peer answering 429 lost the
// forward for good.
func TestRefusedForwardsAreRetried(t *testing.T) {
	t.Parallel()
	a, b := newReplica(t), newReplica(t)
	px := proxyTo(t, b)
	px.Set(replicationtest.Faults{TooMany: 1})
	a.peers.set(px.Addr())
	a.start()
	b.start()
	for i := range 50 {
		a.push(fmt.Sprintf("q{i=\"%d\"} %d\n", i, i))
	}
	eventually(t, "the peer refused a few attempts", func() bool { return px.Counts().TooMany >= 3 })
	if n := len(values(b.store)); n != 0 {
		t.Fatalf("B stores %d series while every forward was refused", n)
	}
	px.Set(replicationtest.Faults{DropAfter: 0.3, DropBefore: 0.3})
	eventually(t, "B stores the 50 series", func() bool { return len(values(b.store)) == 50 })
	px.Set(replicationtest.Faults{})
	eventually(t, "A's queue for B is empty", func() bool { return a.delivered(px.Addr()) })
	want, got := values(a.store), values(b.store)
	if fmt.Sprint(want) != fmt.Sprint(got) {
		t.Errorf("B = %v, want A's %v", got, want)
	}
}

// hungListener accepts connections, reads them and never answers.
type hungListener struct {
	ln       net.Listener
	accepted atomic.Int64
	mu       sync.Mutex
	conns    []net.Conn
}

func newHungListener(t *testing.T) *hungListener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hungListener{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.accepted.Add(1)
			h.mu.Lock()
			h.conns = append(h.conns, c)
			h.mu.Unlock()
			go func() { _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		h.mu.Lock()
		for _, c := range h.conns {
			c.Close()
		}
		h.mu.Unlock()
	})
	return h
}

// TestHungPeerCostsBoundedConnectionsAndGoroutines is defect 2: a peer that
// accepts TCP and never answers left a connection and goroutines per push.
// Not parallel: it counts the process' goroutines.
func TestHungPeerCostsBoundedConnectionsAndGoroutines(t *testing.T) {
	hung := newHungListener(t)
	a := newReplica(t)
	a.peers.set(hung.ln.Addr().String())
	a.h.MaxInflight = 16 // the 8 pushers below never get 429
	a.start()
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 8, MaxIdleConnsPerHost: 8}}
	defer client.CloseIdleConnections()
	before := runtime.NumGoroutine()
	var wg sync.WaitGroup
	var failed atomic.Int64
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 250 {
				req, _ := http.NewRequest(http.MethodPost, a.srv.URL+"/push", strings.NewReader(fmt.Sprintf("q{s=\"%d\"} %d\n", i%100, w*1000+i)))
				req.Header.Set("Authorization", "Bearer "+testToken)
				req.Header.Set("Content-Type", "text/plain")
				resp, err := client.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusNoContent {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Errorf("%d of 2,000 pushes failed", n)
	}
	if n := hung.accepted.Load(); n > DefaultMaxConnsPerPeer {
		t.Errorf("%d connections to the hung peer, want at most %d", n, DefaultMaxConnsPerPeer)
	}
	// 8 client and 8 server connection goroutines, the sender, slack
	if n := runtime.NumGoroutine() - before; n > 40 {
		t.Errorf("%d more goroutines after 2,000 pushes to a replica with a hung peer, want at most 40", n)
	}
	if q := a.r.Queued()[hung.ln.Addr().String()]; q > 100 {
		t.Errorf("%d series queued for the hung peer, want at most the 100 series pushed (coalesced)", q)
	}
}

// TestQueueOverflowFallsBackToAFullCopy: a queue past its bound is dropped
// and the peer gets the whole store instead, so nothing is lost.
func TestQueueOverflowFallsBackToAFullCopy(t *testing.T) {
	t.Parallel()
	a, b := newReplica(t), newReplica(t)
	px := proxyTo(t, b)
	px.Set(replicationtest.Faults{Partitioned: true})
	a.r.MaxQueuedSeries = 10
	a.peers.set(px.Addr())
	a.start()
	b.start()
	for i := range 40 {
		a.push(fmt.Sprintf("q{i=\"%d\"} %d\n", i, i))
	}
	if q := a.r.Queued()[px.Addr()]; q > 10 {
		t.Errorf("%d series queued, want at most 10", q)
	}
	px.Set(replicationtest.Faults{})
	eventually(t, "B stores the 40 series", func() bool { return len(values(b.store)) == 40 })
}

// TestNewReplicaCopiesStateBeforeReady is defect 1: a new replica reported
// ready empty. It copies a peer's store first; its own address in the
// list is skipped.
func TestNewReplicaCopiesStateBeforeReady(t *testing.T) {
	t.Parallel()
	a := newReplica(t)
	a.start()
	var body strings.Builder
	for i := range 500 {
		fmt.Fprintf(&body, "q{i=\"%d\"} %d\n", i, i)
	}
	a.push(body.String())
	slow := proxyTo(t, a)
	slow.Set(replicationtest.Faults{Delay: 200 * time.Millisecond})
	b := newReplica(t)
	b.peers.set(slow.Addr(), b.addr())
	b.start()
	if err := b.r.Ready(); err == nil {
		t.Fatal("ready before the copy")
	}
	for b.r.Ready() != nil {
		time.Sleep(5 * time.Millisecond)
	}
	if n := len(values(b.store)); n != 500 {
		t.Errorf("ready with %d series, want A's 500", n)
	}
	if note := b.r.BootstrapNote(); !strings.Contains(note, "copied 500 series from 1 replica") {
		t.Errorf("note %q", note)
	}
	eventually(t, "B knows its own address is itself", func() bool {
		b.r.mu.Lock()
		defer b.r.mu.Unlock()
		p := b.r.byAddr[b.addr()]
		return p == nil || p.self
	})
}

// TestBootstrapWaitIsBounded: with only a hung peer, a replica gets ready
// after BootstrapWait and says it has no copy.
func TestBootstrapWaitIsBounded(t *testing.T) {
	t.Parallel()
	hung := newHungListener(t)
	b := newReplica(t)
	b.r.BootstrapWait = 300 * time.Millisecond
	b.peers.set(hung.ln.Addr().String())
	b.start()
	eventually(t, "ready", func() bool { return b.r.Ready() == nil })
	if note := b.r.BootstrapNote(); !strings.Contains(note, "without a copy") {
		t.Errorf("note %q, want it to say there is no copy", note)
	}
}

// TestRestartedPeerGetsAFullCopy: a peer that comes back empty (a new id)
// is sent the whole store, even without copying it itself.
func TestRestartedPeerGetsAFullCopy(t *testing.T) {
	t.Parallel()
	a, b := newReplica(t), newReplica(t)
	a.peers.set(b.addr())
	a.start()
	b.start()
	for i := range 20 {
		a.push(fmt.Sprintf("q{i=\"%d\"} %d\n", i, i))
	}
	eventually(t, "B stores the 20 series", func() bool { return len(values(b.store)) == 20 })
	b.reset() // B lists no peer, so it copies nothing at start
	b.start()
	eventually(t, "restarted B stores the 20 series again", func() bool { return len(values(b.store)) == 20 })
}

func TestParseStaticPeers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want, err string
	}{
		{"http://10.0.0.1:6445,10.0.0.2:6445, http://a.b:1/", "[10.0.0.1:6445 10.0.0.2:6445 a.b:1]", ""},
		{"http://x:1,http://x:1", "[x:1]", ""},
		{"https://x:1", "", "plain http"},
		{"http://x", "", "want http://host:port"},
		{"http://x:1/push", "", "host and port only"},
		{"x:99999", "", "not a port"},
		{" , ", "", "names no peer"},
	}
	for _, tc := range tests {
		got, err := ParseStaticPeers(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != tc.want {
			t.Errorf("%q = %v %v, want %s", tc.in, got, err, tc.want)
		}
	}
}

func TestDNSPeers(t *testing.T) {
	t.Parallel()
	calls := 0
	d := &DNSPeers{Host: "peers.svc", Port: 6445, SelfIP: "10.0.0.2", resolve: func(_ context.Context, host string) ([]string, error) {
		calls++
		if host != "peers.svc" {
			return nil, errors.New("wrong host")
		}
		return []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}, nil
	}}
	for i := 0; i < 3; i++ {
		got, err := d.Addresses(context.Background())
		if err != nil || fmt.Sprint(got) != "[10.0.0.1:6445 10.0.0.3:6445]" {
			t.Fatalf("addresses = %v %v", got, err)
		}
	}
	if calls != 1 {
		t.Errorf("resolved %d times, want 1 (cached)", calls)
	}
}

// TestReplicateNeedsTheToken: the endpoint between replicas is behind the
// push token, both ways.
func TestReplicateNeedsTheToken(t *testing.T) {
	t.Parallel()
	a := newReplica(t)
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		req, _ := http.NewRequest(method, a.srv.URL+ReplicatePath, strings.NewReader(`{"samples":[]}`))
		req.Header.Set("Authorization", "Bearer wrong")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s with a wrong token: %d, want 401", method, resp.StatusCode)
		}
	}
}

// TestHoldCoversForwarding checks the change-feed hold: taken before a push
// to replicate is stored, released only once the peer stored it, released
// at once for a refused push, never taken for a push an earlier version
// forwarded.
func TestHoldCoversForwarding(t *testing.T) {
	t.Parallel()
	b := newReplica(t)
	b.start()
	px := proxyTo(t, b)
	a := newReplica(t)
	a.peers.set(px.Addr())
	a.r.HoldMax = time.Hour
	a.start()
	eventually(t, "A reached B once", func() bool { return a.delivered(px.Addr()) })
	px.Set(replicationtest.Faults{Delay: 500 * time.Millisecond})

	var mu sync.Mutex
	holds, releases := 0, 0
	released := make(chan struct{}, 10)
	a.h.Hold = func() func() {
		mu.Lock()
		holds++
		mu.Unlock()
		return func() {
			mu.Lock()
			releases++
			mu.Unlock()
			released <- struct{}{}
		}
	}
	counts := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return holds, releases
	}
	push := func(body string, forwarded bool) int {
		req := httptest.NewRequest(http.MethodPost, "/push", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("Content-Type", "text/plain")
		if forwarded {
			req.Header.Set(ForwardedHeader, "1")
		}
		rec := httptest.NewRecorder()
		a.h.ServeHTTP(rec, req)
		return rec.Code
	}

	if code := push("q 1\n", false); code != http.StatusNoContent {
		t.Fatalf("push: %d", code)
	}
	if hs, rs := counts(); hs != 1 || rs != 0 {
		t.Fatalf("while the peer has not stored it: %d holds, %d releases; want 1, 0", hs, rs)
	}
	select {
	case <-released:
	case <-time.After(30 * time.Second):
		t.Fatal("the hold was not released once the peer stored the push")
	}
	if got := values(b.store)["q map[]"]; got != 1 {
		t.Errorf("released before the peer stored the push (it serves %v)", got)
	}
	if code := push("not a valid line {\n", false); code != http.StatusBadRequest {
		t.Fatalf("invalid push: %d", code)
	}
	if hs, rs := counts(); hs != 2 || rs != 2 {
		t.Errorf("after a refused push: %d holds, %d releases; want 2, 2", hs, rs)
	}
	if code := push("q 2\n", true); code != http.StatusNoContent {
		t.Fatalf("forwarded push: %d", code)
	}
	if hs, _ := counts(); hs != 2 {
		t.Errorf("a push from a peer took a hold (%d holds, want 2)", hs)
	}
}

// TestFlushWaitsForInFlightForwards: a stopping replica's last pushes reach
// the peers before it stops serving reads (issue 27: a reader that moved to
// the other replica read 183 after 184).
func TestFlushWaitsForInFlightForwards(t *testing.T) {
	t.Parallel()
	a, b := newReplica(t), newReplica(t)
	slow := proxyTo(t, b)
	a.peers.set(slow.Addr())
	a.start()
	eventually(t, "A met B", func() bool { return a.delivered(slow.Addr()) })
	slow.Set(replicationtest.Faults{Delay: 300 * time.Millisecond})
	a.push("q 7\n")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.r.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if got, ok := values(b.store)["q map[]"]; !ok || got != 7 {
		t.Errorf("after A's Flush, B serves %v (present %v), want 7", got, ok)
	}
}

// TestFlushIsBounded: a hung peer holds a flush only until its context ends.
func TestFlushIsBounded(t *testing.T) {
	t.Parallel()
	a, b := newReplica(t), newReplica(t)
	px := proxyTo(t, b)
	a.peers.set(px.Addr())
	a.start()
	eventually(t, "A met B", func() bool { return a.delivered(px.Addr()) })
	px.Set(replicationtest.Faults{Hang: true})
	a.push("q 1\n")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := a.r.Flush(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Flush with a hung peer: %v, want the context's deadline", err)
	}
}

// TestFlushHandsOverForwardedValues: a value this replica received from a
// third replica and served reaches the others before Flush returns, even
// if the third replica's own forward to them is slow.
func TestFlushHandsOverForwardedValues(t *testing.T) {
	t.Parallel()
	a, b := newReplica(t), newReplica(t)
	a.peers.set(b.addr())
	a.start()
	eventually(t, "A met B", func() bool { return a.delivered(b.addr()) })
	// As a forward from a third replica: stored at A, queued to nobody.
	s := []providers.Sample{{Name: "q", Value: 9, Timestamp: time.Now(), Accepted: time.Now().UnixNano(), Origin: 12345}}
	if err := a.store.Append(s); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.r.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if got, ok := values(b.store)["q map[]"]; !ok || got != 9 {
		t.Errorf("after A's Flush, B serves %v (present %v), want 9", got, ok)
	}
}

// TestJoinBeforeThePeerListNamesIt: a new replica that copies a peer's
// store is forwarded that peer's later pushes at once, although the
// peer's own list (DNS, cached) does not name it yet; the peer keeps it
// through joinGrace and drops it after, if no list ever names it.
func TestJoinBeforeThePeerListNamesIt(t *testing.T) {
	t.Parallel()
	a := newReplica(t) // lists no peer: its DNS answer is stale
	a.start()
	a.push("q 1\n")
	n := newReplica(t)
	n.r.Advertise = n.addr()
	n.peers.set(a.addr())
	n.start()
	eventually(t, "N ready", func() bool { return n.r.Ready() == nil })
	if got := values(n.store)["q map[]"]; got != 1 {
		t.Fatalf("N copied q=%v, want 1", got)
	}
	a.push("q 2\n")
	eventually(t, "A's push after the copy reaches N", func() bool { return values(n.store)["q map[]"] == 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.r.Flush(ctx); err != nil {
		t.Fatalf("A's flush: %v", err)
	}
	a.r.refresh(ctx) // the list still does not name N
	known := func() bool {
		a.r.mu.Lock()
		defer a.r.mu.Unlock()
		return a.r.byAddr[n.addr()] != nil
	}
	if !known() {
		t.Fatal("A dropped the joined N at its next refresh")
	}
	a.r.mu.Lock()
	a.r.now = func() time.Time { return time.Now().Add(joinGrace + time.Second) }
	a.r.mu.Unlock()
	a.r.refresh(ctx)
	if known() {
		t.Error("A keeps a joined peer that no list named within joinGrace")
	}
}

// TestJoinNeedsAnAddressAndAnID: a join header that is not host:port, or
// comes without the replica id, is a 400 and joins nothing.
func TestJoinNeedsAnAddressAndAnID(t *testing.T) {
	t.Parallel()
	a := newReplica(t)
	a.start()
	for _, tc := range []struct{ join, id string }{
		{"not-an-address", "7"},
		{"10.0.0.9:6445", ""},
	} {
		req, _ := http.NewRequest(http.MethodGet, a.srv.URL+ReplicatePath, nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set(JoinHeader, tc.join)
		if tc.id != "" {
			req.Header.Set(ReplicaHeader, tc.id)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(msg), JoinHeader) {
			t.Errorf("join %q id %q: %d %s; want 400 naming %s", tc.join, tc.id, resp.StatusCode, msg, JoinHeader)
		}
	}
	a.r.mu.Lock()
	defer a.r.mu.Unlock()
	if len(a.r.byAddr) != 0 {
		t.Errorf("peers after refused joins: %d, want 0", len(a.r.byAddr))
	}
}
