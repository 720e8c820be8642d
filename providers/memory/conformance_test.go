package memory

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/providertest"
)

// TestConformance runs the provider conformance suite: the memory provider
// built by its factory, the data pushed with their timestamps.
func TestConformance(t *testing.T) {
	t.Parallel()
	const maxAge = 2 * time.Minute
	providertest.Run(t, providertest.Harness{
		New: func(t *testing.T, deps providers.Deps, data providertest.Data) providertest.Backend {
			opts, err := json.Marshal(map[string]string{"maxAge": maxAge.String()})
			if err != nil {
				t.Fatal(err)
			}
			// A TTL well past maxAge: the suite's stale series must be
			// kept (and answered as stale), not deleted.
			p, err := Factory{SeriesTTL: 10 * maxAge}.New("mem", opts, deps)
			if err != nil {
				t.Fatal(err)
			}
			var samples []providers.Sample
			for _, s := range data.Series {
				samples = append(samples, providers.Sample{Name: s.Name, Labels: s.Labels, Value: s.Value, Timestamp: data.Timestamp(s)})
			}
			if len(samples) > 0 {
				if err := p.(providers.Appender).Append(samples); err != nil {
					t.Fatal(err)
				}
			}
			// answers from memory: no backend to hang
			return providertest.Backend{Provider: p}
		},
		Custom:   true,
		External: true,
		MaxAge:   maxAge,
		Stale:    true,
		// labels.Selector compares label values as integers
		GtLt: providertest.GtLtFilter,
	})
}
