package controller

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
)

// TrimCached is the transform of the shared informers the controller reads
// from: it keeps of each object what the controller reads. A pod becomes a
// cachedPod (a tenth of a pod as served: the pod cache holds every pod of
// the cluster), a workload its scale (cachedWorkload); any other object
// loses its managedFields only.
func TrimCached(obj any) (any, error) {
	if w, ok := trimWorkload(obj); ok {
		return w, nil
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		return newCachedPod(o), nil
	case metav1.Object:
		o.SetManagedFields(nil)
	}
	return obj, nil
}

// cachedPod is what the replica calculation reads of a pod: its name and
// labels, whether it is being deleted, its phase, start time and Ready
// condition, and the requests of its containers.
type cachedPod struct {
	name, namespace string
	labels          map[string]string
	deletion        *metav1.Time
	phase           corev1.PodPhase
	startTime       *metav1.Time
	ready           *corev1.PodCondition
	containers      []cachedContainer
	// podRequests and overhead are the pod-level requests, when set.
	podRequests, overhead []namedQuantity
}

type cachedContainer struct {
	name     string
	init     bool
	restart  *corev1.ContainerRestartPolicy
	requests []namedQuantity
}

type namedQuantity struct {
	name corev1.ResourceName
	q    resource.Quantity
}

// GetObjectMeta lets the informer's store key and index it.
func (p *cachedPod) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Name: p.name, Namespace: p.namespace, Labels: p.labels, DeletionTimestamp: p.deletion}
}

func newCachedPod(p *corev1.Pod) *cachedPod {
	out := &cachedPod{
		name: p.Name, namespace: p.Namespace, labels: p.Labels, deletion: p.DeletionTimestamp,
		phase: p.Status.Phase, startTime: p.Status.StartTime,
		containers: make([]cachedContainer, 0, len(p.Spec.Containers)+len(p.Spec.InitContainers)),
	}
	for i := range p.Status.Conditions {
		if c := p.Status.Conditions[i]; c.Type == corev1.PodReady {
			out.ready = &corev1.PodCondition{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime}
		}
	}
	for _, c := range p.Spec.Containers {
		out.containers = append(out.containers, cachedContainer{name: c.Name, restart: c.RestartPolicy, requests: actualRequests(c, p.Status.ContainerStatuses)})
	}
	for _, c := range p.Spec.InitContainers {
		out.containers = append(out.containers, cachedContainer{name: c.Name, init: true, restart: c.RestartPolicy, requests: actualRequests(c, p.Status.InitContainerStatuses)})
	}
	if p.Spec.Resources != nil {
		out.podRequests = quantities(p.Spec.Resources.Requests)
	}
	out.overhead = quantities(p.Spec.Overhead)
	return out
}

// actualRequests are a container's requests with those its status reports
// in their place: during an in-place resize the status holds the size the
// container has (docs/scenarios.md, deviation 8). The decision core reads
// the same from a whole pod; the cache keeps only the result.
func actualRequests(c corev1.Container, statuses []corev1.ContainerStatus) []namedQuantity {
	for i := range statuses {
		st := &statuses[i]
		if st.Name != c.Name || st.Resources == nil || len(st.Resources.Requests) == 0 {
			continue
		}
		merged := make(corev1.ResourceList, len(c.Resources.Requests)+len(st.Resources.Requests))
		for name, q := range c.Resources.Requests {
			merged[name] = q
		}
		for name, q := range st.Resources.Requests {
			merged[name] = q
		}
		return quantities(merged)
	}
	return quantities(c.Resources.Requests)
}

func quantities(l corev1.ResourceList) []namedQuantity {
	if len(l) == 0 {
		return nil
	}
	out := make([]namedQuantity, 0, len(l))
	for name, q := range l {
		out = append(out, namedQuantity{name, q})
	}
	return out
}

func resourceList(in []namedQuantity) corev1.ResourceList {
	if in == nil {
		return nil
	}
	out := make(corev1.ResourceList, len(in))
	for _, nq := range in {
		out[nq.name] = nq.q
	}
	return out
}

// pod is the cached pod as the decision core reads it.
func (p *cachedPod) pod() *corev1.Pod {
	out := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: p.namespace, Labels: p.labels, DeletionTimestamp: p.deletion},
		Status:     corev1.PodStatus{Phase: p.phase, StartTime: p.startTime},
	}
	if p.ready != nil {
		out.Status.Conditions = []corev1.PodCondition{*p.ready}
	}
	for _, c := range p.containers {
		ctr := corev1.Container{Name: c.name, RestartPolicy: c.restart, Resources: corev1.ResourceRequirements{Requests: resourceList(c.requests)}}
		if c.init {
			out.Spec.InitContainers = append(out.Spec.InitContainers, ctr)
		} else {
			out.Spec.Containers = append(out.Spec.Containers, ctr)
		}
	}
	if p.podRequests != nil {
		out.Spec.Resources = &corev1.ResourceRequirements{Requests: resourceList(p.podRequests)}
	}
	out.Spec.Overhead = resourceList(p.overhead)
	return out
}

// podsSyncTimeout bounds the wait for the pod cache's first sync.
const podsSyncTimeout = 2 * time.Minute

// lazyPods starts the pod informer when a metric first reads pods, and
// lists from it once synced.
type lazyPods struct {
	c         *Controller
	namespace string
}

