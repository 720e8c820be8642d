// Package replicationtest holds what the tests of push replication share:
// a fault-injecting HTTP proxy to put between replicas.
package replicationtest

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Faults are what a Proxy does to the requests it relays. Probabilities
// are between 0 and 1.
type Faults struct {
	// Delay and Jitter: each request waits Delay plus up to Jitter before
	// it is relayed; random jitter reorders concurrent requests.
	Delay, Jitter time.Duration
	// DropBefore: the connection is closed without relaying the request.
	DropBefore float64
	// DropAfter: the request is relayed, its answer lost (the connection
	// closed instead).
	DropAfter float64
	// TooMany: answered 429 with Retry-After, not relayed.
	TooMany float64
	// Hang: the request is read and never answered (until the client gives
	// up or the proxy closes).
	Hang bool
	// Partitioned: every connection is closed at once.
	Partitioned bool
}

// Counts are what a Proxy did.
type Counts struct {
	Requests, Relayed, Dropped, TooMany, Hung int64
}

// Proxy relays HTTP requests to one target, injecting Faults.
type Proxy struct {
	Target string // host:port

	ln     net.Listener
	srv    *http.Server
	client *http.Client
	closed chan struct{}
	once   sync.Once

	mu     sync.Mutex
	faults Faults

	requests, relayed, dropped, tooMany, hung atomic.Int64
	// Open counts the connections open from clients now; MaxOpen the most.
	open, maxOpen atomic.Int64
}

// NewProxy listens on a loopback port and relays to target.
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Target: target, ln: ln, closed: make(chan struct{}),
		client: &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8, DisableCompression: true}}}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second, ConnState: p.connState}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Set replaces the faults.
func (p *Proxy) Set(f Faults) {
	p.mu.Lock()
	p.faults = f
	p.mu.Unlock()
}

// Counts returns what the proxy did so far.
func (p *Proxy) Counts() Counts {
	return Counts{Requests: p.requests.Load(), Relayed: p.relayed.Load(), Dropped: p.dropped.Load(), TooMany: p.tooMany.Load(), Hung: p.hung.Load()}
}

// OpenConns returns the client connections open now and the most open at
// once.
func (p *Proxy) OpenConns() (now, peak int64) { return p.open.Load(), p.maxOpen.Load() }

func (p *Proxy) connState(_ net.Conn, s http.ConnState) {
	switch s {
	case http.StateNew:
		n := p.open.Add(1)
		for {
			m := p.maxOpen.Load()
			if n <= m || p.maxOpen.CompareAndSwap(m, n) {
				break
			}
		}
	case http.StateClosed, http.StateHijacked:
		p.open.Add(-1)
	}
}

// Close stops the proxy, ending hung requests.
func (p *Proxy) Close() {
	p.once.Do(func() {
		close(p.closed)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = p.srv.Shutdown(ctx)
		_ = p.srv.Close()
	})
}

func (p *Proxy) drop(w http.ResponseWriter) {
	p.dropped.Add(1)
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			_ = c.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// ServeHTTP implements http.Handler.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.requests.Add(1)
	p.mu.Lock()
	f := p.faults
	p.mu.Unlock()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		p.drop(w)
		return
	}
	if f.Partitioned || rand.Float64() < f.DropBefore {
		p.drop(w)
		return
	}
	if f.Hang {
		p.hung.Add(1)
		select {
		case <-r.Context().Done():
		case <-p.closed:
		}
		p.drop(w)
		return
	}
	if rand.Float64() < f.TooMany {
		p.tooMany.Add(1)
		w.Header().Set("Retry-After", "1")
		http.Error(w, "injected: too many requests", http.StatusTooManyRequests)
		return
	}
	if d := f.Delay + time.Duration(rand.Int64N(int64(f.Jitter)+1)); d > 0 {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			p.drop(w)
			return
		case <-p.closed:
			p.drop(w)
			return
		}
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+p.Target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		p.drop(w)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := p.client.Do(req)
	if err != nil {
		p.drop(w)
		return
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		p.drop(w)
		return
	}
	p.relayed.Add(1)
	if rand.Float64() < f.DropAfter {
		p.drop(w)
		return
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}
