// Package backends is the local development copy of each queue server the adapter
// reads (Redis, RabbitMQ, PostgreSQL, NATS, Kafka through kfake): how to install,
// start, stop and probe it, the environment that names its address and credentials,
// the adapter config fragment that serves its e2e queue, and a handle on that queue
// to publish and consume. The local cluster (hack/cluster), the demo (hack/demo) and
// the e2e suite (hack/e2e) all use it; adding a backend is one file here.
package backends

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Backend is one development server of a provider type.
type Backend interface {
	// Name is the provider name of its config fragment, e.g. "redis".
	Name() string
	// Install makes its server binaries present (Debian's package with apt-get as root,
	// or a Go build into cacheRoot); a no-op when they are. Progress goes to log.
	Install(ctx context.Context, cacheRoot string, log io.Writer) error
	// Start runs the server for the cluster state folder dir (data and logs under
	// dir/NAME), idempotently, and returns once it accepts clients.
	Start(ctx context.Context, dir string, log io.Writer) error
	// Stop stops it, keeping its data (an outage, or the cluster's down).
	Stop(ctx context.Context, dir string) error
	// Healthy reports whether the server of dir runs and answers.
	Healthy(ctx context.Context, dir string) error
	// Env is what names its address, users and password files for dir, as
	// METRICSCALE_<NAME>_* variables (what `hack/cluster.sh env` exports).
	Env(dir string) map[string]string
	// AdapterConfig is the adapter config fragment (providers and routes) that serves
	// its e2e queue, with dir substituted for the cluster state folder.
	AdapterConfig(dir string) ([]byte, error)
	// Queue is the e2e queue: the External metric the adapter serves for it.
	Queue() QueueInfo
	// OpenQueue opens the e2e queue with the admin credentials of env (as Env returns).
	OpenQueue(ctx context.Context, env map[string]string) (Queue, error)
}

// QueueInfo names the External metric and selector that measure a backend's e2e queue.
type QueueInfo struct {
	Metric   string
	Selector map[string]string
}

// Queue is a handle on a backend's e2e queue, as producers and workers use it.
type Queue interface {
	// Publish adds n jobs.
	Publish(ctx context.Context, n int) error
	// Consume takes (and acknowledges) up to n jobs, as a worker does, and returns how many.
	Consume(ctx context.Context, n int) (int, error)
	// Depth is the queue's depth as the server's own CLI or API reports it, read with the
	// adapter's least-privilege credentials where the backend has them.
	Depth(ctx context.Context) (int, error)
	// Drain empties the queue.
	Drain(ctx context.Context) error
	Close() error
}

var registry []Backend

// register adds a backend; each backend's file calls it from init.
func register(b Backend) {
	registry = append(registry, b)
	slices.SortFunc(registry, func(a, b Backend) int { return strings.Compare(a.Name(), b.Name()) })
}

// All returns every development backend, sorted by name.
func All() []Backend { return slices.Clone(registry) }

// Names returns the backends' names, sorted.
func Names() []string {
	names := make([]string, len(registry))
	for i, b := range registry {
		names[i] = b.Name()
	}
	return names
}

// Lookup returns the backend called name.
func Lookup(name string) (Backend, error) {
	for _, b := range registry {
		if b.Name() == name {
			return b, nil
		}
	}
	return nil, fmt.Errorf("unknown queue backend %q (known: %s)", name, strings.Join(Names(), ", "))
}
