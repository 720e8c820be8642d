package backends

import (
	"maps"
	"net/netip"
	"strings"
	"testing"
)

func TestDefaultRoute(t *testing.T) {
	t.Parallel()
	const header = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
	tests := []struct {
		name      string
		table     string
		wantIface string
		wantGW    string
		wantErr   string
	}{
		{"this machine", header +
			"eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n" +
			"eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n", "eth0", "192.0.2.1", ""},
		{"the lowest metric wins", header +
			"wlan0\t00000000\t0101A8C0\t0003\t0\t0\t600\t00000000\t0\t0\t0\n" +
			"eth1\t00000000\t01000A0A\t0003\t0\t0\t100\t00000000\t0\t0\t0\n", "eth1", "10.10.0.1", ""},
		{"a route that is down is skipped", header +
			"eth0\t00000000\t010200C0\t0002\t0\t0\t0\t00000000\t0\t0\t0\n" +
			"eth2\t00000000\t0100A8C0\t0003\t0\t0\t50\t00000000\t0\t0\t0\n", "eth2", "192.168.0.1", ""},
		{"an on-link default route", header +
			"ppp0\t00000000\t00000000\t0001\t0\t0\t0\t00000000\t0\t0\t0\n", "ppp0", "0.0.0.0", ""},
		{"no default route", header +
			"eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n", "", "", "no IPv4 default route"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			iface, gw, err := defaultRoute(strings.NewReader(tc.table))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || iface != tc.wantIface || gw.String() != tc.wantGW {
				t.Errorf("defaultRoute = %s, %s, %v; want %s, %s", iface, gw, err, tc.wantIface, tc.wantGW)
			}
		})
	}
}

// HostAddress on this machine: an address of its own, not loopback.
func TestHostAddress(t *testing.T) {
	t.Parallel()
	a, err := HostAddress()
	if err != nil {
		t.Fatal(err)
	}
	if !a.Is4() || a.IsLoopback() || !a.IsGlobalUnicast() {
		t.Errorf("HostAddress = %s, want a global IPv4 address", a)
	}
}

func TestPodAddressEnv(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	redis, err := Lookup("redis")
	if err != nil {
		t.Fatal(err)
	}
	if a := PodAddress(dir); a.IsValid() {
		t.Fatalf("PodAddress of a new folder = %s, want none", a)
	}
	if got := redis.Env(dir)["METRICSCALE_REDIS_ADDR"]; got != "127.0.0.1:16379" {
		t.Errorf("by default METRICSCALE_REDIS_ADDR = %s, want 127.0.0.1:16379", got)
	}
	if got := redisBind(dir); got != "127.0.0.1" {
		t.Errorf("by default bind %q, want 127.0.0.1", got)
	}
	others := map[string]map[string]string{}
	for _, b := range All() {
		others[b.Name()] = b.Env(dir)
	}

	pod := netip.MustParseAddr("192.0.2.2")
	if err := SetPodAddress(dir, pod); err != nil {
		t.Fatal(err)
	}
	if a := PodAddress(dir); a != pod {
		t.Errorf("PodAddress = %s, want %s", a, pod)
	}
	if got := redis.Env(dir)["METRICSCALE_REDIS_ADDR"]; got != "192.0.2.2:16379" {
		t.Errorf("with the pod address METRICSCALE_REDIS_ADDR = %s, want 192.0.2.2:16379", got)
	}
	if got := redisBind(dir); got != "127.0.0.1 192.0.2.2" {
		t.Errorf("with the pod address bind %q, want both", got)
	}
	// the backends that do not support it keep their Env
	for _, b := range All() {
		if b.Name() == "redis" {
			continue
		}
		if got, want := b.Env(dir), others[b.Name()]; !maps.Equal(got, want) {
			t.Errorf("%s: Env with a pod address %v, want it unchanged %v", b.Name(), got, want)
		}
	}

	if err := SetPodAddress(dir, netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	if got := redis.Env(dir)["METRICSCALE_REDIS_ADDR"]; got != "127.0.0.1:16379" {
		t.Errorf("turned off: METRICSCALE_REDIS_ADDR = %s, want 127.0.0.1:16379", got)
	}
	if err := SetPodAddress(dir, netip.Addr{}); err != nil {
		t.Errorf("turning off twice: %v", err)
	}
	for _, bad := range []string{"127.0.0.1", "0.0.0.0"} {
		if err := SetPodAddress(dir, netip.MustParseAddr(bad)); err == nil {
			t.Errorf("SetPodAddress(%s): no error", bad)
		}
	}
}
