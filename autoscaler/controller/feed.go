package controller

import (
	"fmt"
	"sync"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/providers/changefeed"
)

var feedEnqueues = metrics.NewCounterVec(&metrics.CounterOpts{
	Namespace:      "metricscale",
	Subsystem:      "autoscaler",
	Name:           "change_feed_enqueues_total",
	Help:           "Objects queued for a reconcile by the change feed, by reason (change, resync).",
	StabilityLevel: metrics.ALPHA,
}, []string{"reason"})

func init() {
	legacyregistry.MustRegister(feedEnqueues)
}

// ChangeFeed is the controller's side of the adapter's change feed: an
// index from metric name to the objects that read it, kept from the
// informers, and the enqueueing of the objects a change concerns. Its
// methods are a feedclient.Handler.
//
// An object is queued with the workqueue's Add, which leaves its periodic
// requeue as it is: the sync period stays the upper bound, the feed only
// brings a reconcile forward. Only External, Object and Pods metrics are
// fed (Resource metrics come from metrics.k8s.io). A change may queue an
// object that did not need it (an Object metric's described object is not
// compared); it never misses one that did.
type ChangeFeed struct {
	c           *Controller
	minInterval time.Duration

	mu sync.Mutex
	// byMetric: metric name -> the objects reading it.
	byMetric map[string]*subscribers
	// byKey: object key -> the metric names it is indexed under.
	byKey map[string][]string
	// last: object key -> when the feed last queued it (or will).
	last map[string]time.Time

	// The values the feed vouches for (vouch.go). live and replica are
	// nil until VouchFor; seq numbers the events that make values stale.
	live    func() bool
	replica func() string
	seq     uint64
	covered map[string]coverMark               // metric name -> its coverage
	readAt  map[string]time.Time               // metric name -> when its last good read began
	marks   map[string]stamp                   // object key -> its last change
	values  map[string]map[string]vouchedValue // object key -> read -> value
}

// fedMetric is one spec metric a change may concern.
type fedMetric struct {
	kind      string // changefeed.KindExternal or KindCustom
	namespace string // the object's
	selector  labels.Selector
}

// ChangeFeed returns the controller's change feed handler and starts
// indexing the informers' objects. A change queues an object at most once
// per minInterval (later changes wait for the end of the interval), which
// bounds the reconciles a metric changing many times a second causes.
func (c *Controller) ChangeFeed(minInterval time.Duration) (*ChangeFeed, error) {
	f := newChangeFeed(c, minInterval)
	if _, err := c.inf.MetricAutoscalers.AddEventHandler(f.handler(kindMA)); err != nil {
		return nil, fmt.Errorf("indexing MetricAutoscalers for the change feed: %w", err)
	}
	if c.inf.HPAs != nil {
		if _, err := c.inf.HPAs.AddEventHandler(f.handler(kindHPA)); err != nil {
			return nil, fmt.Errorf("indexing HorizontalPodAutoscalers for the change feed: %w", err)
		}
	}
	return f, nil
}

func newChangeFeed(c *Controller, minInterval time.Duration) *ChangeFeed {
	return &ChangeFeed{c: c, minInterval: minInterval,
		byMetric: map[string]*subscribers{}, byKey: map[string][]string{}, last: map[string]time.Time{},
		covered: map[string]coverMark{}, readAt: map[string]time.Time{}, marks: map[string]stamp{}, values: map[string]map[string]vouchedValue{}}
}

func (f *ChangeFeed) handler(kind string) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { f.index(kind, obj) },
		UpdateFunc: func(old, cur any) {
			o, err1 := apimeta.Accessor(old)
			n, err2 := apimeta.Accessor(cur)
			// Status updates (every reconcile's) leave the metrics as they are.
			if err1 != nil || err2 != nil || o.GetGeneration() != n.GetGeneration() || o.GetUID() != n.GetUID() {
				f.index(kind, cur)
			}
		},
		DeleteFunc: func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				f.set(kind+"/"+key, nil)
			}
		},
	}
}

