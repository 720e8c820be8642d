package push

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/metricscale/metricscale/providers/telemetry"
)

// ForwardedHeader marks a push one replica forwards to another; such a push
// is stored, never forwarded again.
const ForwardedHeader = "X-Metricscale-Forwarded"

// Peers lists the push addresses (host:port) of the other replicas.
type Peers interface {
	Addresses(ctx context.Context) ([]string, error)
}

// StaticPeers is a fixed list of addresses.
type StaticPeers []string

// Addresses implements Peers.
func (s StaticPeers) Addresses(context.Context) ([]string, error) { return s, nil }

// DNSPeers resolves a headless Service name to the replicas' addresses,
// leaving out this replica's own IP. Answers are reused for a few seconds.
type DNSPeers struct {
	Host   string // e.g. metricscale-adapter-peers.metricscale.svc
	Port   int
	SelfIP string

	mu      sync.Mutex
	at      time.Time
	cached  []string
	resolve func(ctx context.Context, host string) ([]string, error)
}

// Addresses implements Peers.
func (d *DNSPeers) Addresses(ctx context.Context) ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.at.IsZero() && time.Since(d.at) < 5*time.Second {
		return d.cached, nil
	}
	resolve := d.resolve
	if resolve == nil {
		resolve = net.DefaultResolver.LookupHost
	}
	ips, err := resolve(ctx, d.Host)
	if err != nil {
		return nil, fmt.Errorf("resolving push peers %s: %w", d.Host, err)
	}
	out := make([]string, 0, len(ips))
	for _, ip := range ips {
		if ip != d.SelfIP {
			out = append(out, net.JoinHostPort(ip, strconv.Itoa(d.Port)))
		}
	}
	d.cached, d.at = out, time.Now()
	return out, nil
}

// Forwarder sends each accepted push to the other replicas, so every
// replica's in-memory store holds every series whichever replica a pusher
// reached. Forwarding is asynchronous and bounded by a timeout; a replica
// that misses a push catches up with the pusher's next one.
type Forwarder struct {
	peers   Peers
	token   string
	scheme  string
	client  *http.Client
	timeout time.Duration
}

// NewForwarder returns a Forwarder; scheme is "http" or "https" (client
// then must trust the peers' certificates).
func NewForwarder(peers Peers, token, scheme string, client *http.Client) *Forwarder {
	if client == nil {
		client = &http.Client{}
	}
	return &Forwarder{peers: peers, token: token, scheme: scheme, client: client, timeout: 5 * time.Second}
}

// Forward sends body to every peer in the background. done, if not nil, is
// called when all peers have answered or failed.
func (f *Forwarder) Forward(contentType string, body []byte, done func()) {
	go func() {
		if done != nil {
			defer done()
		}
		ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
		defer cancel()
		addrs, err := f.peers.Addresses(ctx)
		if err != nil {
			telemetry.PushForwards.WithLabelValues("error").Inc()
			klog.ErrorS(err, "Cannot forward a push to the other replicas")
			return
		}
		var wg sync.WaitGroup
		for _, addr := range addrs {
			wg.Add(1)
			go func(addr string) {
				defer wg.Done()
				if err := f.send(ctx, addr, contentType, body); err != nil {
					telemetry.PushForwards.WithLabelValues("error").Inc()
					klog.ErrorS(err, "Forwarding a push failed", "peer", addr)
					return
				}
				telemetry.PushForwards.WithLabelValues("ok").Inc()
			}(addr)
		}
		wg.Wait()
	}()
}

func (f *Forwarder) send(ctx context.Context, addr, contentType string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.scheme+"://"+addr+"/push", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("forwarding to %s: %w", addr, err)
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Authorization", "Bearer "+f.token)
	req.Header.Set(ForwardedHeader, "1")
	resp, err := f.client.Do(req)
	if err != nil {
		return fmt.Errorf("forwarding to %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("forwarding to %s: status %d", addr, resp.StatusCode)
	}
	return nil
}
