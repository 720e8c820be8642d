//go:build e2e

package backends

// Redis on the pod address, against the real server on its fixed port: hold the lock.
//
//	flock /tmp/metricscale-cluster.lock go test -tags e2e -count=1 -run TestRedisPodAddress ./hack/backends/

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

func TestRedisPodAddress(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	host, err := HostAddress()
	if err != nil {
		t.Fatal(err)
	}
	hostAddr := net.JoinHostPort(host.String(), strconv.Itoa(redisPort))
	b, _ := Lookup("redis")
	var log bytes.Buffer
	defer func() { t.Logf("%s", log.String()) }()
	if err := b.Install(ctx, CacheRoot(), &log); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Cleanup(func() {
		if err := b.Stop(context.Background(), dir); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	listens := func() bool {
		c, err := net.DialTimeout("tcp", hostAddr, 2*time.Second)
		if err != nil {
			return false
		}
		c.Close()
		return true
	}
	ping := func(password string) error {
		c := goredis.NewClient(&goredis.Options{Addr: hostAddr, Password: password, MaxRetries: -1})
		defer c.Close()
		return c.Ping(ctx).Err()
	}

	// The default: 127.0.0.1 only.
	if err := b.Start(ctx, dir, &log); err != nil {
		t.Fatal(err)
	}
	if listens() {
		t.Fatalf("without a pod address Redis listens on %s", hostAddr)
	}

	// Turned on while it runs: rebound, no restart.
	pid, _ := redisFiles(dir).running()
	if err := SetPodAddress(dir, host); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx, dir, &log); err != nil {
		t.Fatal(err)
	}
	if !listens() {
		t.Fatalf("with the pod address %s Redis does not listen on %s", host, hostAddr)
	}
	if again, _ := redisFiles(dir).running(); again != pid {
		t.Errorf("pid %d after rebinding, want the same server %d", again, pid)
	}
	env := b.Env(dir)
	if env["METRICSCALE_REDIS_ADDR"] != hostAddr {
		t.Errorf("METRICSCALE_REDIS_ADDR = %s, want %s", env["METRICSCALE_REDIS_ADDR"], hostAddr)
	}
	// Password-protected there as on 127.0.0.1.
	if err := ping(""); err == nil {
		t.Errorf("PING on %s without a password succeeded", hostAddr)
	}
	pw, err := readSecret(env, "METRICSCALE_REDIS_ADMIN_PASSWORD_FILE")
	if err != nil {
		t.Fatal(err)
	}
	if err := ping(pw); err != nil {
		t.Errorf("PING on %s with the admin password: %v", hostAddr, err)
	}
	q, err := b.OpenQueue(ctx, env)
	if err != nil {
		t.Fatalf("OpenQueue on %s: %v", hostAddr, err)
	}
	if err := q.Publish(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if d, err := q.Depth(ctx); err != nil || d != 2 {
		t.Errorf("Depth through %s = %d (%v), want 2", hostAddr, d, err)
	}
	q.Close()

	// A stop and a start keep it (the config file has it too).
	if err := b.Stop(ctx, dir); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx, dir, &log); err != nil {
		t.Fatal(err)
	}
	if !listens() {
		t.Errorf("after a restart Redis does not listen on %s", hostAddr)
	}

	// Turned off: back to 127.0.0.1 only.
	if err := SetPodAddress(dir, netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx, dir, &log); err != nil {
		t.Fatal(err)
	}
	if listens() {
		t.Errorf("turned off, Redis still listens on %s", hostAddr)
	}
	if err := b.Healthy(ctx, dir); err != nil {
		t.Errorf("Healthy: %v", err)
	}
}
