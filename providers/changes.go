package providers

import (
	"sort"
	"strings"
	"time"
)

// Change tells that the value of a series changed, appeared or went away, so
// that whoever reads the metric can read it again now rather than at its
// next period. Providers that know the moment a value changes (pushed
// series) publish changes; the adapter serves them as its change feed
// (package changefeed).
type Change struct {
	// Kind limits the change to "external" or "custom" metrics; empty:
	// both (a pushed series is served as both).
	Kind string
	// Metric is the metric name.
	Metric string
	// Namespace is the series' namespace (its namespace label); empty: a
	// series of every namespace.
	Namespace string
	// Labels are the series' labels, not including the metric name. The
	// receiver must not modify them.
	Labels map[string]string
	// All: every series of the metric (in Namespace, if set) changed;
	// Labels is ignored.
	All bool
}

// ChangeSink receives changes. Publish must not block: a provider calls it
// on its write path, after the value is stored (so that a reader reacting
// to the change reads the new value).
type ChangeSink interface {
	Publish(c Change)
}

// ChangeAudience is implemented by a ChangeSink that knows whether anyone
// listens (the adapter's change hub): providers that must work to find
// changes (polling a backend) do it only while someone does.
type ChangeAudience interface {
	// Subscribers is the number of listeners now.
	Subscribers() int
}

// CoverageSink is implemented by a ChangeSink that tells its listeners
// which metrics it covers (the adapter's change hub, see package
// changefeed): a provider covers a metric while it publishes every change of
// its every series within maxAge, so that a reader may reuse a value
// instead of reading it again. owner tells the coverers of one name apart
// (an old and a new provider across a configuration reload): the metric is
// covered while one of them covers it. It must be comparable.
type CoverageSink interface {
	// Cover starts (or renews) owner's coverage of an external or custom
	// metric (kind as Change.Kind): lease is how long it lasts without a
	// query, maxAge how late a change is published and how old a served
	// reading may be.
	Cover(owner any, kind, metric string, lease, maxAge time.Duration)
	// Uncover ends owner's coverage, and tells every series of the metric
	// changed.
	Uncover(owner any, kind, metric string)
}

// LabelsKey is a canonical string of a label set: equal sets give equal keys,
// so a change and the series it names can be matched as map keys.
func LabelsKey(l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0xff)
		b.WriteString(l[k])
		b.WriteByte(0xfe)
	}
	return b.String()
}
