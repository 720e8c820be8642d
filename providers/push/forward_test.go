package push

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestForwardingReachesEveryReplicaOnce(t *testing.T) {
	t.Parallel()
	const token = "tok"
	type replica struct {
		sink *recordingSink
		h    *Handler
		srv  *httptest.Server
	}
	var rs []*replica
	for i := 0; i < 3; i++ {
		sink := &recordingSink{}
		h, err := NewHandler(sink, token, 0)
		if err != nil {
			t.Fatal(err)
		}
		r := &replica{sink: sink, h: h}
		r.srv = httptest.NewServer(h.Mux())
		defer r.srv.Close()
		rs = append(rs, r)
	}
	for i, r := range rs {
		var peers StaticPeers
		for j, o := range rs {
			if j != i {
				peers = append(peers, strings.TrimPrefix(o.srv.URL, "http://"))
			}
		}
		r.h.Forwarder = NewForwarder(peers, token, "http", nil)
	}
	req, _ := http.NewRequest(http.MethodPost, rs[0].srv.URL+"/push", strings.NewReader("q{queue=\"a\"} 1\n"))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("push: %v %v", resp, err)
	}
	resp.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		counts := make([]int, len(rs))
		for i, r := range rs {
			r.sink.mu.Lock()
			counts[i] = len(r.sink.samples)
			r.sink.mu.Unlock()
		}
		if fmt.Sprint(counts) == "[1 1 1]" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("samples per replica = %v, want [1 1 1]", counts)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// nothing bounces back: still one sample each a moment later
	time.Sleep(200 * time.Millisecond)
	for i, r := range rs {
		r.sink.mu.Lock()
		if n := len(r.sink.samples); n != 1 {
			t.Errorf("replica %d has %d samples: a forwarded push was forwarded again", i, n)
		}
		r.sink.mu.Unlock()
	}
}

func TestForwardingFailuresAreBoundedAndReported(t *testing.T) {
	t.Parallel()
	// a peer that never answers and one that refuses the token
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // then the server notices the client hanging up
		<-r.Context().Done()
	}))
	defer hang.Close()
	h, _ := NewHandler(&recordingSink{}, "other-token", 0)
	refuse := httptest.NewServer(h.Mux())
	defer refuse.Close()
	f := NewForwarder(StaticPeers{strings.TrimPrefix(hang.URL, "http://"), strings.TrimPrefix(refuse.URL, "http://")}, "tok", "http", nil)
	f.timeout = 300 * time.Millisecond
	var wg sync.WaitGroup
	wg.Add(1)
	start := time.Now()
	f.Forward("text/plain", []byte("q 1\n"), wg.Done)
	wg.Wait()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("forwarding took %s despite the 300ms timeout", d)
	}
	if err := f.send(context.Background(), strings.TrimPrefix(refuse.URL, "http://"), "text/plain", []byte("q 1\n")); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("refused forward: %v", err)
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

// TestHoldCoversForwarding checks the change-feed hold: taken before a push
// to forward is stored, released only once every peer answered, released
// at once for a refused push, never taken for a push a peer forwarded.
func TestHoldCoversForwarding(t *testing.T) {
	t.Parallel()
	const token = "tok"
	answer := make(chan struct{})
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		<-answer
		w.WriteHeader(http.StatusNoContent)
	}))
	defer peer.Close()
	sink := &recordingSink{}
	h, err := NewHandler(sink, token, 0)
	if err != nil {
		t.Fatal(err)
	}
	h.Forwarder = NewForwarder(StaticPeers{strings.TrimPrefix(peer.URL, "http://")}, token, "http", nil)
	var mu sync.Mutex
	holds, releases := 0, 0
	released := make(chan struct{}, 10)
	h.Hold = func() func() {
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
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "text/plain")
		if forwarded {
			req.Header.Set(ForwardedHeader, "1")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}

	if code := push("q 1\n", false); code != http.StatusNoContent {
		t.Fatalf("push: %d", code)
	}
	if hs, rs := counts(); hs != 1 || rs != 0 {
		t.Fatalf("while the peer has not answered: %d holds, %d releases; want 1, 0", hs, rs)
	}
	close(answer)
	select {
	case <-released:
	case <-time.After(30 * time.Second):
		t.Fatal("the hold was not released once the peer answered")
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
