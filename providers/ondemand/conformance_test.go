package ondemand

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/providertest"
)

// TestConformance runs the suite over metrics read from an in-memory
// "broker": a series older than the window is what a broker answering now
// would not return, so the reads leave it out.
func TestConformance(t *testing.T) {
	t.Parallel()
	const ttl = time.Minute
	providertest.Run(t, providertest.Harness{
		External: true,
		MaxAge:   ttl,
		GtLt:     providertest.GtLtFilter,
		New: func(t *testing.T, deps providers.Deps, data providertest.Data) providertest.Backend {
			release := make(chan struct{})
			var hung bool
			var mu sync.Mutex
			var once sync.Once
			t.Cleanup(func() { once.Do(func() { close(release) }) })
			byName := map[string][]Series{}
			for _, s := range data.Series {
				if _, ok := byName[s.Name]; !ok {
					byName[s.Name] = nil
				}
				if s.Age <= ttl {
					byName[s.Name] = append(byName[s.Name], Series{Labels: s.Labels, Value: s.Value})
				}
			}
			var names []string
			for n := range byName {
				names = append(names, n)
			}
			sort.Strings(names)
			var metrics []Metric
			for _, n := range names {
				series := byName[n]
				metrics = append(metrics, Metric{Name: n, Read: func(ctx context.Context) ([]Series, error) {
					mu.Lock()
					h := hung
					mu.Unlock()
					if h {
						select {
						case <-release:
						case <-ctx.Done():
							return nil, ctx.Err()
						}
					}
					return series, nil
				}})
			}
			p, err := New("conformance", metrics, Options{Clock: deps.Clock, CacheTTL: 0})
			if err != nil {
				t.Fatal(err)
			}
			return providertest.Backend{Provider: p, Hang: func() {
				mu.Lock()
				hung = true
				mu.Unlock()
			}}
		},
	})
}
