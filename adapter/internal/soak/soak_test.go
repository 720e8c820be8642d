package soak

import (
	"context"
	"flag"
	"testing"
	"time"
)

// soakFor makes TestReplicationUnderFaults a soak: `make soak` runs it with
// -soak=5m; without it the short profile runs (seconds, in CI).
var soakFor = flag.Duration("soak", 0, "run the replication fault-injection harness this long (0: the short profile)")

func TestReplicationUnderFaults(t *testing.T) {
	cfg := Config{Replicas: 3, Series: 200, Workers: 4, Phase: 2 * time.Second, Converge: 30 * time.Second, Log: t.Logf}
	if *soakFor > 0 {
		// seven phases of faults
		cfg = Config{Replicas: 3, Series: 5000, Workers: 8, Phase: *soakFor / 7, Converge: time.Minute, Log: t.Logf}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	bin, err := Build(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(cfg, dir, bin)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	rep, err := h.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("replication under faults (%d replicas, %d series, phases of %s):\n%s", cfg.Replicas, cfg.Series, cfg.Phase, rep)
	if rep.PushesAcked == 0 {
		t.Fatal("no push was acknowledged")
	}
	if rep.ValuesLost != 0 {
		t.Errorf("%d (replica, series) pairs did not serve the last acknowledged value within %s of the faults stopping", rep.ValuesLost, cfg.Converge)
	}
	if rep.BackwardsReads != 0 {
		t.Errorf("%d reads served a value older than one the same replica served before", rep.BackwardsReads)
	}
	if rep.PeakConnsPerPeer > MaxConnsPerPeer {
		t.Errorf("%d connections from one replica to one peer, bound %d", rep.PeakConnsPerPeer, MaxConnsPerPeer)
	}
	for slot, b := range rep.PeakHeap {
		if b > MaxHeapBytes {
			t.Errorf("replica %s: heap in use %d bytes, bound %d", slot, b, MaxHeapBytes)
		}
	}
	if len(rep.PeakHeap) == 0 {
		t.Error("no heap sample was read from any replica's /metrics")
	}
}
