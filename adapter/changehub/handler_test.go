package changehub

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/metricscale/metricscale/providers/changefeed"
)

// feedReader reads a feed's events in the background.
type feedReader struct {
	resp   *http.Response
	events chan changefeed.Event
	err    chan error
}

func openFeed(t *testing.T, ctx context.Context, client *http.Client, url string) *feedReader {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); ct != changefeed.ContentType {
		t.Errorf("Content-Type %q, want %q", ct, changefeed.ContentType)
	}
	f := &feedReader{resp: resp, events: make(chan changefeed.Event, 100), err: make(chan error, 1)}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var ev changefeed.Event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				f.err <- err
				return
			}
			f.events <- ev
		}
		f.err <- sc.Err()
		close(f.events)
	}()
	return f
}

// next returns the next event that is not a heartbeat, failing the test
// after a generous wait (the machine is shared: this is no latency check).
func (f *feedReader) next(t *testing.T, skipHeartbeats bool) changefeed.Event {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-f.events:
			if !ok {
				t.Fatalf("the feed ended: %v", <-f.err)
			}
			if skipHeartbeats && ev.Type == changefeed.TypeHeartbeat {
				continue
			}
			return ev
		case <-timeout:
			t.Fatal("no event from the feed")
		}
	}
}

func waitSubscribers(t *testing.T, h *Hub, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for h.Subscribers() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%d subscribers, want %d", h.Subscribers(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestHandlerStreams(t *testing.T) {
	t.Parallel()
	hub := New(Options{})
	srv := httptest.NewServer(hub.NameReplica(&Handler{Hub: hub, Heartbeat: 20 * time.Millisecond}))
	defer srv.Close() // waits for the handlers: a leaked one hangs the test

	ctx, cancel := context.WithCancel(context.Background())
	f := openFeed(t, ctx, srv.Client(), srv.URL)
	hello := f.next(t, false)
	if hello.Type != changefeed.TypeHello || hello.HeartbeatSeconds != 1 || len(hello.Replica) != 16 {
		t.Fatalf("first event %+v, want hello with heartbeatSeconds 1 and a replica name", hello)
	}
	if got := f.resp.Header.Get(changefeed.ReplicaHeader); got != hello.Replica {
		t.Errorf("%s %q, want the hello's replica %q", changefeed.ReplicaHeader, got, hello.Replica)
	}
	if other := New(Options{}).Replica(); other == hello.Replica {
		t.Errorf("two hubs are both replica %q", other)
	}
	// The subscription exists once hello is out.
	hub.Publish(series("depth", "queue", "a", "namespace", "shop"))
	ev := f.next(t, true)
	if ev.Type != changefeed.TypeChange || ev.Name != "depth" || ev.Namespace != "shop" || ev.Labels["queue"] != "a" {
		t.Fatalf("got %+v, want the change of depth{queue=a}", ev)
	}
	// An idle feed sends heartbeats.
	if ev := f.next(t, false); ev.Type != changefeed.TypeHeartbeat {
		t.Fatalf("idle feed sent %+v, want a heartbeat", ev)
	}
	// The client leaves: the handler returns and the subscription goes.
	cancel()
	waitSubscribers(t, hub, 0)
}

func TestHandlerEndsWithTheHub(t *testing.T) {
	t.Parallel()
	hub := New(Options{})
	srv := httptest.NewServer(&Handler{Hub: hub})
	defer srv.Close()
	f := openFeed(t, context.Background(), srv.Client(), srv.URL)
	f.next(t, false)
	hub.Close()
	select {
	case _, ok := <-f.events:
		if ok {
			// drain whatever was in flight
			for range f.events {
			}
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the feed did not end when the hub closed")
	}
	if err := <-f.err; err != nil {
		t.Errorf("the feed ended with %v, want a clean end", err)
	}
}

func TestHandlerRefusesOtherMethods(t *testing.T) {
	t.Parallel()
	hub := New(Options{})
	srv := httptest.NewServer(&Handler{Hub: hub})
	defer srv.Close()
	resp, err := srv.Client().Post(srv.URL, "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET" {
		t.Errorf("POST: %s %q, want 405 with Allow: GET", resp.Status, body)
	}
	if n := hub.Subscribers(); n != 0 {
		t.Errorf("a refused request left %d subscribers", n)
	}
}

// TestHandlerHTTP2IdleStream checks that a write deadline does not outlive
// its write: an HTTP/2 stream whose deadline passes is reset even when
// idle, which would cut every quiet feed.
func TestHandlerHTTP2IdleStream(t *testing.T) {
	t.Parallel()
	hub := New(Options{})
	srv := httptest.NewUnstartedServer(&Handler{Hub: hub, Heartbeat: time.Hour, WriteTimeout: 50 * time.Millisecond})
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // before Close, which waits for the handler
	f := openFeed(t, ctx, srv.Client(), srv.URL)
	if f.resp.ProtoMajor != 2 {
		t.Fatalf("protocol %s, want HTTP/2", f.resp.Proto)
	}
	f.next(t, false)
	time.Sleep(300 * time.Millisecond) // well past the write deadline, no heartbeat due
	hub.Publish(series("late"))
	if ev := f.next(t, false); ev.Name != "late" {
		t.Fatalf("got %+v, want the change of late", ev)
	}
}

// TestHandlerCapsSubscribers: beyond MaxSubscribers a request is a 503
// with Retry-After and subscribes nothing; a closed feed frees its place.
func TestHandlerCapsSubscribers(t *testing.T) {
	t.Parallel()
	hub := New(Options{})
	srv := httptest.NewServer(&Handler{Hub: hub, Heartbeat: time.Hour, MaxSubscribers: 2})
	defer srv.Close()
	open := func() (*http.Response, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp, cancel
	}
	var cancels []context.CancelFunc
	for i := 0; i < 2; i++ {
		resp, cancel := open()
		cancels = append(cancels, cancel)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("subscriber %d: %s", i, resp.Status)
		}
		// the hello line proves the subscription is open
		if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
	}
	resp, cancel := open()
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	cancel()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "2 subscribers") {
		t.Errorf("third subscriber: %s %q, want 503 with Retry-After", resp.Status, body)
	}
	if n := hub.Subscribers(); n != 2 {
		t.Errorf("%d subscribers, want 2", n)
	}
	cancels[0]()
	// the first place frees once its handler returns; poll the hub, no timing assertion
	for hub.Subscribers() != 1 {
		time.Sleep(time.Millisecond)
	}
	for {
		resp, cancel := open()
		ok := resp.StatusCode == http.StatusOK
		resp.Body.Close()
		cancel()
		if ok {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancels[1]()
}
