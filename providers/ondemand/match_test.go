package ondemand

import (
	"fmt"
	"testing"
	"time"

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
// metric, as each autoscaler of the KEDA benchmark sends: every series
// tested by the compiled matcher, or through the view; or the reading's
// index (built at the first query).
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
	b.Run("indexed", func(b *testing.B) {
		r := newReading(series, time.Time{})
		for b.Loop() {
			mt, n := newMatcher(m, "default", sel), 0
			for _, i := range mt.candidates(r) {
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

// TestIndexedQueries: the series a query takes from a reading's index are
// those a test of every series selects, in the same order, whichever
// label the index was built on.
func TestIndexedQueries(t *testing.T) {
	t.Parallel()
	series := []Series{
		{Labels: map[string]string{"key": "q1", "tier": "a"}},
		{Labels: map[string]string{"key": "q2", "tier": "a", NamespaceLabel: "ns1"}},
		{Labels: map[string]string{"tier": "b"}},
		{Labels: map[string]string{"key": "q1", "tier": "b", NamespaceLabel: "ns2"}},
		{Labels: map[string]string{"key": "q3"}},
	}
	metrics := []*Metric{{Name: "plain"}, {Name: "static", Labels: map[string]string{"tier": "a"}}}
	// Each sequence starts with a fresh reading: its first query decides
	// the label indexed.
	sequences := [][]string{
		{"key=q1", "key=q2", "key=none", "tier=b", "key=q1,tier=b", "", "key in (q1,q2)"},
		{"tier=a", "key=q1", "tier=b", "!key"},
		{"key==q3,tier!=a", "key=q3"},
	}
	for _, m := range metrics {
		for _, seq := range sequences {
			r := newReading(series, time.Time{})
			for _, text := range seq {
				sel, err := labels.Parse(text)
				if err != nil {
					t.Fatal(err)
				}
				for _, ns := range []string{"ns1", "ns2"} {
					mt := newMatcher(m, ns, sel)
					var want, got []int
					for i := range series {
						if mt.matches(&series[i]) {
							want = append(want, i)
						}
					}
					if c := mt.candidates(r); c != nil {
						for _, i := range c {
							if mt.matches(&series[i]) {
								got = append(got, int(i))
							}
						}
					} else {
						got = want
					}
					if fmt.Sprint(got) != fmt.Sprint(want) {
						t.Errorf("metric %s, sequence %q, selector %q, namespace %s: %v, want %v", m.Name, seq, text, ns, got, want)
					}
				}
			}
		}
	}
	// The index is used: a query on the indexed label gets only its series.
	r := newReading(series, time.Time{})
	if c := newMatcher(metrics[0], "ns1", labels.SelectorFromSet(labels.Set{"key": "q1"})).candidates(r); fmt.Sprint(c) != "[0 3]" {
		t.Errorf("candidates of key=q1: %v, want [0 3]", c)
	}
	if c := newMatcher(metrics[0], "ns1", labels.SelectorFromSet(labels.Set{"key": "none"})).candidates(r); c == nil || len(c) != 0 {
		t.Errorf("candidates of key=none: %#v, want none (not every series)", c)
	}
}