// index (re)indexes one object.
func (f *ChangeFeed) index(kind string, obj any) {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	var (
		ns    string
		specs []autoscalingv2.MetricSpec
	)
	switch o := obj.(type) {
	case *v1alpha1.MetricAutoscaler:
		ns, specs = o.Namespace, o.Spec.Metrics
	case *autoscalingv2.HorizontalPodAutoscaler:
		ns, specs = o.Namespace, o.Spec.Metrics
	default:
		// Not converted by the informer's transform: decode as a reconcile would.
		typed, err := typedMetricAutoscaler(obj)
		ma, ok := typed.(*v1alpha1.MetricAutoscaler)
		if err != nil || !ok {
			return
		}
		ns, specs = ma.Namespace, ma.Spec.Metrics
	}
	f.set(kind+"/"+key, fedMetrics(ns, specs))
}

// fedMetrics are the metrics of specs that the feed may announce.
func fedMetrics(ns string, specs []autoscalingv2.MetricSpec) map[string][]fedMetric {
	out := map[string][]fedMetric{}
	add := func(kind string, id autoscalingv2.MetricIdentifier) {
		if id.Name == "" {
			return
		}
		out[id.Name] = append(out[id.Name], fedMetric{kind: kind, namespace: ns, selector: selectorOf(id.Selector)})
	}
	for _, m := range specs {
		switch {
		case m.Type == autoscalingv2.ExternalMetricSourceType && m.External != nil:
			add(changefeed.KindExternal, m.External.Metric)
		case m.Type == autoscalingv2.ObjectMetricSourceType && m.Object != nil:
			add(changefeed.KindCustom, m.Object.Metric)
		case m.Type == autoscalingv2.PodsMetricSourceType && m.Pods != nil:
			add(changefeed.KindCustom, m.Pods.Metric)
		}
	}
	return out
}

// selectorOf is the metric selector, one shared copy per distinct selector
// (see feedSelectors); one that does not parse selects every series, so
// that the change still reaches the object (whose reconcile reports the
// bad selector).
func selectorOf(ls *metav1.LabelSelector) labels.Selector {
	if ls == nil {
		return labels.Everything()
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return labels.Everything()
	}
	return feedSelectors.get(sel.String(), func() labels.Selector { return sel })
}

// feedSelectors holds one parsed copy of each metric selector the feed
// indexes, up to a bound: autoscalers of one queue or app repeat theirs,
// and a parsed selector costs about 100 bytes an object. Selectors are
// immutable once parsed. The key is the selector's String, which is
// canonical (sorted requirements and values) and parses back to the same
// selector.
var feedSelectors = newInternTable[labels.Selector](4096)

// set replaces what key reads (nil: nothing, the object is gone).
func (f *ChangeFeed) set(key string, metrics map[string][]fedMetric) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, name := range f.byKey[key] {
		if subs := f.byMetric[name]; subs != nil {
			subs.remove(key)
			if len(subs.objs) == 0 {
				delete(f.byMetric, name)
			}
		}
	}
	delete(f.byKey, key)
	f.forgetLocked(key)
	if len(metrics) == 0 {
		delete(f.last, key)
		return
	}
	names := make([]string, 0, len(metrics))
	for name, fms := range metrics {
		subs := f.byMetric[name]
		if subs == nil {
			subs = newSubscribers()
			f.byMetric[name] = subs
		}
		subs.add(key, fms)
		names = append(names, name)
	}
	f.byKey[key] = names
}

// Changed implements feedclient.Handler: it queues the objects that read a
// series the change concerns.
func (f *ChangeFeed) Changed(ev *changefeed.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var set labels.Set
	if !ev.All {
		set = labels.Set(ev.Labels)
	}
	subs := f.byMetric[ev.Name]
	if subs == nil {
		return
	}
	subs.candidates(ev, func(key string) {
		for _, fm := range subs.objs[key] {
			if fm.matches(ev, set) {
				f.changedLocked(key)
				f.enqueue(key)
				return
			}
		}
	})
}

// subscribers are the objects reading one metric, each of their selectors
// indexed by one of its label=value requirements: a change of one series
// (one list of a thousand, each read by its own autoscaler) is matched
// against the objects whose selectors may select it, not against all.
type subscribers struct {
	objs  map[string][]fedMetric        // object key -> what of it reads the metric
	exact map[labelValue]map[string]int // label=value -> keys -> their selectors requiring it
	loose map[string]int                // keys -> their selectors requiring no label=value
}

