package feedclient

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"github.com/metricscale/metricscale/providers/changefeed"
)

// recorder is a Handler that logs what it is told, in order.
type recorder struct {
	mu  sync.Mutex
	log []string
	hit chan struct{}
}

func newRecorder() *recorder { return &recorder{hit: make(chan struct{}, 1000)} }

func (r *recorder) Changed(ev *changefeed.Event) {
	r.add(fmt.Sprintf("change %s %v", ev.Name, ev.Labels))
}
func (r *recorder) Resync() { r.add("resync") }
func (r *recorder) Covered(ev *changefeed.Event) {
	r.add(fmt.Sprintf("%s %s lease=%d maxAge=%d", ev.Type, ev.Name, ev.LeaseSeconds, ev.MaxAgeMillis))
}
func (r *recorder) add(s string) {
	r.mu.Lock()
	r.log = append(r.log, s)
	r.mu.Unlock()
	r.hit <- struct{}{}
}

// waitFor waits until the log has n entries and returns them.
func (r *recorder) waitFor(t *testing.T, n int) []string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		r.mu.Lock()
		if len(r.log) >= n {
			out := append([]string(nil), r.log...)
			r.mu.Unlock()
			return out
		}
		r.mu.Unlock()
		select {
		case <-r.hit:
		case <-timeout:
			r.mu.Lock()
			defer r.mu.Unlock()
			t.Fatalf("handler log %q, want %d entries", r.log, n)
		}
	}
}

// server serves scripted feeds: each connection runs the next script (the
// last one repeats); a script writes lines and returns to end the response.
type server struct {
	*httptest.Server
	conns   atomic.Int32
	scripts []func(w http.ResponseWriter, r *http.Request)
}

func newServer(t *testing.T, scripts ...func(w http.ResponseWriter, r *http.Request)) *server {
	t.Helper()
	s := &server{scripts: scripts}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(s.conns.Add(1)) - 1
		s.scripts[min(n, len(s.scripts)-1)](w, r)
	}))
	s.EnableHTTP2 = true
	s.StartTLS()
	return s
}

func lines(ls ...string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", changefeed.ContentType)
		for _, l := range ls {
			fmt.Fprintln(w, l)
			w.(http.Flusher).Flush()
		}
	}
}

// thenWait keeps the connection open, silent, until the client leaves.
func thenWait(f func(w http.ResponseWriter, r *http.Request)) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		f(w, r)
		<-r.Context().Done()
	}
}

func run(t *testing.T, s *server, h Handler) (*Client, func()) {
	t.Helper()
	c := New(s.URL+changefeed.Path, s.Client())
	c.MinBackoff, c.MaxBackoff = 10*time.Millisecond, 50*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx, h)
	}()
	return c, func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("Run did not return after its context ended")
		}
	}
}

const hello = `{"type":"hello","heartbeatSeconds":10}`

