// Package catalog is the one place provider types are registered: the
// adapter, check-config and the tests build providers through Factories.
// To add a backend, implement providers.Factory in its own package and add
// it here.
package catalog

import (
	"sort"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/apiservice"
	"github.com/metricscale/metricscale/providers/kafka"
	"github.com/metricscale/metricscale/providers/memory"
	"github.com/metricscale/metricscale/providers/nats"
	"github.com/metricscale/metricscale/providers/postgresql"
	"github.com/metricscale/metricscale/providers/prometheus"
	"github.com/metricscale/metricscale/providers/rabbitmq"
	"github.com/metricscale/metricscale/providers/redis"
)

// Factories returns the known provider types by config type.
func Factories() map[string]providers.Factory {
	return map[string]providers.Factory{
		apiservice.Type: apiservice.Factory{},
		kafka.Type:      kafka.Factory{},
		memory.Type:     memory.Factory{},
		nats.Type:       nats.Factory{},
		postgresql.Type: postgresql.Factory{},
		prometheus.Type: prometheus.Factory{},
		rabbitmq.Type:   rabbitmq.Factory{},
		redis.Type:      redis.Factory{},
	}
}

// Types returns the known config types, sorted.
func Types() []string {
	var ts []string
	for t := range Factories() {
		ts = append(ts, t)
	}
	sort.Strings(ts)
	return ts
}
