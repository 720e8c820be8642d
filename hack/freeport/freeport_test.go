package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestGetIsOutsideTheEphemeralRange(t *testing.T) {
	t.Parallel()
	lo, hi := ephemeralRange()
	from, to := candidates()
	for range 100 {
		p := For(t)
		if p < from || p > to {
			t.Fatalf("port %d outside %d-%d", p, from, to)
		}
		if to < lo || from > hi { // a range apart from the ephemeral one was found
			if p >= lo && p <= hi {
				t.Fatalf("port %d is in the ephemeral range %d-%d", p, lo, hi)
			}
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d is not free: %v", p, err)
		}
		ln.Close()
	}
}

// TestGetSkipsABoundPort: of two ports, one held by a listener, the other is answered.
func TestGetSkipsABoundPort(t *testing.T) {
	t.Parallel()
	var held net.Listener
	var p int
	for range 20 {
		p = For(t)
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		if free, err := getIn(p+1, p+1); err != nil || free != p+1 {
			ln.Close() // p+1 is in use here: try another pair
			continue
		}
		held = ln
		break
	}
	if held == nil {
		t.Fatal("found no pair of free ports")
	}
	defer held.Close()
	for range 20 {
		got, err := getIn(p, p+1)
		if err != nil {
			t.Fatal(err)
		}
		if got != p+1 {
			t.Fatalf("getIn(%d, %d) = %d, which a listener holds", p, p+1, got)
		}
	}
	if _, err := getIn(p, p); err == nil {
		t.Errorf("getIn(%d, %d) answered the held port", p, p)
	}
}