func (l lazyPods) List(sel labels.Selector) ([]*corev1.Pod, error) {
	inf := l.c.inf
	if inf.StartPods != nil {
		l.c.podsOnce.Do(inf.StartPods)
	}
	if !inf.Pods.HasSynced() {
		stop := make(chan struct{})
		t := time.AfterFunc(podsSyncTimeout, func() { close(stop) })
		synced := cache.WaitForCacheSync(stop, inf.Pods.HasSynced)
		t.Stop()
		if !synced {
			return nil, fmt.Errorf("the pod cache did not sync within %s", podsSyncTimeout)
		}
	}
	return podLister{inf.Pods.GetIndexer(), l.namespace}.List(sel)
}

// podLister lists one namespace's pods from the pod informer's store,
// which holds cachedPods (or whole pods, without the transform).
type podLister struct {
	indexer   cache.Indexer
	namespace string
}

func (l podLister) List(sel labels.Selector) ([]*corev1.Pod, error) {
	objs, err := l.indexer.ByIndex(cache.NamespaceIndex, l.namespace)
	if err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	for _, obj := range objs {
		switch p := obj.(type) {
		case *cachedPod:
			if sel.Matches(labels.Set(p.labels)) {
				out = append(out, p.pod())
			}
		case *corev1.Pod:
			if sel.Matches(labels.Set(p.Labels)) {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// internedLabels holds one copy of each metric selector's matchLabels map
// internStrings has seen, up to a bound: a small map costs about 300 bytes,
// as much as the rest of a cached selector, and autoscalers reading one
// queue or one app's series repeat the same few. Cached objects are read
// only (a reconcile copies before it writes), so they may share one map.
var internedLabels = newInternTable[map[string]string](4096)

// maxInternedLabels is the largest map internedLabels shares.
const maxInternedLabels = 8

// internLabels returns the shared copy of m (equal content), with its
// strings interned; a copy of its own once the bound is reached, m itself
// when m is large.
func internLabels(m map[string]string) map[string]string {
	if len(m) == 0 || len(m) > maxInternedLabels {
		return m
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		// length-prefixed: no content can pass for another's
		for _, s := range [2]string{k, m[k]} {
			b.WriteString(strconv.Itoa(len(s)))
			b.WriteByte(':')
			b.WriteString(s)
		}
	}
	return internedLabels.get(b.String(), func() map[string]string { return internMap(m) })
}

// internMap is a copy of m with its strings interned (nil for nil).
func internMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[internString(k)] = internString(v)
	}
	return out
}

// interned holds one copy of each string internStrings has seen, up to a
// bound: past it, new strings stay as decoded (a cache of every condition
// message with a number in it must not grow without end).
var interned = newInternTable[string](4096)

func internString(s string) string {
	if s == "" {
		return s
	}
	return interned.get(s, func() string { return s })
}

// internTable keeps the first value made for each key, up to max keys:
// past the bound, get returns a new value each time, kept by no one.
type internTable[V any] struct {
	mu  sync.Mutex
	m   map[string]V
	max int
}

func newInternTable[V any](max int) *internTable[V] {
	return &internTable[V]{m: map[string]V{}, max: max}
}

// get returns the value kept for k, or newValue's, kept if there is room.
func (t *internTable[V]) get(k string, newValue func() V) V {
	t.mu.Lock()
	defer t.mu.Unlock()
	if v, ok := t.m[k]; ok {
		return v
	}
	v := newValue()
	if len(t.m) < t.max {
		t.m[k] = v
	}
	return v
}

// internStrings makes the strings that repeat across MetricAutoscalers
// (namespaces, kinds, metric names and selectors, condition reasons and
// messages) share one copy each: a decoded object has its own copy of all.
func internStrings(ma *v1alpha1.MetricAutoscaler) {
	in := func(s *string) { *s = internString(*s) }
	inSelector := func(s *metav1.LabelSelector) {
		if s == nil {
			return
		}
		s.MatchLabels = internLabels(s.MatchLabels)
		for i := range s.MatchExpressions {
			e := &s.MatchExpressions[i]
			in(&e.Key)
			for j := range e.Values {
				in(&e.Values[j])
			}
		}
	}
	inMetric := func(id *autoscalingv2.MetricIdentifier) {
		in(&id.Name)
		inSelector(id.Selector)
	}
	in(&ma.Namespace)
	in(&ma.APIVersion)
	in(&ma.Kind)
	ma.Labels = internMap(ma.Labels)
	ma.Annotations = internMap(ma.Annotations)
	ref := &ma.Spec.ScaleTargetRef
	in(&ref.APIVersion)
	in(&ref.Kind)
	for i := range ma.Spec.Metrics {
		m := &ma.Spec.Metrics[i]
		switch {
		case m.External != nil:
			inMetric(&m.External.Metric)
		case m.Object != nil:
			inMetric(&m.Object.Metric)
		case m.Pods != nil:
			inMetric(&m.Pods.Metric)
		}
	}
	st := &ma.Status
	in(&st.Targets)
	for i := range st.CurrentMetrics {
		m := &st.CurrentMetrics[i]
		switch {
		case m.External != nil:
			inMetric(&m.External.Metric)
		case m.Object != nil:
			inMetric(&m.Object.Metric)
		case m.Pods != nil:
			inMetric(&m.Pods.Metric)
		}
	}
	for i := range st.Conditions {
		in(&st.Conditions[i].Reason)
		in(&st.Conditions[i].Message)
	}
}
