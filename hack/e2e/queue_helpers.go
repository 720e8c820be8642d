//go:build e2e

package e2e

// Helpers for the queue backends' e2e (queue_e2e_test.go): hack/cluster.sh runs each
// backend of hack/backends on its fixed 127.0.0.1 port and adds its provider to the
// adapter's config; each backend_NAME_test.go says how to fill and empty its queue.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// queueBackend is one broker the queue e2e runs against.
type queueBackend struct {
	name     string            // provider name in hack/backends/NAME.yaml, and NAME.sh
	metric   string            // the External metric the autoscaler reads
	selector map[string]string // its label selector
	// publish adds n messages to the e2e queue; drain empties it; count is what the
	// server's own CLI/API reports as the depth the metric claims to measure.
	publish func(ctx context.Context, t *testing.T, n int)
	drain   func(ctx context.Context, t *testing.T)
	count   func(ctx context.Context, t *testing.T) int
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

// StopBackend and StartBackend make an outage of one queue backend (hack/cluster.sh
// stop-backend / start-backend); StartBackend returns once it accepts clients.
func (c *Cluster) StopBackend(ctx context.Context, name string) error {
	if out, _, err := c.script(ctx, nil, "stop-backend", name); err != nil {
		return fmt.Errorf("hack/cluster.sh stop-backend %s: %w\n%s", name, err, out)
	}
	return nil
}

func (c *Cluster) StartBackend(ctx context.Context, name string) error {
	if out, _, err := c.script(ctx, nil, "start-backend", name); err != nil {
		return fmt.Errorf("hack/cluster.sh start-backend %s: %w\n%s", name, err, out)
	}
	return nil
}

// backendEnv returns what `hack/backends/NAME.sh env DIR` prints for the cluster's state
// folder (addresses, users, password files), read once.
func backendEnv(name string) func(t *testing.T) map[string]string {
	var (
		once sync.Once
		env  map[string]string
		err  error
	)
	return func(t *testing.T) map[string]string {
		t.Helper()
		once.Do(func() {
			var root string
			if root, err = repoRoot(); err != nil {
				return
			}
			cmd := exec.Command("bash", filepath.Join(root, "hack", "backends", name+".sh"), "env")
			if dir := os.Getenv("METRICSCALE_CLUSTER_DIR"); dir != "" {
				cmd.Args = append(cmd.Args, dir)
			}
			var out []byte
			if out, err = cmd.Output(); err != nil {
				err = fmt.Errorf("hack/backends/%s.sh env: %w", name, err)
				return
			}
			env = parseEnv(string(out))
		})
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
}

// secretFile reads a password file a backend's start script wrote.
func secretFile(t *testing.T, file, what string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return strings.TrimRight(string(b), "\r\n")
}
