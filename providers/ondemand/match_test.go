package ondemand

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

// TestMatcher: the compiled matcher selects the series that the selector
// and the namespace check select on the served labels (seriesView), for
// metrics with and without a namespace and labels of their own.
func TestMatcher(t *testing.T) {
	t.Parallel()
	metrics := []*Metric{
		{Name: "plain"},
		{Name: "scoped", Namespace: "ns1"},
		{Name: "static", Labels: map[string]string{"team": "a", NamespaceLabel: "ns2"}},
		{Name: "static-scoped", Namespace: "ns2", Labels: map[string]string{"team": "b", "key": "q1"}},
	}
	series := []Series{
		{Labels: map[string]string{}},
		{Labels: map[string]string{"key": "q1"}},
		{Labels: map[string]string{"key": "q2", "team": "b"}},
		{Labels: map[string]string{"key": "q1", NamespaceLabel: "ns1"}},
		{Labels: map[string]string{"key": "q2", NamespaceLabel: "ns2", "team": "a"}},
	}
	selectors := []string{"", "key=q1", "key==q1", "key in (q1)", "key in (q1,q2)", "key!=q1", "!key", "key",
		"team=a", "team=b", "namespace=ns1", "namespace=ns2", "key=q1,team=a", "key=q2,team=b", "missing=x", "key notin (q2)"}
	for _, m := range metrics {
		for _, selText := range selectors {
			sel, err := labels.Parse(selText)
			if err != nil {
				t.Fatal(err)
			}
			for _, ns := range []string{"ns1", "ns2"} {
				mt := newMatcher(m, ns, sel)
				for i := range series {
					s := &series[i]
					view := &seriesView{m: m, s: s}
					want := sel.Matches(view)
					if v, ok := view.Lookup(NamespaceLabel); ok && v != ns {
						want = false
					}
					if got := mt.matches(s); got != want {
						t.Errorf("metric %s, namespace %s, selector %q, series %v: matches %v, want %v", m.Name, ns, selText, s.Labels, got, want)
					}
				}
			}
		}
	}
	if mt := newMatcher(metrics[0], "ns1", labels.Nothing()); mt.matches(&series[1]) {
		t.Error("labels.Nothing() matched")
	}
}

// BenchmarkExternalQuery: a query selecting one list of 1,000 behind one
// metric, as each autoscaler of the KEDA benchmark sends.
func BenchmarkExternalQuery(b *testing.B) {
	var series []Series
	for i := range 1000 {
		series = append(series, Series{Labels: map[string]string{"key": fmt.Sprintf("list-%d", i)}, Value: float64(i)})
	}
	m := &Metric{Name: "lists"}
	sel := labels.SelectorFromSet(labels.Set{"key": "list-417"})
	b.Run("compiled", func(b *testing.B) {
		for b.Loop() {
			mt, n := newMatcher(m, "default", sel), 0
			for i := range series {
				if mt.matches(&series[i]) {
					n++
				}
			}
			if n != 1 {
				b.Fatal(n)
			}
		}
	})
	b.Run("view", func(b *testing.B) {
		for b.Loop() {
			view, n := &seriesView{m: m}, 0
			for i := range series {
				view.s = &series[i]
				if ns, ok := view.Lookup(NamespaceLabel); ok && ns != "default" {
					continue
				}
				if sel.Matches(view) {
					n++
				}
			}
			if n != 1 {
				b.Fatal(n)
			}
		}
	})
}