func TestEventsReachTheHandler(t *testing.T) {
	t.Parallel()
	s := newServer(t, thenWait(lines(
		`{"type":"hello","heartbeatSeconds":10,"replica":"5f0c9a1e7b2d4c38"}`,
		`{"type":"heartbeat"}`,
		`{"type":"change","name":"depth","labels":{"queue":"a"}}`,
		``,
		`{"type":"something-new","name":"x"}`,
		`{"type":"resync"}`,
		`{"type":"change","name":"lag","all":true}`,
		`{"type":"covered","kind":"external","name":"depth","leaseSeconds":120,"maxAgeMillis":1500}`,
		`{"type":"uncovered","kind":"external","name":"depth"}`,
	)))
	defer s.Close()
	rec := newRecorder()
	c, stop := run(t, s, rec)
	got := rec.waitFor(t, 6)
	want := []string{"resync", "change depth map[queue:a]", "resync", "change lag map[]", "covered depth lease=120 maxAge=1500", "uncovered depth lease=0 maxAge=0"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("handler heard %q, want %q", got, want)
	}
	if !c.Connected() {
		t.Error("not connected while the feed runs")
	}
	if !c.Live() {
		t.Error("not live right after events")
	}
	if r := c.Replica(); r != "5f0c9a1e7b2d4c38" {
		t.Errorf("replica %q, want the hello's", r)
	}
	stop()
	if c.Connected() {
		t.Error("still connected after Run returned")
	}
	if r := c.Replica(); r != "" {
		t.Errorf("replica %q after Run returned, want none", r)
	}
	if n := s.conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

func TestReconnectsAndResyncsEachTime(t *testing.T) {
	t.Parallel()
	// The feed ends after one change, three times, then stays.
	once := lines(hello, `{"type":"change","name":"depth","labels":{"queue":"a"}}`)
	s := newServer(t, once, once, once, thenWait(lines(hello)))
	defer s.Close()
	rec := newRecorder()
	_, stop := run(t, s, rec)
	defer stop()
	got := rec.waitFor(t, 7)
	want := "resync; change depth map[queue:a]; resync; change depth map[queue:a]; resync; change depth map[queue:a]; resync"
	if strings.Join(got, "; ") != want {
		t.Errorf("handler heard %q, want %q", got, want)
	}
}

func TestRefusedThenAccepted(t *testing.T) {
	t.Parallel()
	forbidden := func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `forbidden: User "x" cannot get path "/changes"`, http.StatusForbidden)
	}
	s := newServer(t, forbidden, forbidden, thenWait(lines(hello)))
	defer s.Close()
	rec := newRecorder()
	c := New(s.URL+changefeed.Path, s.Client())
	// The reason a connection fails, with the RBAC hint.
	_, err := c.stream(context.Background(), klog.Background(), rec, false)
	if err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "non-resource URL /changes") {
		t.Errorf("a refused feed: %v, want the 403 and the RBAC hint", err)
	}
	// Run retries until it is let in, then resyncs once.
	_, stop := run(t, s, rec)
	defer stop()
	if got := rec.waitFor(t, 1); got[0] != "resync" {
		t.Errorf("handler heard %q", got)
	}
	if n := s.conns.Load(); n != 3 {
		t.Errorf("%d connections, want 3 (two refused, then the feed)", n)
	}
}

func TestSilentConnectionIsDropped(t *testing.T) {
	t.Parallel()
	// Heartbeats every second promised, none sent: after three seconds of
	// silence the client gives up on the connection and opens another.
	s := newServer(t, thenWait(lines(`{"type":"hello","heartbeatSeconds":1}`)))
	defer s.Close()
	rec := newRecorder()
	_, stop := run(t, s, rec)
	defer stop()
	rec.waitFor(t, 2) // a resync per connection
	if n := s.conns.Load(); n < 2 {
		t.Errorf("%d connections, want a second one after the silence", n)
	}
}

func TestLiveOnlyWhileHeard(t *testing.T) {
	t.Parallel()
	// Heartbeats every 2 seconds promised, none sent: live for 3 seconds
	// after hello, connected for 6.
	s := newServer(t, thenWait(lines(`{"type":"hello","heartbeatSeconds":2}`)))
	defer s.Close()
	rec := newRecorder()
	c, stop := run(t, s, rec)
	defer stop()
	rec.waitFor(t, 1)
	if !c.Live() {
		t.Fatal("not live right after hello")
	}
	deadline := time.Now().Add(5 * time.Second)
	for c.Live() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if c.Live() || !c.Connected() {
		t.Errorf("after silence: live %v, connected %v; want not live while still connected", c.Live(), c.Connected())
	}
}

func TestTooLongLine(t *testing.T) {
	t.Parallel()
	long := `{"type":"change","name":"` + strings.Repeat("x", maxLine+10) + `"}`
	s := newServer(t, lines(hello, long))
	defer s.Close()
	rec := newRecorder()
	c := New(s.URL+changefeed.Path, s.Client())
	heard, err := c.stream(context.Background(), klog.Background(), rec, false)
	if !heard || err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("stream: heard %v, %v; want the hello heard, then the line refused", heard, err)
	}
}

// TestNoGoroutineLeft runs the client through connections, failures and
// its end, and counts goroutines before and after. Not parallel: other
// tests' goroutines would count.
func TestNoGoroutineLeft(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		once := lines(hello, `{"type":"change","name":"depth","all":true}`)
		forbidden := func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", http.StatusForbidden) }
		s := newServer(t, once, forbidden, thenWait(lines(hello)))
		defer s.Close()
		rec := newRecorder()
		c, stop := run(t, s, rec)
		rec.waitFor(t, 3)
		stop()
		c.client.CloseIdleConnections()
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= before {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines after the client ended, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
