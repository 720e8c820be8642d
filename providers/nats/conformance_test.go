package nats

import (
	"encoding/json"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/providertest"
)

// conformanceMaxAge is the window the harness applies to the suite's data:
// the provider reads live state and serves nothing old, so series older
// than it are left out of the backend, as a deleted consumer would be.
const conformanceMaxAge = 5 * time.Minute

// TestConformance runs the provider conformance suite over the fake
// JetStream API: each series of the data is one consumer whose pending count
// is the series' value, configured as a series entry with its namespace and
// labels.
func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.Run(t, providertest.Harness{
		New: func(t *testing.T, deps providers.Deps, data providertest.Data) providertest.Backend {
			f := newFakeAPI(t)
			byMetric := map[string][]SeriesOption{}
			for i, s := range data.Series {
				if s.Age > conformanceMaxAge {
					continue
				}
				so := SeriesOption{Stream: "S", Consumer: fmt.Sprintf("c%d", i), Labels: map[string]string{}}
				for k, v := range s.Labels {
					if k == "namespace" {
						so.Namespace = v
					} else {
						so.Labels[k] = v
					}
				}
				f.setConsumer(so.Stream, so.Consumer, uint64(s.Value), 0)
				byMetric[s.Name] = append(byMetric[s.Name], so)
			}
			if len(byMetric) == 0 {
				// no data, but a configured metric still: the backend has
				// no such consumer (yet)
				byMetric[providertest.ExternalPrefix+"queue"] = []SeriesOption{{Stream: "S", Consumer: "absent"}}
			}
			o := Options{Servers: []string{"nats://127.0.0.1:4222"}}
			names := make([]string, 0, len(byMetric))
			for n := range byMetric {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				mo := MetricOptions{Value: ValuePending, Series: byMetric[n]}
				mo.Name = n
				o.Metrics = append(o.Metrics, mo)
			}
			// through the strict options, as the adapter would read them
			raw, err := json.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			po, err := decodeOptions("options", raw)
			if err != nil {
				t.Fatal(err)
			}
			p, err := newProvider("nats", &po.Options, f, deps.Clock, deps.Changes)
			if err != nil {
				t.Fatal(err)
			}
			return providertest.Backend{Provider: p, Hang: func() { f.hung.Store(true) }}
		},
		External: true,
		Custom:   false,
		MaxAge:   conformanceMaxAge,
		// the provider has no max age of its own: values are read live
		Stale: false,
		// selectors are labels.Selector, > and < compare integers
		GtLt: providertest.GtLtFilter,
	})
}
