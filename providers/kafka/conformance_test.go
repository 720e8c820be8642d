package kafka

import (
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/providertest"
)

// conformanceMaxAge is the window of the suite's data: the fake leaves
// out older series, as a broker has only its current offsets.
const conformanceMaxAge = time.Minute

// TestConformance runs the provider conformance suite over a fake admin.
// Each series of the data is a topic whose name carries its labels
// ("queue.a.q1.1" for conformance_external_queue{namespace=a,queue=q1,
// shard=1}); the metric matches its topics with a regex whose named
// capture groups give the labels back, and the fake's offsets make the
// group's lag the series' value.
func TestConformance(t *testing.T) {
	t.Parallel()
	providertest.Run(t, providertest.Harness{
		New: func(t *testing.T, deps providers.Deps, data providertest.Data) providertest.Backend {
			f := &fakeAdmin{start: offsets{}, end: offsets{}, committed: map[string]offsets{}, hang: make(chan struct{})}
			var once sync.Once
			t.Cleanup(func() { once.Do(func() { close(f.hang) }) })

			keys := map[string][]string{} // metric suffix → its label names, sorted
			// the suite's queue metric even with no data: discovery lists it
			keys[strings.TrimPrefix(providertest.ExternalPrefix+"queue", providertest.ExternalPrefix)] = nil
			for _, s := range data.Series {
				if !strings.HasPrefix(s.Name, providertest.ExternalPrefix) {
					continue
				}
				suffix := strings.TrimPrefix(s.Name, providertest.ExternalPrefix)
				names := make([]string, 0, len(s.Labels))
				for k := range s.Labels {
					names = append(names, k)
				}
				sort.Strings(names)
				if prev, ok := keys[suffix]; ok && prev != nil && strings.Join(prev, ",") != strings.Join(names, ",") {
					t.Fatalf("series of %s have different label names: %v, %v", s.Name, prev, names)
				}
				keys[suffix] = names
				if s.Age > conformanceMaxAge {
					continue // no longer on the broker
				}
				topic := suffix
				for _, k := range names {
					topic += "." + s.Labels[k]
				}
				group := "g-" + suffix
				f.topics = append(f.topics, topic)
				f.start[topic] = map[int32]int64{0: 0}
				f.end[topic] = map[int32]int64{0: int64(s.Value)}
				if f.committed[group] == nil {
					f.committed[group] = offsets{}
				}
				f.committed[group][topic] = map[int32]int64{0: 0}
			}
			o := &Options{Brokers: []string{"unused:9092"}}
			for suffix, names := range keys {
				re := regexp.QuoteMeta(suffix)
				for _, k := range names {
					re += `\.(?P<` + k + `>[^.]+)`
				}
				m := MetricOptions{Group: "g-" + suffix, TopicRegex: re}
				m.Name = providertest.ExternalPrefix + suffix
				o.Metrics = append(o.Metrics, m)
			}
			// every query reads: the suite's checks must not see a cached answer
			o.CacheTTL = &metav1.Duration{}
			if err := o.validate("options"); err != nil {
				t.Fatal(err)
			}
			p, err := build("kafka-conformance", o, f, deps, "")
			if err != nil {
				t.Fatal(err)
			}
			return providertest.Backend{Provider: p, Hang: func() { f.hung.Store(true) }}
		},
		External: true,
		Custom:   false,
		MaxAge:   conformanceMaxAge,
		// a broker keeps no history: an old series is simply absent (404)
		Stale: false,
		// label values are compared as labels.Selector does
		GtLt: providertest.GtLtFilter,
	})
}
