package rabbitmq

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/providertest"
)

// conformanceManagement is the management API over the suite's data: each
// suite metric is a vhost of its own, each series a queue named
// "<namespace>.<queue>[.<shard>]" holding Value ready messages, which the
// metric's queueRegex turns back into the series' labels.
type conformanceManagement struct {
	vhosts  map[string][]queueStats
	hung    atomic.Bool
	release chan struct{}
}

func (c *conformanceManagement) Queues(ctx context.Context, vhost string) ([]queueStats, error) {
	if c.hung.Load() {
		select {
		case <-c.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return c.vhosts[vhost], nil
}

const conformanceRegex = `(?P<namespace>[^.]+)\.(?P<queue>[^.]+)(?:\.(?P<shard>[^.]+))?`

func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.Run(t, providertest.Harness{
		New: func(t *testing.T, deps providers.Deps, data providertest.Data) providertest.Backend {
			fake := &conformanceManagement{vhosts: map[string][]queueStats{}, release: make(chan struct{})}
			var once sync.Once
			t.Cleanup(func() { once.Do(func() { close(fake.release) }) })
			type metric struct {
				Name       string `json:"name"`
				QueueRegex string `json:"queueRegex"`
				Vhost      string `json:"vhost"`
			}
			// configured whatever the data: discovery comes from the config
			var metrics []metric
			for _, n := range []string{"queue", "stale", "mixed"} {
				name := providertest.ExternalPrefix + n
				metrics = append(metrics, metric{Name: name, QueueRegex: conformanceRegex, Vhost: name})
			}
			zero := 0.0
			for _, s := range data.Series {
				if !strings.HasPrefix(s.Name, providertest.ExternalPrefix) {
					continue
				}
				if s.Age > conformanceMaxAge {
					continue
				}
				name := s.Labels["namespace"] + "." + s.Labels["queue"]
				if sh, ok := s.Labels["shard"]; ok {
					name += "." + sh
				}
				for k := range s.Labels {
					if k != "namespace" && k != "queue" && k != "shard" {
						t.Fatalf("series %v: label %s has no place in a queue name", s.Labels, k)
					}
				}
				v := s.Value
				fake.vhosts[s.Name] = append(fake.vhosts[s.Name], queueStats{Name: name, Vhost: s.Name, Ready: &v, Unacked: &zero, Consumers: &zero})
			}
			raw, err := json.Marshal(map[string]any{
				"managementURL": "http://rabbit.invalid:15672", "username": "monitor",
				"password": map[string]string{"env": "UNUSED"}, "metrics": metrics,
			})
			if err != nil {
				t.Fatal(err)
			}
			s, err := decodeOptions("options", raw)
			if err != nil {
				t.Fatal(err)
			}
			p, err := newProvider("rabbit", s, deps, fake, nil)
			if err != nil {
				t.Fatal(err)
			}
			return providertest.Backend{Provider: p, Hang: func() { fake.hung.Store(true) }}
		},
		External: true,
		MaxAge:   conformanceMaxAge,
		// a reading is the broker's count now: there is no old value to call stale
		Stale: false,
		// the adapter applies selectors: > and < compare integers
		GtLt: providertest.GtLtFilter,
	})
}

// conformanceMaxAge is the suite's window. The broker has no history (a
// reading is its count now), so the fake leaves out older series.
const conformanceMaxAge = 2 * time.Minute
