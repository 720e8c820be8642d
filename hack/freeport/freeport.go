// Package freeport picks TCP ports for servers that tests start as processes.
//
// A port taken from the kernel with "listen on :0, close" comes from the ephemeral
// range, which every outgoing connection of every test draws its local port from too:
// a port held free for a server that starts seconds later can be an outgoing
// connection's by then, and the server exits with "address already in use" (CI saw
// an adapter replica do so). These ports come from below the ephemeral range instead,
// where only other explicit binds go.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// low is the first port handed out: clear of the well-known and registered ports that
// local services here use (the development backends, the cluster).
const low = 20000

// nodePorts is the first of Kubernetes' NodePort range (30000-32767), which kube-proxy
// on the local cluster's real node may capture on 127.0.0.1: ports stay below it.
const nodePorts = 30000

// Get returns a port on 127.0.0.1 that nothing listens on, outside the ephemeral range.
func Get() (int, error) {
	return getIn(candidates())
}

// getIn returns a port of [from, to] that nothing listens on.
func getIn(from, to int) (int, error) {
	for range 200 {
		p := from + rand.IntN(to-from+1)
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		ln.Close()
		return p, nil
	}
	return 0, fmt.Errorf("no free port in %d-%d after 200 tries", from, to)
}

// For is Get for a test, which it fails when no port is free.
func For(t testing.TB) int {
	t.Helper()
	p, err := Get()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// candidates is [low, first ephemeral port), or the ports above the range when it
// starts too low to leave room below it.
func candidates() (int, int) {
	lo, hi := ephemeralRange()
	switch {
	case lo-low >= 1000:
		return low, min(lo, nodePorts) - 1
	case 65535-hi >= 1000:
		return hi + 1, 65535
	default:
		return low, 65535 // the whole space is ephemeral: Get's bind check is all there is
	}
}

// ephemeralRange is Linux's ip_local_port_range (its default when unreadable).
func ephemeralRange() (int, int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			lo, err1 := strconv.Atoi(f[0])
			hi, err2 := strconv.Atoi(f[1])
			if err1 == nil && err2 == nil && lo <= hi {
				return lo, hi
			}
		}
	}
	return 32768, 60999
}
