package rules

import (
	"sort"

	pmodel "github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
)

// Entry is what serves one discovered metric: its rule and the series name
// the rule's template sees as .Series.
type Entry struct {
	Rule   *Rule
	Series string
}

// CustomKey identifies a custom metric: the canonical resource and the name.
type CustomKey struct {
	GR     schema.GroupResource
	Metric string
}

// Discovery is the set of metrics a relist found.
type Discovery struct {
	Custom       map[CustomKey]Entry
	CustomList   []provider.CustomMetricInfo
	External     map[string]Entry
	ExternalList []provider.ExternalMetricInfo
}

// Discover names the series each rule's seriesQuery returned (series, keyed
// by seriesQuery), as prometheus-adapter's series registries do: a series
// passing the rule's filters becomes a custom metric of every resource one
// of its labels names, or one external metric. When several series or rules
// give one metric, the last rule (and series) wins, as there.
func Discover(set *Set, series map[string][]pmodel.LabelSet) *Discovery {
	d := &Discovery{Custom: map[CustomKey]Entry{}, External: map[string]Entry{}}
	type named struct {
		metric string
		ok     bool
	}
	// many series share a name: run the rule's regular expressions once each
	var names map[string]named
	metricName := func(r *Rule, name string) (string, bool) {
		if n, ok := names[name]; ok {
			return n.metric, n.ok
		}
		n := named{}
		if r.Keep(name) {
			n.metric, n.ok = r.MetricName(name)
		}
		names[name] = n
		return n.metric, n.ok
	}
	namespaced := map[CustomKey]bool{}
	for _, r := range set.Custom {
		conv := r.Converter()
		names = map[string]named{}
		for _, ls := range series[r.seriesQuery] {
			name := string(ls[pmodel.MetricNameLabel])
			metric, ok := metricName(r, name)
			if !ok {
				continue
			}
			for lbl := range ls {
				if lbl == pmodel.MetricNameLabel {
					continue
				}
				res, ok := conv.ResourceForLabel(string(lbl))
				if !ok {
					continue
				}
				k := CustomKey{GR: res.GR, Metric: metric}
				d.Custom[k] = Entry{Rule: r, Series: name}
				// the resource's scope, where prometheus-adapter derives it
				// from the series' other labels
				namespaced[k] = res.Namespaced && !res.IsNamespace()
			}
		}
	}
	for _, r := range set.External {
		names = map[string]named{}
		for _, ls := range series[r.seriesQuery] {
			name := string(ls[pmodel.MetricNameLabel])
			metric, ok := metricName(r, name)
			if !ok {
				continue
			}
			d.External[metric] = Entry{Rule: r, Series: name}
		}
	}
	d.CustomList = make([]provider.CustomMetricInfo, 0, len(d.Custom))
	for k := range d.Custom {
		d.CustomList = append(d.CustomList, provider.CustomMetricInfo{GroupResource: k.GR, Namespaced: namespaced[k], Metric: k.Metric})
	}
	sort.Slice(d.CustomList, func(i, j int) bool {
		a, b := d.CustomList[i], d.CustomList[j]
		if a.Metric != b.Metric {
			return a.Metric < b.Metric
		}
		return a.GroupResource.String() < b.GroupResource.String()
	})
	d.ExternalList = make([]provider.ExternalMetricInfo, 0, len(d.External))
	for m := range d.External {
		d.ExternalList = append(d.ExternalList, provider.ExternalMetricInfo{Metric: m})
	}
	sort.Slice(d.ExternalList, func(i, j int) bool { return d.ExternalList[i].Metric < d.ExternalList[j].Metric })
	return d
}
