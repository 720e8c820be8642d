package metricsource

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Read is one query the HPA algorithm makes of a Source for a spec metric.
type Read struct {
	Type autoscalingv2.MetricSourceType
	// Metric is the metric's name (Pods, Object, External).
	Metric string
	// Resource and Container name a Resource or ContainerResource metric.
	Resource  corev1.ResourceName
	Container string
	// Object is an Object metric's described object.
	Object *autoscalingv2.CrossVersionObjectReference
	// Selector selects the pods (Resource, ContainerResource, Pods) or the
	// series (External); MetricSelector is a Pods or Object metric's.
	Selector, MetricSelector labels.Selector
}

// ReadsOf lists the reads the decision core makes for specs, in spec
// order and without repeats, the pods being those podSelector selects (nil
// when the scale has no valid selector: Pods and Resource metrics then
// read nothing). A spec the core would refuse before reading is left out.
func ReadsOf(specs []autoscalingv2.MetricSpec, podSelector labels.Selector) []Read {
	var reads []Read
	seen := map[string]bool{}
	add := func(r Read) {
		if k := r.key(""); !seen[k] {
			seen[k] = true
			reads = append(reads, r)
		}
	}
	for i := range specs {
		s := &specs[i]
		switch {
		case s.Type == autoscalingv2.ResourceMetricSourceType && s.Resource != nil && podSelector != nil:
			add(Read{Type: s.Type, Resource: s.Resource.Name, Selector: podSelector})
		case s.Type == autoscalingv2.ContainerResourceMetricSourceType && s.ContainerResource != nil && podSelector != nil:
			add(Read{Type: s.Type, Resource: s.ContainerResource.Name, Container: s.ContainerResource.Container, Selector: podSelector})
		case s.Type == autoscalingv2.PodsMetricSourceType && s.Pods != nil && podSelector != nil:
			if msel, err := metav1.LabelSelectorAsSelector(s.Pods.Metric.Selector); err == nil {
				add(Read{Type: s.Type, Metric: s.Pods.Metric.Name, Selector: podSelector, MetricSelector: msel})
			}
		case s.Type == autoscalingv2.ObjectMetricSourceType && s.Object != nil:
			if msel, err := metav1.LabelSelectorAsSelector(s.Object.Metric.Selector); err == nil {
				add(Read{Type: s.Type, Metric: s.Object.Metric.Name, Object: &s.Object.DescribedObject, MetricSelector: msel})
			}
		case s.Type == autoscalingv2.ExternalMetricSourceType && s.External != nil:
			if sel, err := metav1.LabelSelectorAsSelector(s.External.Metric.Selector); err == nil {
				add(Read{Type: s.Type, Metric: s.External.Metric.Name, Selector: sel})
			}
		}
	}
	return reads
}

// key identifies a read as a Source call makes it.
func (r Read) key(namespace string) string {
	str := func(s labels.Selector) string {
		if s == nil {
			return ""
		}
		return s.String()
	}
	switch r.Type {
	case autoscalingv2.ResourceMetricSourceType, autoscalingv2.ContainerResourceMetricSourceType:
		return resourceKey(r.Resource, namespace, r.Selector, r.Container)
	case autoscalingv2.PodsMetricSourceType:
		return "P\x00" + r.Metric + "\x00" + namespace + "\x00" + str(r.Selector) + "\x00" + str(r.MetricSelector)
	case autoscalingv2.ObjectMetricSourceType:
		return objectKey(r.Metric, namespace, r.Object, r.MetricSelector)
	}
	return "E\x00" + r.Metric + "\x00" + namespace + "\x00" + str(r.Selector)
}

func resourceKey(res corev1.ResourceName, namespace string, sel labels.Selector, container string) string {
	return "R\x00" + string(res) + "\x00" + namespace + "\x00" + sel.String() + "\x00" + container
}

func objectKey(metric, namespace string, ref *autoscalingv2.CrossVersionObjectReference, msel labels.Selector) string {
	return "O\x00" + metric + "\x00" + namespace + "\x00" + ref.APIVersion + "\x00" + ref.Kind + "\x00" + ref.Name + "\x00" + msel.String()
}

// Batch is a Source for one reconcile that makes its reads concurrently:
// at the first call it starts every listed read, at most parallel at a
// time, under that call's context, then answers each call from its read
// (a copy: the core may change what it gets). A call not listed goes to
// the inner Source as it comes. The core still takes the answers one by
// one in spec order, so its decision, events and status are those of
// serial reads; only the waiting overlaps.
type Batch struct {
	src       Source
	namespace string
	reads     []Read
	parallel  int

	once    sync.Once
	answers map[string]*answer
	misses  atomic.Int32
}

