package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/metricscale/metricscale/hack/backends"
)

// backendNames are the backends up runs: those --backends names (checked), else all.
func (c *Cluster) backendNames() ([]string, error) {
	if c.BackendNames == nil {
		return backends.Names(), nil
	}
	var names []string
	for _, n := range c.BackendNames {
		if _, err := backends.Lookup(n); err != nil {
			return nil, err
		}
		names = appendUnique(names, n)
	}
	return names, nil
}

// backends returns the backends of names, skipping unknown ones (a state file of
// another checkout).
func (c *Cluster) backends(names []string) []backends.Backend {
	var out []backends.Backend
	for _, n := range names {
		if b, err := backends.Lookup(n); err == nil {
			out = append(out, b)
		}
	}
	return out
}

// backendAction installs, starts or stops one backend for this state folder.
func (c *Cluster) backendAction(ctx context.Context, b backends.Backend, action string) error {
	t0 := time.Now()
	var err error
	switch action {
	case "install":
		err = b.Install(ctx, c.CacheRoot, c.Out)
	case "start":
		err = b.Start(ctx, c.Dir, c.Out)
	case "stop":
		err = b.Stop(ctx, c.Dir)
	default:
		err = fmt.Errorf("unknown action %q", action)
	}
	if err != nil {
		return fmt.Errorf("%s of the %s backend failed (logs in %s/%s): %w", action, b.Name(), c.Dir, b.Name(), err)
	}
	c.logf("    %s: %s done in %s", b.Name(), action, secs(time.Since(t0)))
	return nil
}

// InstallBackends installs (or builds) every queue backend's server.
func (c *Cluster) InstallBackends(ctx context.Context) error {
	for _, b := range backends.All() {
		if err := c.backendAction(ctx, b, "install"); err != nil {
			return err
		}
	}
	return nil
}

// StopBackend and StartBackend make an outage of one queue backend the cluster runs;
// StartBackend returns once it accepts clients again, with the same data.
func (c *Cluster) StopBackend(ctx context.Context, name string) error {
	return c.backendCommand(ctx, name, "stop")
}

// StartBackend starts a backend StopBackend stopped.
func (c *Cluster) StartBackend(ctx context.Context, name string) error {
	return c.backendCommand(ctx, name, "start")
}

func (c *Cluster) backendCommand(ctx context.Context, name, action string) error {
	st, err := ReadState(c.Dir)
	if err != nil {
		return fmt.Errorf("no cluster state in %s; start it with: hack/cluster.sh up", c.Dir)
	}
	if !contains(st.Backends, name) {
		return fmt.Errorf("the cluster in %s runs no '%s' backend (it runs: %s)", c.Dir, name, orDefault(strings.Join(st.Backends, " "), "none"))
	}
	b, err := backends.Lookup(name)
	if err != nil {
		return err
	}
	return c.backendAction(ctx, b, action)
}
