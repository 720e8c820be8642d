//go:build e2e

package e2e

// Helpers for the queue backends' e2e (queue_e2e_test.go): hack/cluster.sh runs each
// backend of hack/backends on its fixed 127.0.0.1 port and adds its provider to the
// adapter's config; the backends package says how to fill, empty and count its queue.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/metricscale/metricscale/hack/backends"
)

// queueBackend is one broker the queue e2e runs against.
type queueBackend struct {
	backends.Backend
	name     string            // provider name in hack/backends/NAME.yaml
	metric   string            // the External metric the autoscaler reads
	selector map[string]string // its label selector
}

// queueBackends are the backends with an e2e: every one of hack/backends.
func queueBackends() []queueBackend {
	var bs []queueBackend
	for _, b := range backends.All() {
		bs = append(bs, newQueueBackend(b))
	}
	return bs
}

func newQueueBackend(b backends.Backend) queueBackend {
	return queueBackend{Backend: b, name: b.Name(), metric: b.Queue().Metric, selector: b.Queue().Selector}
}

// queueBackendOf is the backend called name.
func queueBackendOf(t *testing.T, name string) queueBackend {
	t.Helper()
	b, err := backends.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return newQueueBackend(b)
}

// withQueue opens the e2e queue for one step, as the cluster's env names it: a queue
// outlives no outage.
func (b queueBackend) withQueue(ctx context.Context, t *testing.T, fn func(backends.Queue) error) {
	t.Helper()
	q, err := b.OpenQueue(ctx, b.Env(cluster.Dir))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if err := fn(q); err != nil {
		t.Fatal(err)
	}
}

// publish adds n messages to the e2e queue.
func (b queueBackend) publish(ctx context.Context, t *testing.T, n int) {
	t.Helper()
	b.withQueue(ctx, t, func(q backends.Queue) error { return q.Publish(ctx, n) })
}

// drain empties it.
func (b queueBackend) drain(ctx context.Context, t *testing.T) {
	t.Helper()
	b.withQueue(ctx, t, func(q backends.Queue) error { return q.Drain(ctx) })
}

// count is what the server's own CLI/API reports as the depth the metric claims to measure.
func (b queueBackend) count(ctx context.Context, t *testing.T) int {
	t.Helper()
	var n int
	b.withQueue(ctx, t, func(q backends.Queue) (err error) { n, err = q.Depth(ctx); return err })
	return n
}

// runningBackends are the queue backends the cluster runs (STATE_BACKENDS of its state file).
func (c *Cluster) runningBackends() ([]string, error) {
	data, err := os.ReadFile(filepath.Join(c.Dir, "cluster.env"))
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "STATE_BACKENDS="); ok {
			v = strings.Trim(v, `'"`)
			v = strings.ReplaceAll(v, `\ `, " ")
			return strings.Fields(v), nil
		}
	}
	return nil, nil
}

// runningBackend is the backend called name, which the cluster must run.
func (c *Cluster) runningBackend(name string) (backends.Backend, error) {
	running, err := c.runningBackends()
	if err != nil {
		return nil, fmt.Errorf("reading the cluster's backends: %w", err)
	}
	if !slices.Contains(running, name) {
		return nil, fmt.Errorf("the cluster in %s runs no %q backend (it runs: %v)", c.Dir, name, running)
	}
	return backends.Lookup(name)
}

// StopBackend and StartBackend make an outage of one queue backend; StartBackend returns
// once it accepts clients.
func (c *Cluster) StopBackend(ctx context.Context, name string) error {
	b, err := c.runningBackend(name)
	if err != nil {
		return err
	}
	if err := b.Stop(ctx, c.Dir); err != nil {
		return fmt.Errorf("stopping the %s backend: %w", name, err)
	}
	return nil
}

func (c *Cluster) StartBackend(ctx context.Context, name string) error {
	b, err := c.runningBackend(name)
	if err != nil {
		return err
	}
	var log bytes.Buffer
	if err := b.Start(ctx, c.Dir, &log); err != nil {
		return fmt.Errorf("starting the %s backend: %w\n%s", name, err, log.String())
	}
	return nil
}

// backendEnv returns the backend's env for the cluster's state folder (addresses, users,
// password files).
func backendEnv(name string) func(t *testing.T) map[string]string {
	return func(t *testing.T) map[string]string {
		t.Helper()
		b, err := backends.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		return b.Env(cluster.Dir)
	}
}

// secretFile reads a password file a backend's Start wrote.
func secretFile(t *testing.T, file, what string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return strings.TrimRight(string(b), "\r\n")
}
