package postgresql

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/providertest"
)

var testNow = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// window is how old a row the conformance fake still returns: a table of
// samples queried with "WHERE at > now() - interval '5 minutes'".
const window = 5 * time.Minute

// TestConformance runs the provider conformance suite with a fake at the
// querier seam: one query per suite metric, whose rows are the metric's
// series newer than the window (label columns: the series' labels).
func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.Run(t, providertest.Harness{
		New: func(t *testing.T, deps providers.Deps, data providertest.Data) providertest.Backend {
			byQuery := map[string]*result{}
			var metrics []map[string]any
			byName := map[string][]providertest.Series{}
			for _, s := range data.Series {
				byName[s.Name] = append(byName[s.Name], s)
			}
			// the config is the suite's metrics, whatever the table holds
			for _, suffix := range []string{"queue", "stale", "mixed"} {
				name := providertest.ExternalPrefix + suffix
				q := fmt.Sprintf("SELECT * FROM samples WHERE metric = '%s' AND at > now() - interval '5 minutes'", name)
				metrics = append(metrics, map[string]any{"name": name, "query": q})
				byQuery[q] = rowsOf(byName[name])
			}
			raw, err := json.Marshal(map[string]any{"host": "db.invalid", "database": "d", "user": "u", "metrics": metrics})
			if err != nil {
				t.Fatal(err)
			}
			s, err := decodeOptions("options", raw)
			if err != nil {
				t.Fatal(err)
			}
			var hung atomic.Bool
			release := make(chan struct{})
			var once sync.Once
			t.Cleanup(func() { once.Do(func() { close(release) }) })
			q := &fakeQuerier{answer: func(ctx context.Context, sql string) (*result, error) {
				if hung.Load() {
					select {
					case <-release:
					case <-ctx.Done():
						return nil, ctx.Err()
					}
				}
				r, ok := byQuery[sql]
				if !ok {
					return nil, fmt.Errorf("no table for %s", sql)
				}
				return r, nil
			}}
			p, err := newProvider("pg", s, deps, q)
			if err != nil {
				t.Fatal(err)
			}
			return providertest.Backend{Provider: p, Hang: func() { hung.Store(true) }}
		},
		External: true,
		MaxAge:   window,
		// the query's WHERE leaves old rows out: nothing to call stale
		Stale: false,
		// ondemand matches selectors as labels.Selector does
		GtLt: providertest.GtLtFilter,
	})
}

// rowsOf is the result of a metric's query: a text column per label, the
// value as double precision, rows older than the window left out.
func rowsOf(series []providertest.Series) *result {
	keys := map[string]bool{}
	for _, s := range series {
		for k := range s.Labels {
			keys[k] = true
		}
	}
	var names []string
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	res := &result{}
	for _, n := range names {
		res.columns = append(res.columns, textCol(n))
	}
	res.columns = append(res.columns, column{name: "value", typeOID: 701, typeName: "float8"})
	for _, s := range series {
		if s.Age > window {
			continue
		}
		row := make([]*string, 0, len(names)+1)
		for _, n := range names {
			if v, ok := s.Labels[n]; ok {
				row = append(row, str(v))
			} else {
				row = append(row, nil)
			}
		}
		res.rows = append(res.rows, append(row, str(strconv.FormatFloat(s.Value, 'g', -1, 64))))
	}
	return res
}
