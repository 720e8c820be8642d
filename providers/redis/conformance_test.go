package redis

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/providertest"
)

// conformanceMaxAge is only what the suite calls old: Redis answers "now",
// so the fake never holds a series older than it.
const conformanceMaxAge = time.Minute

// conformanceLabels are the labels of the suite's series, each encoded as a
// "/"-separated part of a list's key, so labelsFrom gives them back.
var conformanceLabels = []string{"namespace", "queue", "shard"}

// TestConformance runs the provider conformance suite: each suite series is
// a list "<metric>/<namespace>/<queue>/<shard>" of the fake, each suite
// metric a listLength metric over "<metric>/*" whose labelsFrom turns the
// key back into the series' labels.
func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.Run(t, providertest.Harness{
		New: func(t *testing.T, deps providers.Deps, data providertest.Data) providertest.Backend {
			fake := newFake(t)
			// the metrics are configured, whatever the data holds
			names := map[string]bool{}
			for _, n := range []string{"queue", "stale", "mixed"} {
				names[providertest.ExternalPrefix+n] = true
			}
			for _, s := range data.Series {
				if !strings.HasPrefix(s.Name, providertest.ExternalPrefix) {
					continue
				}
				names[s.Name] = true
				if s.Age > conformanceMaxAge {
					continue // a broker answering "now" has no old value
				}
				parts := []string{s.Name}
				for _, l := range conformanceLabels {
					parts = append(parts, s.Labels[l])
				}
				for l := range s.Labels {
					if !contains(conformanceLabels, l) {
						t.Fatalf("series %s has label %q the harness cannot encode", s.Name, l)
					}
				}
				fake.lists[strings.Join(parts, "/")] = int64(s.Value)
			}
			var metrics []MetricEntry
			for n := range names {
				m := MetricEntry{Type: ListLength, KeyPattern: n + "/*", LabelsFrom: "^[^/]+/(?P<namespace>[^/]*)/(?P<queue>[^/]*)/(?P<shard>[^/]*)$"}
				m.Name = n
				metrics = append(metrics, m)
			}
			sort.Slice(metrics, func(i, j int) bool { return metrics[i].Name < metrics[j].Name })
			raw, err := json.Marshal(Options{Address: "127.0.0.1:1", Metrics: metrics})
			if err != nil {
				t.Fatal(err)
			}
			s, err := decodeOptions("options", raw)
			if err != nil {
				t.Fatalf("options %s: %v", raw, err)
			}
			p, err := newProvider("redis", s, fake, deps.Clock, deps.Changes)
			if err != nil {
				t.Fatal(err)
			}
			return providertest.Backend{Provider: p, Hang: fake.hang}
		},
		External: true,
		Custom:   false,
		MaxAge:   conformanceMaxAge,
		// Redis holds no timestamps: an old value is never read, so no 404
		// says stale (the suite checks it is not served)
		Stale: false,
		// selectors are applied by ondemand with labels.Selector semantics
		GtLt: providertest.GtLtFilter,
	})
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
