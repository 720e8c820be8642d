package postgresql

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/metricscale/metricscale/providers"
)

// BenchmarkRead is one reading served, uncached: rows turned into series,
// filtered and sorted by the ondemand provider. 9,999 rows, each with two
// label columns of labelBytes bytes in all (20 KB is the adversarial
// reading of issue 27, which readRows now refuses on a real server; 400 B
// is within maxResultBytes).
//
//	go test -run '^$' -bench BenchmarkRead -benchmem ./providers/postgresql/
func BenchmarkRead(b *testing.B) {
	for _, labelBytes := range []int{400, 20 << 10} {
		b.Run(fmt.Sprintf("rows=9999/labels=%dB", labelBytes), func(b *testing.B) {
			const rows = 9999
			res := &result{columns: []column{textCol("queue"), textCol("pad"), bigintCol("value")}}
			pad := strings.Repeat("p", labelBytes-len("queue-0000")-len("queue")-len("pad"))
			for i := 0; i < rows; i++ {
				// shuffled (7919 is prime to 9999), as a server returns rows
				// in no particular order: sorted or reversed input would
				// spare the sort its comparisons
				res.rows = append(res.rows, []*string{str(fmt.Sprintf("queue-%04d", i*7919%rows)), str(pad), str(fmt.Sprint(i))})
			}
			raw, _ := json.Marshal(map[string]any{"host": "db.invalid", "database": "d", "user": "u", "cacheTTL": "0s",
				"metrics": []map[string]any{{"name": "jobs", "query": "SELECT queue, pad, value FROM jobs"}}})
			s, err := decodeOptions("options", raw)
			if err != nil {
				b.Fatal(err)
			}
			p, err := newProvider("bench", s, providers.Deps{}, &fakeQuerier{answer: func(context.Context, string) (*result, error) { return res, nil }})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				list, err := p.GetExternalMetric(context.Background(), "default", labels.Everything(), providers.ExternalMetricInfo{Metric: "jobs"})
				if err != nil || len(list.Items) != rows || list.Items[0].MetricLabels["queue"] != "queue-0000" {
					b.Fatalf("%v: %d items", err, len(list.Items))
				}
			}
		})
	}
}
