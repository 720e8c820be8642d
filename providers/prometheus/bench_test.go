package prometheus

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// podMatcher finds the pod names a rendered query asks for.
var podMatcher = regexp.MustCompile(`pod=~?"([^"]*)"`)

// answerPods answers every pod the query names with one sample per
// container label value ("app"), for custom and resource queries alike.
func answerPods(q string) ([]sample, error) {
	m := podMatcher.FindStringSubmatch(q)
	if m == nil {
		return nil, nil
	}
	names := strings.Split(m[1], "|")
	out := make([]sample, 0, len(names))
	for _, n := range names {
		out = append(out, sample{map[string]string{"pod": n, "container": "app"}, "1.5"})
	}
	return out, nil
}

// benchLister has 1,000 apps of 5 pods each in namespace default.
func benchLister() (*objectLister, []labels.Selector) {
	pods := map[string]labels.Set{}
	sels := make([]labels.Selector, 1000)
	for a := range 1000 {
		for i := range 5 {
			pods[fmt.Sprintf("app-%d-%d", a, i)] = labels.Set{"app": fmt.Sprintf("app-%d", a)}
		}
		sels[a] = labels.SelectorFromSet(labels.Set{"app": fmt.Sprintf("app-%d", a)})
	}
	return &objectLister{objects: map[schema.GroupResource]map[string]map[string]labels.Set{
		{Resource: "pods"}: {"default": pods},
	}}, sels
}

// BenchmarkSelectorQuery rotates GetMetricBySelector over 1,000 selectors
// against the fake Prometheus; promql/op is PromQL calls per API query.
func BenchmarkSelectorQuery(b *testing.B) {
	for _, bc := range []struct {
		name     string
		extra    string
		parallel bool
	}{
		{"serial", "", false},
		{"parallel", "", true},
		{"parallel-cache5s", `"queryCacheTTL":"5s"`, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			f := newFakeProm(b)
			f.addTestSeries()
			f.answer = answerPods
			objs, sels := benchLister()
			p := newTestProvider(b, f, bc.extra, objs)
			ctx := context.Background()
			query := func(i int) {
				if _, err := p.GetMetricBySelector(ctx, "default", sels[i%len(sels)], podsInfo, labels.Everything()); err != nil {
					b.Fatal(err)
				}
			}
			before := f.queries.Load()
			b.ResetTimer()
			if bc.parallel {
				// 8 clients (HPAs) per CPU asking the same rotation
				b.SetParallelism(8)
				b.RunParallel(func(pb *testing.PB) {
					i := 0
					for pb.Next() {
						query(i)
						i++
					}
				})
			} else {
				for i := 0; b.Loop(); i++ {
					query(i)
				}
			}
			b.ReportMetric(float64(f.queries.Load()-before)/float64(b.N), "promql/op")
		})
	}
}

// BenchmarkPodsQuery asks metrics.k8s.io for 20 pods of one namespace:
// one CPU and one memory query.
func BenchmarkPodsQuery(b *testing.B) {
	for _, bc := range []struct {
		name  string
		extra string
	}{
		{"nocache", ""},
		{"cache5s", `"queryCacheTTL":"5s"`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			f := newFakeProm(b)
			f.addTestSeries()
			f.answer = answerPods
			p := newTestProvider(b, f, bc.extra, nil)
			pods := make([]types.NamespacedName, 20)
			for i := range pods {
				pods[i] = types.NamespacedName{Namespace: "default", Name: fmt.Sprintf("web-%d", i)}
			}
			before := f.queries.Load()
			for b.Loop() {
				got, err := p.GetPodMetrics(context.Background(), pods)
				if err != nil || len(got) != len(pods) {
					b.Fatalf("%d pods, %v", len(got), err)
				}
			}
			b.ReportMetric(float64(f.queries.Load()-before)/float64(b.N), "promql/op")
		})
	}
}
