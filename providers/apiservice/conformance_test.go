package apiservice

import (
	"context"
	"testing"
	"time"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/providertest"
)

// TestConformance runs the suite against the provider forwarding to a real
// custom-metrics-apiserver (see remote) that serves the suite's data from a
// memory provider over the suite's pods: what the suite checks (404s,
// namespaces, selectors, staleness, hanging) is what the provider passes
// through from a real remote adapter.
func TestConformance(t *testing.T) {
	t.Parallel()
	const maxAge = 2 * time.Minute
	providertest.Run(t, providertest.Harness{
		New: func(t *testing.T, deps providers.Deps, data providertest.Data) providertest.Backend {
			r := newRemote(t, deps, maxAge)
			var samples []providers.Sample
			for _, s := range data.Series {
				samples = append(samples, providers.Sample{Name: s.Name, Labels: s.Labels, Value: s.Value, Timestamp: data.Timestamp(s)})
			}
			if len(samples) > 0 {
				if err := r.mem.Append(samples); err != nil {
					t.Fatal(err)
				}
			}
			p, err := Factory{}.New("federated", r.options(nil), deps)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.(*Provider).Refresh(context.Background()); err != nil {
				t.Fatal(err)
			}
			return providertest.Backend{Provider: p, Hang: func() { r.hung.Store(true) }}
		},
		Custom:   true,
		External: true,
		MaxAge:   maxAge,
		// the remote's "stale" 404 comes back as a 404 naming the metric
		Stale: false,
		// passed through to the remote, which compares as labels.Selector does
		GtLt: providertest.GtLtFilter,
	})
}