type labelValue struct{ label, value string }

func newSubscribers() *subscribers {
	return &subscribers{objs: map[string][]fedMetric{}, exact: map[labelValue]map[string]int{}, loose: map[string]int{}}
}

// exactOf is one label=value requirement of sel (=, == or in with one
// value), if it has one: a series it selects has that label and value.
func exactOf(sel labels.Selector) (labelValue, bool) {
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		if op := r.Operator(); op == selection.Equals || op == selection.DoubleEquals || op == selection.In && r.Values().Len() == 1 {
			return labelValue{r.Key(), r.Values().UnsortedList()[0]}, true
		}
	}
	return labelValue{}, false
}

func (s *subscribers) add(key string, fms []fedMetric) {
	s.objs[key] = fms
	for _, fm := range fms {
		lv, ok := exactOf(fm.selector)
		if !ok {
			s.loose[key]++
			continue
		}
		keys := s.exact[lv]
		if keys == nil {
			keys = map[string]int{}
			s.exact[lv] = keys
		}
		keys[key]++
	}
}

func (s *subscribers) remove(key string) {
	for _, fm := range s.objs[key] {
		lv, ok := exactOf(fm.selector)
		if !ok {
			if s.loose[key]--; s.loose[key] <= 0 {
				delete(s.loose, key)
			}
			continue
		}
		if keys := s.exact[lv]; keys != nil {
			if keys[key]--; keys[key] <= 0 {
				delete(keys, key)
			}
			if len(keys) == 0 {
				delete(s.exact, lv)
			}
		}
	}
	delete(s.objs, key)
}

// candidates calls visit once for each object whose selectors may select
// a series of ev: every object when ev concerns all series.
func (s *subscribers) candidates(ev *changefeed.Event, visit func(key string)) {
	if ev.All {
		for key := range s.objs {
			visit(key)
		}
		return
	}
	var seen map[string]bool
	once := func(key string) {
		if seen == nil {
			seen = map[string]bool{}
		}
		if !seen[key] {
			seen[key] = true
			visit(key)
		}
	}
	for key := range s.loose {
		once(key)
	}
	for l, v := range ev.Labels {
		for key := range s.exact[labelValue{l, v}] {
			once(key)
		}
	}
}

func (fm *fedMetric) matches(ev *changefeed.Event, set labels.Set) bool {
	if !ev.MatchesKind(fm.kind) {
		return false
	}
	// A series without a namespace is an External metric of every
	// namespace; one with a namespace is of that namespace only.
	if ev.Namespace != "" && ev.Namespace != fm.namespace {
		return false
	}
	return ev.All || fm.selector.Matches(set)
}

// enqueue queues key now, or at the end of its minimum interval; the
// caller holds f.mu.
func (f *ChangeFeed) enqueue(key string) {
	now := f.c.clock.Now()
	last, ok := f.last[key]
	switch {
	case ok && last.After(now):
		// Asked for at the end of the interval already. Ask again: the
		// queue keeps the earlier of a key's two times, so the reconcile
		// asked for may have come earlier (the object's periodic one, due
		// within the interval), before this change, and none would come
		// after it until the next period. A key still waiting for the end
		// of the interval (or for an earlier time) keeps it: nothing more
		// is queued.
		f.c.queue.AddAfter(key, last.Sub(now))
	case ok && now.Sub(last) < f.minInterval:
		next := last.Add(f.minInterval)
		f.last[key] = next
		// A key already waiting keeps the earlier of its times.
		f.c.queue.AddAfter(key, next.Sub(now))
		feedEnqueues.WithLabelValues("change").Inc()
	default:
		f.last[key] = now
		f.c.queue.Add(key)
		feedEnqueues.WithLabelValues("change").Inc()
	}
}

// Resync implements feedclient.Handler: the feed (re)connected or dropped
// changes, so every object that reads a fed metric is queued once, and
// every coverage and vouched value is forgotten.
func (f *ChangeFeed) Resync() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forgetAllLocked()
	for key := range f.byKey {
		feedEnqueues.WithLabelValues("resync").Inc()
		f.c.queue.Add(key)
	}
}

// Objects is the number of objects that read a metric the feed may
// announce.
func (f *ChangeFeed) Objects() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.byKey)
}
