// Package ondemand is what every polling backend (queue brokers, SQL)
// shares: external metrics read from the backend when a query asks for them,
// cached per metric for a short TTL, concurrent reads of one metric
// coalesced into one backend call, label selectors and namespaces applied
// in the adapter. A backend package only says how to read each configured
// metric (Metric.Read); this package makes it an ExternalProvider.
//
// What a caller gets, whatever the backend:
//   - discovery lists the configured metrics and never touches the backend;
//   - a thousand queries of one metric within the TTL cost one backend call;
//   - a value that is not finite, or negative for a metric not marked
//     AllowNegative, is a 503 naming the series (providers.CheckValue);
//   - a failed read is a 503 naming the provider and the backend's reason,
//     cached for the TTL like a value (a down broker is not hammered), and
//     never replaced by an older value;
//   - a read bounded by the query's context, or by Options.Timeout when the
//     context has none, so a hung backend costs one goroutine for at most
//     that long;
//   - with a change sink (Options.Changes, the adapter's change feed), the
//     metrics queried while the feed has subscribers read in the background
//     every Feed.Interval and their changes published (feed.go).
package ondemand

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/metrics/pkg/apis/external_metrics"
	"k8s.io/utils/clock"

	"github.com/metricscale/metricscale/providers"
)

// NamespaceLabel scopes a series to a namespace, as in the memory provider:
// a series with it is visible only from that namespace, one without it from
// every namespace.
const NamespaceLabel = "namespace"

// Series is one series of a metric as read from the backend.
type Series struct {
	// Labels identify what the series measures ("queue": "orders").
	Labels map[string]string
	// Value is served only if finite and, unless the metric's
	// AllowNegative, not negative (providers.CheckValue): otherwise the
	// query gets a 503 naming the series.
	Value float64
	// At is when the backend observed the value; zero means when Read
	// returned (set it when a backend shares one call between metrics).
	At time.Time
}

// Metric is one configured external metric.
type Metric struct {
	// Name is the external metric name the API serves.
	Name string
	// Namespace, when set, scopes every series of the metric to it (it is
	// added as the "namespace" label, replacing any read from the backend).
	Namespace string
	// Labels are added to every series (after the backend's own).
	Labels map[string]string
	// CacheTTL overrides Options.CacheTTL for this metric.
	CacheTTL *time.Duration
	// AllowNegative serves negative values (a signed SQL result); without
	// it a negative value is a 503, as for a count it is a backend bug.
	AllowNegative bool
	// Read returns every series of the metric. It must honour ctx, and not
	// change the series it returned: queries share them (and their index).
	// An empty answer is a valid reading (no queue matches); the query then
	// gets a 404 naming the metric.
	Read func(ctx context.Context) ([]Series, error)
}

// Options tune a Provider.
type Options struct {
	// CacheTTL is how long a reading (or a failed read) answers queries; 0
	// means every query reads, though concurrent ones still share a call.
	CacheTTL time.Duration
	// Timeout bounds a read whose query context has no deadline.
	Timeout time.Duration
	// MaxItems bounds the series of one answer (a 400 above it); 0 means
	// 10,000, the memory provider's default.
	MaxItems int
	// Clock stamps readings; nil means the real clock.
	Clock clock.PassiveClock
	// Changes, if not nil, hears the changes the feed's poll finds in the
	// metrics the change feed's subscribers read (see Feed); nil: no poll.
	Changes providers.ChangeSink
	// Feed says how those metrics are polled.
	Feed Feed
}

// DefaultMaxItems is Options.MaxItems when unset.
const DefaultMaxItems = 10000

// Provider serves configured metrics read on demand from one backend.
type Provider struct {
	name     string
	metrics  map[string]*Metric
	infos    []providers.ExternalMetricInfo
	maxItems int
	ttl      time.Duration
	clock    clock.PassiveClock
	readings *Loader[reading]

	mu      sync.Mutex
	lastErr error
	lastAt  time.Time
	calls   atomic.Uint64

	// feed polls the metrics the change feed's subscribers read; nil: none.
	feed *feed
}

type reading struct {
	series []Series
	at     time.Time
	// index is shared by the queries this reading answers.
	index *seriesIndex
}

func newReading(series []Series, at time.Time) reading {
	return reading{series: series, at: at, index: &seriesIndex{}}
}

