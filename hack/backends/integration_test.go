//go:build e2e

package backends

// The development backends against their real servers, on their fixed ports: run it
// holding the machine's lock, with no local cluster up:
//
//	flock /tmp/metricscale-cluster.lock go test -tags e2e -count=1 -timeout 60m ./hack/backends/

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// keepsData: what a stop and a start keep of the e2e queue (kfake keeps nothing).
var keepsData = map[string]bool{"redis": true, "rabbitmq": true, "postgresql": true, "nats": true, "kafka": false}

func TestBackendsLive(t *testing.T) {
	for _, b := range All() {
		t.Run(b.Name(), func(t *testing.T) { testBackendLive(t, b) })
	}
}

func testBackendLive(t *testing.T, b Backend) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var log bytes.Buffer
	defer func() { t.Logf("%s", log.String()) }()
	last := time.Now()
	step := func(what string) {
		fmt.Fprintf(&log, "  [%s took %s]\n", what, time.Since(last).Round(10*time.Millisecond))
		last = time.Now()
	}
	if err := b.Install(ctx, CacheRoot(), &log); err != nil {
		t.Fatalf("Install: %v", err)
	}
	step("Install")
	dir := t.TempDir()
	if b.Name() == "postgresql" {
		// as root its data lies outside the 0700 temporary folder, in /var/tmp
		t.Cleanup(func() { _ = os.RemoveAll(pgFiles(dir).server) })
	}
	t.Cleanup(func() {
		if err := b.Stop(context.Background(), dir); err != nil {
			t.Errorf("Stop at cleanup: %v", err)
		}
	})
	if err := b.Start(ctx, dir, &log); err != nil {
		t.Fatalf("Start: %v", err)
	}
	step("Start")
	if err := b.Healthy(ctx, dir); err != nil {
		t.Fatalf("Healthy after Start: %v", err)
	}
	// A second Start is a no-op on the running server.
	if err := b.Start(ctx, dir, &log); err != nil {
		t.Fatalf("Start again: %v", err)
	}
	step("Start again")
	for k, v := range b.Env(dir) {
		if strings.HasSuffix(k, "_FILE") {
			st, err := os.Stat(v)
			if err != nil || st.Mode().Perm() != 0o600 {
				t.Errorf("%s = %s: %v, mode %v; want a 0600 file", k, v, err, st.Mode().Perm())
			}
		}
	}

	env := b.Env(dir)
	q, err := b.OpenQueue(ctx, env)
	if err != nil {
		t.Fatalf("OpenQueue: %v", err)
	}
	depth := func(want int, after string) {
		t.Helper()
		got, err := q.Depth(ctx)
		if err != nil {
			t.Fatalf("Depth after %s: %v", after, err)
		}
		if got != want {
			t.Fatalf("Depth after %s = %d, want %d", after, got, want)
		}
	}
	if err := q.Drain(ctx); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	depth(0, "the first Drain")
	if err := q.Publish(ctx, 5); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	depth(5, "publishing 5")
	// A worker's poll may take fewer than asked (Kafka's first joins the group).
	for got := 0; got < 2; {
		n, err := q.Consume(ctx, 2-got)
		if err != nil {
			t.Fatalf("Consume: %v", err)
		}
		got += n
	}
	depth(3, "consuming 2")
	if err := q.Drain(ctx); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	depth(0, "Drain")
	if err := q.Publish(ctx, 4); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	depth(4, "publishing 4")
	step("the queue")
	if err := q.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}

	if err := b.Stop(ctx, dir); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	step("Stop")
	if err := b.Healthy(ctx, dir); err == nil {
		t.Fatal("Healthy after Stop: no error")
	}
	if err := b.Start(ctx, dir, &log); err != nil {
		t.Fatalf("Start after Stop: %v", err)
	}
	step("Start after Stop")
	if q, err = b.OpenQueue(ctx, env); err != nil {
		t.Fatalf("OpenQueue after the restart: %v", err)
	}
	defer q.Close()
	want := 0
	if keepsData[b.Name()] {
		want = 4
	}
	depth(want, "a stop and a start")
	if err := q.Drain(ctx); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	depth(0, "the last Drain")
}
