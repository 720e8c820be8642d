package ondemand

import (
	"sync"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// matcher says which series of a metric a query selects: in its namespace
// (when the series has one) and matching the selector, both on the served
// labels (seriesView).
type matcher struct {
	never bool
	// eqs, when generic is nil, are the whole test: equalities on the
	// backend's labels, the labels the metric sets having been decided once.
	eqs     []labelEq
	generic labels.Selector
	view    seriesView
}

type labelEq struct {
	key, value string
	// optional: a series without the label passes (the namespace check).
	optional bool
}

// newMatcher compiles the namespace check and sel for m. A selector of
// equalities (an HPA's matchLabels) becomes one map lookup a series: each
// query tests every series of the metric, and at 1,000 lists behind one
// metric the generic selector's lookups through the view were most of a
// query's CPU.
func newMatcher(m *Metric, namespace string, sel labels.Selector) *matcher {
	mt := &matcher{view: seriesView{m: m}}
	if v, ok := m.staticLabel(NamespaceLabel); ok {
		mt.never = v != namespace
	} else {
		mt.eqs = append(mt.eqs, labelEq{key: NamespaceLabel, value: namespace, optional: true})
	}
	reqs, selectable := sel.Requirements()
	if !selectable {
		mt.never = true
		return mt
	}
	for _, r := range reqs {
		op, values := r.Operator(), r.ValuesUnsorted()
		if (op != selection.Equals && op != selection.DoubleEquals && op != selection.In) || len(values) != 1 {
			mt.generic = sel
			return mt
		}
		if v, ok := m.staticLabel(r.Key()); ok {
			mt.never = mt.never || v != values[0]
			continue
		}
		mt.eqs = append(mt.eqs, labelEq{key: r.Key(), value: values[0]})
	}
	return mt
}

func (mt *matcher) matches(s *Series) bool {
	if mt.never {
		return false
	}
	for _, eq := range mt.eqs {
		v, ok := s.Labels[eq.key]
		if !ok && eq.optional {
			continue
		}
		if !ok || v != eq.value {
			return false
		}
	}
	if mt.generic == nil {
		return true
	}
	mt.view.s = s
	return mt.generic.Matches(&mt.view)
}

// candidates are the positions in r of the only series that can match:
// those with the value of the first equality on a backend label, from r's
// index. nil means every series (no such equality, or the index is of
// another label).
func (mt *matcher) candidates(r reading) []int32 {
	if mt.never || mt.generic != nil || r.index == nil {
		return nil
	}
	for _, eq := range mt.eqs {
		if !eq.optional {
			if c, ok := r.index.of(r.series, eq.key, eq.value); ok {
				if c == nil {
					c = []int32{}
				}
				return c
			}
			return nil
		}
	}
	return nil
}

// seriesIndex finds a reading's series by the value of one label: the
// label of the first query that selects on one, as each autoscaler of a
// metric holding many lists selects its own. Built once per reading, it
// replaces a test of every series at each query (at 1,000 series, most of
// the adapter's CPU between changes).
type seriesIndex struct {
	mu    sync.Mutex
	key   string
	built bool
	byVal map[string][]int32
}

// of returns the positions of the series whose label key has value, in
// order, and false when the index is of another label.
func (x *seriesIndex) of(series []Series, key, value string) ([]int32, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.built {
		x.key, x.built = key, true
		x.byVal = make(map[string][]int32, len(series))
		for i := range series {
			if v, ok := series[i].Labels[key]; ok {
				x.byVal[v] = append(x.byVal[v], int32(i))
			}
		}
	}
	if x.key != key {
		return nil, false
	}
	return x.byVal[value], true
}