// New builds a provider named name serving metrics.
func New(name string, metrics []Metric, opts Options) (*Provider, error) {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.MaxItems <= 0 {
		opts.MaxItems = DefaultMaxItems
	}
	p := &Provider{
		name:     name,
		metrics:  make(map[string]*Metric, len(metrics)),
		maxItems: opts.MaxItems,
		ttl:      opts.CacheTTL,
		clock:    opts.Clock,
		readings: NewLoader[reading](opts.CacheTTL, opts.Timeout, opts.Clock),
	}
	p.feed = newFeed(name, opts.Changes, opts.Feed, opts.Clock)
	for i := range metrics {
		m := metrics[i]
		switch {
		case m.Name == "":
			return nil, fmt.Errorf("metrics[%d]: name is empty", i)
		case m.Read == nil:
			return nil, fmt.Errorf("metrics[%d] (%s): no read function", i, m.Name)
		case p.metrics[m.Name] != nil:
			return nil, fmt.Errorf("metrics[%d]: metric %q is configured twice", i, m.Name)
		}
		p.metrics[m.Name] = &m
		p.infos = append(p.infos, providers.ExternalMetricInfo{Metric: m.Name})
	}
	sort.Slice(p.infos, func(i, j int) bool { return p.infos[i].Metric < p.infos[j].Metric })
	return p, nil
}

// Name implements providers.Provider.
func (p *Provider) Name() string { return p.name }

// ListAllExternalMetrics implements providers.ExternalProvider from the
// configuration alone.
func (p *Provider) ListAllExternalMetrics() []providers.ExternalMetricInfo {
	return append([]providers.ExternalMetricInfo(nil), p.infos...)
}

// GetExternalMetric implements providers.ExternalProvider.
func (p *Provider) GetExternalMetric(ctx context.Context, namespace string, metricSelector labels.Selector, info providers.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	// A done context gets an error even when a reading is at hand.
	if err := ctx.Err(); err != nil {
		return nil, providers.NewBackendError(p.name, err)
	}
	m := p.metrics[info.Metric]
	if m == nil {
		return nil, providers.NewUnknownMetric(schema.GroupResource{}, info.Metric)
	}
	r, err := p.read(ctx, m)
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w (reading %s: %v)", ctx.Err(), m.Name, err)
		}
		return nil, providers.NewBackendError(p.name, fmt.Errorf("reading %s: %w", m.Name, err))
	}
	p.feed.queried(m, r, p.ttlOf(m))
	sel := metricSelector
	if sel == nil {
		sel = labels.Everything()
	}
	out := &external_metrics.ExternalMetricValueList{}
	ts := metav1.NewTime(r.at)
	// Matched without making each series' labels: a map per series was
	// most of a query's CPU (and garbage) when one metric holds many lists
	// and each autoscaler selects one.
	match := newMatcher(m, namespace, sel)
	candidates := match.candidates(r)
	n := len(r.series)
	if candidates != nil {
		n = len(candidates)
	}
	for k := range n {
		i := k
		if candidates != nil {
			i = int(candidates[k])
		}
		s := &r.series[i]
		if !match.matches(s) {
			continue
		}
		lbls := m.seriesLabels(*s)
		what := func() string { return describe(namespace, sel) }
		if len(out.Items) >= p.maxItems {
			return nil, providers.NewTooManyItems(m.Name, what(), p.maxItems)
		}
		its := ts
		if !s.At.IsZero() {
			its = metav1.NewTime(s.At)
		}
		// one bad series fails the answer: the HPA sums the items, and a
		// sum without it would be as wrong as one with it
		q, err := providers.ServedQuantity(p.name, m.Name, labels.Set(lbls).String(), s.Value, providers.ValuePolicy{AllowNegative: m.AllowNegative})
		if err != nil {
			return nil, err
		}
		out.Items = append(out.Items, external_metrics.ExternalMetricValue{
			MetricName:   m.Name,
			MetricLabels: lbls,
			Timestamp:    its,
			Value:        q,
		})
	}
	if len(out.Items) == 0 {
		return nil, providers.NewNoValue(m.Name, describe(namespace, sel))
	}
	sortByLabels(out.Items)
	return out, nil
}

