package prometheus

import (
	"slices"
	"strings"
	"sync"

	pmodel "github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	"k8s.io/metrics/pkg/apis/external_metrics"

	"github.com/metricscale/metricscale/providers"
)

// externalSet is one whole-metric answer prepared once for every external
// query it serves: items with their label maps and their values' text
// already computed, and an index per label built on first use. Everything
// in it is shared by concurrent requests and read-only.
type externalSet struct {
	items []external_metrics.ExternalMetricValue
	keys  map[string]bool // label names at least one item has
	// refused holds, by item position, why an item's value may not be
	// served (providers.CheckValue); nil when every value may be. A
	// selection holding a refused item is refused, one without it is
	// served: a NaN on queue a does not fail queue=b.
	refused map[int32]error

	mu    sync.Mutex
	index map[string]map[string][]int32 // label → value → item positions
}

func newExternalSet(provider, metric string, v pmodel.Value, policy providers.ValuePolicy) (*externalSet, error) {
	vec, err := vectorOf(v)
	if err != nil {
		return nil, err
	}
	set := &externalSet{items: make([]external_metrics.ExternalMetricValue, 0, len(vec)), keys: map[string]bool{}}
	for _, s := range vec {
		if s == nil {
			continue
		}
		lbls := make(map[string]string, len(s.Metric))
		for k, v := range s.Metric {
			lbls[string(k)] = string(v)
			set.keys[string(k)] = true
		}
		var q resource.Quantity
		if err := providers.CheckValue(provider, metric, labels.Set(lbls).String(), float64(s.Value), policy); err != nil {
			if set.refused == nil {
				set.refused = map[int32]error{}
			}
			set.refused[int32(len(set.items))] = err
		} else {
			q = quantityText(float64(s.Value))
		}
		set.items = append(set.items, external_metrics.ExternalMetricValue{
			MetricName:   metric,
			MetricLabels: lbls,
			Timestamp:    metav1.NewTime(s.Timestamp.Time()),
			Value:        q,
		})
	}
	return set, nil
}

// all returns every item, or the refusal of the first refused one.
func (s *externalSet) all() ([]external_metrics.ExternalMetricValue, error) {
	for i := range s.items {
		if err := s.refused[int32(i)]; err != nil {
			return nil, err
		}
	}
	return s.items, nil
}

// quantityText is Quantity with its text computed once: the response
// encoder of every request that shares the value reuses it.
func quantityText(v float64) resource.Quantity {
	q := Quantity(v)
	_ = q.String()
	return q
}

// positions returns the items whose label key has value, indexing key on
// first use.
func (s *externalSet) positions(key, value string) []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.index == nil {
		s.index = map[string]map[string][]int32{}
	}
	idx, ok := s.index[key]
	if !ok {
		idx = map[string][]int32{}
		for i, it := range s.items {
			if v, ok := it.MetricLabels[key]; ok {
				idx[v] = append(idx[v], int32(i))
			}
		}
		s.index[key] = idx
	}
	return idx[value]
}

// selectItems applies sel to the set. ok is false when the answer could
// differ from putting sel into the query as label matchers (see
// filterableRequirement, and a selected label that no item has: the query
// aggregates it away, so only matchers inside the query can apply it); the
// caller then queries with the matchers, as prometheus-adapter does. err is
// the refusal of a selected item's value.
func (s *externalSet) selectItems(sel labels.Selector) (items []external_metrics.ExternalMetricValue, ok bool, err error) {
	if sel == nil || sel.Empty() {
		items, err = s.all()
		return items, true, err
	}
	reqs, selectable := sel.Requirements()
	if !selectable {
		return nil, false, nil
	}
	var candidates []int32
	narrowed := false
	for i := range reqs {
		r := &reqs[i]
		if !filterableRequirement(r) || !s.keys[r.Key()] {
			return nil, false, nil
		}
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			var pos []int32
			vals := r.ValuesUnsorted()
			for _, v := range vals {
				pos = append(pos, s.positions(r.Key(), v)...)
			}
			if len(vals) > 1 {
				slices.Sort(pos)
			}
			if !narrowed || len(pos) < len(candidates) {
				candidates, narrowed = pos, true
			}
		}
	}
	pick := func(i int32) error {
		if !sel.Matches(labels.Set(s.items[i].MetricLabels)) {
			return nil
		}
		if err := s.refused[i]; err != nil {
			return err
		}
		items = append(items, s.items[i])
		return nil
	}
	if !narrowed {
		for i := range s.items {
			if err := pick(int32(i)); err != nil {
				return nil, true, err
			}
		}
		return items, true, nil
	}
	items = make([]external_metrics.ExternalMetricValue, 0, len(candidates))
	for _, i := range candidates {
		if err := pick(i); err != nil {
			return nil, true, err
		}
	}
	return items, true, nil
}

// filterableRequirement tells whether matching r against result labels
// gives what its PromQL matcher gives against the input series: the key
// must be a PromQL label name (else Prometheus refuses the query), no value
// may be empty (PromQL's l="" also matches a missing label, Kubernetes'
// l= does not), and in/notin values (rendered =~"a|b", a regular
// expression) must hold no "." (any character there, itself here).
func filterableRequirement(r *labels.Requirement) bool {
	if !promLabelName(r.Key()) {
		return false
	}
	for _, v := range r.ValuesUnsorted() {
		if v == "" {
			return false
		}
		if (r.Operator() == selection.In || r.Operator() == selection.NotIn) && strings.ContainsAny(v, `.\^$*+?()[]{}|`) {
			return false
		}
	}
	switch r.Operator() {
	case selection.Equals, selection.DoubleEquals, selection.NotEquals, selection.In, selection.NotIn,
		selection.Exists, selection.DoesNotExist:
		return true
	}
	return false
}

func promLabelName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// objectSet is one answer of a custom rule's query for all objects of a
// namespace, by object name, with values prepared as in externalSet.
type objectSet struct {
	values map[string]custom_metrics.MetricValue
	// refused holds, by object name, why its value may not be served.
	refused map[string]error
}
