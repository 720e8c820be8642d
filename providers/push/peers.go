package push

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Peers lists the push addresses (host:port) of the other replicas. A list
// may name this replica itself: the replicator recognises it by the id it
// answers with and skips it.
type Peers interface {
	Addresses(ctx context.Context) ([]string, error)
}

// StaticPeers is a fixed list of addresses.
type StaticPeers []string

// Addresses implements Peers.
func (s StaticPeers) Addresses(context.Context) ([]string, error) { return s, nil }

// ParseStaticPeers parses --push-peers: a comma-separated list of
// http://host:port URLs (or bare host:port). TLS between replicas is not
// supported, so https is refused.
func ParseStaticPeers(list string) (StaticPeers, error) {
	var out StaticPeers
	seen := map[string]bool{}
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		hostport := item
		if strings.Contains(item, "://") {
			u, err := url.Parse(item)
			if err != nil {
				return nil, fmt.Errorf("--push-peers: %q: %w", item, err)
			}
			if u.Scheme != "http" {
				return nil, fmt.Errorf("--push-peers: %q: scheme %q: replicas forward over plain http only", item, u.Scheme)
			}
			if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
				return nil, fmt.Errorf("--push-peers: %q: give scheme, host and port only", item)
			}
			hostport = u.Host
		}
		host, port, err := net.SplitHostPort(hostport)
		if err != nil || host == "" {
			return nil, fmt.Errorf("--push-peers: %q: want http://host:port", item)
		}
		if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
			return nil, fmt.Errorf("--push-peers: %q: %q is not a port", item, port)
		}
		if !seen[hostport] {
			seen[hostport] = true
			out = append(out, hostport)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--push-peers: %q names no peer", list)
	}
	return out, nil
}

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