// read returns m's reading: cached, joined, or read from the backend (the
// one path of queries and of the feed's poll).
func (p *Provider) read(ctx context.Context, m *Metric) (reading, error) {
	return p.readings.GetTTL(ctx, m.Name, p.ttlOf(m), func(ctx context.Context) (reading, error) {
		p.calls.Add(1)
		s, err := m.Read(ctx)
		p.record(err)
		if err == nil {
			p.feed.observe(m, s)
		} else {
			p.feed.failed(m)
		}
		return newReading(s, p.clock.Now()), err
	})
}

// ttlOf is how long a reading of m answers queries.
func (p *Provider) ttlOf(m *Metric) time.Duration {
	if m.CacheTTL != nil {
		return *m.CacheTTL
	}
	return p.ttl
}

// sortByLabels orders items by their labels as labels.Set.String() renders
// them, each rendered once: rendered per comparison, 9,999 series of 20 KB
// of labels allocated 7.9 GB.
func sortByLabels(items []external_metrics.ExternalMetricValue) {
	keys := make([]string, len(items))
	for i := range items {
		keys[i] = labels.Set(items[i].MetricLabels).String()
	}
	sort.Sort(byKey{items, keys})
}

type byKey struct {
	items []external_metrics.ExternalMetricValue
	keys  []string
}

func (b byKey) Len() int           { return len(b.items) }
func (b byKey) Less(i, j int) bool { return b.keys[i] < b.keys[j] }
func (b byKey) Swap(i, j int) {
	b.items[i], b.items[j] = b.items[j], b.items[i]
	b.keys[i], b.keys[j] = b.keys[j], b.keys[i]
}

func describe(namespace string, sel labels.Selector) string {
	what := fmt.Sprintf("namespace %q", namespace)
	if !sel.Empty() {
		what += fmt.Sprintf(" with selector %q", sel.String())
	}
	return what
}

// seriesLabels is a fresh map of the series' served labels (seriesView).
func (m *Metric) seriesLabels(s Series) map[string]string {
	v := seriesView{m: m, s: &s}
	out := make(map[string]string, len(s.Labels)+len(m.Labels)+1)
	for _, k := range v.names(nil) {
		out[k], _ = v.Lookup(k)
	}
	return out
}

// seriesView reads a series' served labels without making them: the
// metric's namespace over its static labels over the backend's.
type seriesView struct {
	m *Metric
	s *Series
}

// names appends the served labels' names, each once.
func (v *seriesView) names(dst []string) []string {
	scoped := v.m.Namespace != ""
	for k := range v.s.Labels {
		if _, static := v.m.Labels[k]; !static && (k != NamespaceLabel || !scoped) {
			dst = append(dst, k)
		}
	}
	for k := range v.m.Labels {
		if k != NamespaceLabel || !scoped {
			dst = append(dst, k)
		}
	}
	if scoped {
		dst = append(dst, NamespaceLabel)
	}
	return dst
}

func (v *seriesView) Lookup(label string) (string, bool) {
	if val, ok := v.m.staticLabel(label); ok {
		return val, true
	}
	val, ok := v.s.Labels[label]
	return val, ok
}

// staticLabel is a served label the metric sets on every series, over the
// backend's: its namespace, then its labels.
func (m *Metric) staticLabel(label string) (string, bool) {
	if label == NamespaceLabel && m.Namespace != "" {
		return m.Namespace, true
	}
	val, ok := m.Labels[label]
	return val, ok
}

func (v *seriesView) Has(label string) bool {
	_, ok := v.Lookup(label)
	return ok
}

func (v *seriesView) Get(label string) string {
	val, _ := v.Lookup(label)
	return val
}

func (p *Provider) record(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastErr, p.lastAt = err, p.clock.Now()
}

// Health is the result of the last backend read: nil before the first one
// and after a successful one.
func (p *Provider) Health() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lastErr != nil {
		return fmt.Errorf("last read at %s failed: %w", p.lastAt.UTC().Format(time.RFC3339), p.lastErr)
	}
	return nil
}

// BackendCalls is the number of reads that reached the backend.
func (p *Provider) BackendCalls() uint64 { return p.calls.Load() }

var (
	_ providers.ExternalProvider = (*Provider)(nil)
	_ providers.HealthReporter   = (*Provider)(nil)
	_ providers.Runner           = (*Provider)(nil)
)