type answer struct {
	pods   PodMetricsInfo
	values []int64
	value  int64
	ts     time.Time
	err    error
}

var _ Source = (*Batch)(nil)

// NewBatch batches reads of namespace (from ReadsOf) over src, at most
// parallel (at least 1) at a time.
func NewBatch(src Source, namespace string, reads []Read, parallel int) *Batch {
	return &Batch{src: src, namespace: namespace, reads: reads, parallel: max(parallel, 1)}
}

// Misses is how many calls were not among the batched reads.
func (b *Batch) Misses() int { return int(b.misses.Load()) }

func (b *Batch) fetch(ctx context.Context) {
	b.answers = make(map[string]*answer, len(b.reads))
	out := make([]answer, len(b.reads))
	sem := make(chan struct{}, b.parallel)
	var wg sync.WaitGroup
	for i := range b.reads {
		r := &b.reads[i]
		b.answers[r.key(b.namespace)] = &out[i]
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			a := &out[i]
			switch r.Type {
			case autoscalingv2.ResourceMetricSourceType, autoscalingv2.ContainerResourceMetricSourceType:
				a.pods, a.ts, a.err = b.src.ResourceMetric(ctx, r.Resource, b.namespace, r.Selector, r.Container)
			case autoscalingv2.PodsMetricSourceType:
				a.pods, a.ts, a.err = b.src.PodsMetric(ctx, r.Metric, b.namespace, r.Selector, r.MetricSelector)
			case autoscalingv2.ObjectMetricSourceType:
				a.value, a.ts, a.err = b.src.ObjectMetric(ctx, r.Metric, b.namespace, r.Object, r.MetricSelector)
			default:
				a.values, a.ts, a.err = b.src.ExternalMetric(ctx, r.Metric, b.namespace, r.Selector)
			}
		})
	}
	wg.Wait()
}

// lookup returns the batched answer of key, fetching all at the first call.
func (b *Batch) lookup(ctx context.Context, namespace, key string) (*answer, bool) {
	if namespace != b.namespace {
		b.misses.Add(1)
		return nil, false
	}
	b.once.Do(func() { b.fetch(ctx) })
	a, ok := b.answers[key]
	if !ok {
		b.misses.Add(1)
	}
	return a, ok
}

// ResourceMetric implements Source.
func (b *Batch) ResourceMetric(ctx context.Context, resource corev1.ResourceName, namespace string, selector labels.Selector, container string) (PodMetricsInfo, time.Time, error) {
	if a, ok := b.lookup(ctx, namespace, resourceKey(resource, namespace, selector, container)); ok {
		return maps.Clone(a.pods), a.ts, a.err
	}
	return b.src.ResourceMetric(ctx, resource, namespace, selector, container)
}

// PodsMetric implements Source.
func (b *Batch) PodsMetric(ctx context.Context, metricName, namespace string, selector, metricSelector labels.Selector) (PodMetricsInfo, time.Time, error) {
	k := Read{Type: autoscalingv2.PodsMetricSourceType, Metric: metricName, Selector: selector, MetricSelector: metricSelector}.key(namespace)
	if a, ok := b.lookup(ctx, namespace, k); ok {
		return maps.Clone(a.pods), a.ts, a.err
	}
	return b.src.PodsMetric(ctx, metricName, namespace, selector, metricSelector)
}

// ObjectMetric implements Source.
func (b *Batch) ObjectMetric(ctx context.Context, metricName, namespace string, ref *autoscalingv2.CrossVersionObjectReference, metricSelector labels.Selector) (int64, time.Time, error) {
	if a, ok := b.lookup(ctx, namespace, objectKey(metricName, namespace, ref, metricSelector)); ok {
		return a.value, a.ts, a.err
	}
	return b.src.ObjectMetric(ctx, metricName, namespace, ref, metricSelector)
}

// ExternalMetric implements Source.
func (b *Batch) ExternalMetric(ctx context.Context, metricName, namespace string, selector labels.Selector) ([]int64, time.Time, error) {
	k := Read{Type: autoscalingv2.ExternalMetricSourceType, Metric: metricName, Selector: selector}.key(namespace)
	if a, ok := b.lookup(ctx, namespace, k); ok {
		return slices.Clone(a.values), a.ts, a.err
	}
	return b.src.ExternalMetric(ctx, metricName, namespace, selector)
}
