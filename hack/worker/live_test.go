//go:build e2e

package main

// The worker against the development Redis of hack/backends, on its fixed port: run it
// holding the machine's lock, with no local cluster up:
//
//	flock /tmp/metricscale-cluster.lock go test -tags e2e -count=1 -run TestWorkerRedisLive ./hack/worker/

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metricscale/metricscale/hack/backends"
)

func TestWorkerRedisLive(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b, err := backends.Lookup("redis")
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	defer func() { t.Logf("%s", log.String()) }()
	if err := b.Install(ctx, backends.CacheRoot(), &log); err != nil {
		t.Fatalf("Install: %v", err)
	}
	dir := t.TempDir()
	t.Cleanup(func() {
		if err := b.Stop(context.Background(), dir); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	if err := b.Start(ctx, dir, &log); err != nil {
		t.Fatalf("Start: %v", err)
	}

	// The worker's own list, and the e2e queue beside it, which it must leave alone.
	const queue = "worker-live-jobs"
	env := b.Env(dir)
	mine := map[string]string{"METRICSCALE_REDIS_QUEUE": queue}
	for k, v := range env {
		mine[k] = v
	}
	open := func(env map[string]string) backends.Queue {
		t.Helper()
		q, err := b.OpenQueue(ctx, env)
		if err != nil {
			t.Fatalf("OpenQueue: %v", err)
		}
		t.Cleanup(func() { q.Close() })
		return q
	}
	jobs, e2e := open(mine), open(env)
	if err := jobs.Publish(ctx, 20); err != nil {
		t.Fatal(err)
	}
	if err := e2e.Publish(ctx, 3); err != nil {
		t.Fatal(err)
	}

	// The worker as a Deployment configures it: flags and the backend's variables.
	var environ []string
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	environ = append(environ, "METRICSCALE_WORKER_JOB_TIME=10ms")
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	addrc := make(chan string, 1)
	done := make(chan int, 1)
	go func() {
		done <- run(wctx, []string{"--backend", "redis", "--queue", queue, "--concurrency", "2", "--listen", "127.0.0.1:0"},
			environ, io.Discard, os.Stderr, func(a string) { addrc <- a })
	}()
	var addr string
	select {
	case addr = <-addrc:
	case code := <-done:
		t.Fatalf("the worker exited with %d before serving", code)
	}
	processed := func() (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatalf("GET /metrics: %v", err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for _, line := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(line, "metricscale_worker_jobs_processed_total "); ok {
				n, err := strconv.Atoi(v)
				if err != nil {
					t.Fatalf("processed %q: %v", v, err)
				}
				return n, string(body)
			}
		}
		t.Fatalf("no metricscale_worker_jobs_processed_total in /metrics:\n%s", body)
		return 0, ""
	}
	// 20 jobs of 10 ms, two at a time, take 0.1 s; the deadline is only against a hang.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		n, body := processed()
		if n >= 20 {
			t.Logf("/metrics:\n%s", body)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processed %d of 20 after 2 minutes:\n%s", n, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The worker polls on: no job more than the 20 shows up, and the queue is empty.
	if n, body := processed(); n != 20 {
		t.Errorf("processed %d, want 20:\n%s", n, body)
	}
	if d, err := jobs.Depth(ctx); err != nil || d != 0 {
		t.Errorf("depth of %s = %d (%v), want 0: drained", queue, d, err)
	}
	if d, err := e2e.Depth(ctx); err != nil || d != 3 {
		t.Errorf("depth of the e2e queue = %d (%v), want the 3 the worker was not told to take", d, err)
	}
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz: %v %v, want 200 with the queue open", resp, err)
	}
	if resp != nil {
		resp.Body.Close()
	}
	stop()
	if code := <-done; code != 0 {
		t.Errorf("exit %d after the stop, want 0", code)
	}
}
