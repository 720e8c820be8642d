package ondemand

import (
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
	static := func(key string) (string, bool) {
		if key == NamespaceLabel && m.Namespace != "" {
			return m.Namespace, true
		}
		v, ok := m.Labels[key]
		return v, ok
	}
	if v, ok := static(NamespaceLabel); ok {
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
		if v, ok := static(r.Key()); ok {
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
