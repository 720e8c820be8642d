package backends

// Where pods reach the backends. The servers listen on 127.0.0.1; a pod on a real node of
// this machine has its own 127.0.0.1 and reaches the host on the host's address instead.
// SetPodAddress(dir, addr) records that address in the state folder: the backends that
// support it (Redis) then also listen there from their next Start, and their Env names it,
// so that what `hack/cluster.sh env` prints works from the host and from a pod alike. The
// credentials stay as they are. Without it (the default) nothing changes: 127.0.0.1 only.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// podAddressFile, in the state folder, holds the address SetPodAddress set.
const podAddressFile = "backends-pod-address"

// PodAddressBackends are the backends that listen on the pod address when one is set;
// the others stay on 127.0.0.1 and their Env does not change.
var PodAddressBackends = []string{"redis"}

// PodBackend is the backend real worker pods use unless told otherwise: the first that
// listens where pods reach it.
func PodBackend() string { return PodAddressBackends[0] }

// NamedQueues is a Backend whose OpenQueue takes the name of the queue from a variable
// of its env (QueueNameVar), so that each worker Deployment may have a queue of its own.
type NamedQueues interface {
	QueueNameVar() string
}

// SetPodAddress makes the backends of the state folder dir also listen on addr (besides
// 127.0.0.1) from their next Start — a running server is rebound — and their Env name
// it. The zero Addr turns it off.
func SetPodAddress(dir string, addr netip.Addr) error {
	d, err := absDir(dir)
	if err != nil {
		return err
	}
	file := filepath.Join(d, podAddressFile)
	if !addr.IsValid() {
		if err := os.Remove(file); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("turning the pod address off: %w", err)
		}
		return nil
	}
	if addr.IsLoopback() || addr.IsUnspecified() {
		return fmt.Errorf("pod address %s: want an address of this host that pods reach, not a loopback or unspecified one", addr)
	}
	if err := os.MkdirAll(d, 0o755); err != nil {
		return fmt.Errorf("pod address: %w", err)
	}
	if err := writeFileAtomic(file, []byte(addr.String()+"\n"), 0o644); err != nil {
		return fmt.Errorf("pod address: writing %s: %w", file, err)
	}
	return nil
}

// PodAddress is the address SetPodAddress set for dir, or the zero Addr.
func PodAddress(dir string) netip.Addr {
	b, err := os.ReadFile(filepath.Join(mustAbs(dir), podAddressFile))
	if err != nil {
		return netip.Addr{}
	}
	a, err := netip.ParseAddr(strings.TrimSpace(string(b)))
	if err != nil {
		return netip.Addr{}
	}
	return a
}

// HostAddress is the source address of this machine's IPv4 default route: where pods on a
// node of this machine reach its host processes.
func HostAddress() (netip.Addr, error) {
	f, err := os.Open("/proc/net/route")
	if err != nil {
		return netip.Addr{}, fmt.Errorf("host address: %w", err)
	}
	defer f.Close()
	iface, gw, err := defaultRoute(f)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("host address: %w", err)
	}
	if gw.IsValid() && !gw.IsUnspecified() {
		// The kernel's choice of source for the gateway (no packet is sent).
		c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(gw, 9)))
		if err == nil {
			defer c.Close()
			if a, ok := netip.AddrFromSlice(c.LocalAddr().(*net.UDPAddr).IP); ok {
				return a.Unmap(), nil
			}
		}
	}
	// An on-link default route: the interface's first global IPv4 address.
	ifc, err := net.InterfaceByName(iface)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("host address: default route's interface %s: %w", iface, err)
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("host address: addresses of %s: %w", iface, err)
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() && p.Addr().IsGlobalUnicast() {
			return p.Addr(), nil
		}
	}
	return netip.Addr{}, fmt.Errorf("host address: interface %s of the default route has no IPv4 address", iface)
}

// defaultRoute reads /proc/net/route and returns the interface and gateway of the IPv4
// default route that is up with the lowest metric.
func defaultRoute(r io.Reader) (string, netip.Addr, error) {
	const rtfUp = 0x1
	sc := bufio.NewScanner(r)
	best, bestMetric := -1, 0
	var iface string
	var gw netip.Addr
	for line := 0; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if line == 0 || len(f) < 8 {
			continue // the header
		}
		flags, err1 := strconv.ParseUint(f[3], 16, 32)
		metric, err2 := strconv.Atoi(f[6])
		if err1 != nil || err2 != nil || f[1] != "00000000" || f[7] != "00000000" || flags&rtfUp == 0 {
			continue
		}
		g, err := strconv.ParseUint(f[2], 16, 32)
		if err != nil {
			continue
		}
		if best < 0 || metric < bestMetric {
			best, bestMetric, iface = line, metric, f[0]
			// the kernel prints the address in host (little-endian) order
			gw = netip.AddrFrom4([4]byte{byte(g), byte(g >> 8), byte(g >> 16), byte(g >> 24)})
		}
	}
	if err := sc.Err(); err != nil {
		return "", netip.Addr{}, err
	}
	if best < 0 {
		return "", netip.Addr{}, errors.New("no IPv4 default route in /proc/net/route")
	}
	return iface, gw, nil
}
