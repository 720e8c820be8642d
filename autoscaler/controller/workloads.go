package controller

import (
	"strconv"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// The workloads whose scale the controller reads from a watch cache instead
// of a GET of /scale: the reconcile of an autoscaler on them then costs one
// request (its metric read) instead of two. Their scale is computed as the
// API server's scale subresource computes it.
var (
	deploymentsGR  = schema.GroupResource{Group: "apps", Resource: "deployments"}
	statefulSetsGR = schema.GroupResource{Group: "apps", Resource: "statefulsets"}
	replicaSetsGR  = schema.GroupResource{Group: "apps", Resource: "replicasets"}
)

// cachedWorkload is what the informer keeps of a Deployment, StatefulSet or
// ReplicaSet: its scale, as /scale serves it.
type cachedWorkload struct {
	name, namespace          string
	resourceVersion          uint64
	replicas, statusReplicas int32
	selector                 string
	// unreadable is set when the label selector does not convert (the
	// scale subresource fails the same way) or the resource version is not
	// a number: the scale is read by GET then.
	unreadable bool
}

// GetObjectMeta lets the informer's store key and index it.
func (w *cachedWorkload) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Name: w.name, Namespace: w.namespace}
}

func newCachedWorkload(meta metav1.ObjectMeta, replicas *int32, statusReplicas int32, sel *metav1.LabelSelector) *cachedWorkload {
	w := &cachedWorkload{name: meta.Name, namespace: internString(meta.Namespace), statusReplicas: statusReplicas, replicas: 1}
	if replicas != nil {
		w.replicas = *replicas
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	rv, rvErr := strconv.ParseUint(meta.ResourceVersion, 10, 64)
	if err != nil || rvErr != nil {
		// Read by GET: the error is the API server's to word, and a write
		// needs the version as given.
		w.unreadable = true
	} else {
		w.selector, w.resourceVersion = s.String(), rv
	}
	return w
}

// trimWorkload is TrimCached for the workloads above.
func trimWorkload(obj any) (any, bool) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return newCachedWorkload(o.ObjectMeta, o.Spec.Replicas, o.Status.Replicas, o.Spec.Selector), true
	case *appsv1.StatefulSet:
		return newCachedWorkload(o.ObjectMeta, o.Spec.Replicas, o.Status.Replicas, o.Spec.Selector), true
	case *appsv1.ReplicaSet:
		return newCachedWorkload(o.ObjectMeta, o.Spec.Replicas, o.Status.Replicas, o.Spec.Selector), true
	}
	return obj, false
}

// workloadScales answers scales from the workload informers, overlaid with
// the controller's own writes until the informer has seen them (so that a
// reconcile right after a rescale, as the change feed queues, never decides
// on the size before it).
type workloadScales struct {
	// informer returns the informer of a workload resource, started, or
	// nil when that resource is not cached; nil reads every scale by GET.
	informer func(schema.GroupResource) cache.SharedIndexInformer

	mu      sync.Mutex
	started map[schema.GroupResource]cache.SharedIndexInformer
	written map[string]writtenScale
}

type writtenScale struct {
	resourceVersion uint64
	replicas        int32
}

func (w *workloadScales) informerFor(gr schema.GroupResource) cache.SharedIndexInformer {
	if w.informer == nil || (gr != deploymentsGR && gr != statefulSetsGR && gr != replicaSetsGR) {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	inf, ok := w.started[gr]
	if !ok {
		inf = w.informer(gr)
		if w.started == nil {
			w.started = map[schema.GroupResource]cache.SharedIndexInformer{}
		}
		w.started[gr] = inf
		if inf != nil {
			// A write the informer has seen needs no overlay any more
			// (nor does a workload deleted since).
			_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
				AddFunc:    func(obj any) { w.caughtUp(gr, obj, false) },
				UpdateFunc: func(_, obj any) { w.caughtUp(gr, obj, false) },
				DeleteFunc: func(obj any) { w.caughtUp(gr, obj, true) },
			})
		}
	}
	return inf
}

func (w *workloadScales) caughtUp(gr schema.GroupResource, obj any, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = d.Obj, true
	}
	cw, ok := obj.(*cachedWorkload)
	if !ok {
		return
	}
	key := writtenKey(gr, cw.namespace, cw.name)
	w.mu.Lock()
	defer w.mu.Unlock()
	wr, ok := w.written[key]
	if !ok {
		return
	}
	if deleted || cw.unreadable || cw.resourceVersion >= wr.resourceVersion {
		delete(w.written, key)
	}
}

// get returns the scale of ns/name from the cache, or false when the cache
// cannot answer (another kind, not synced yet, not found): the caller reads
// it by GET then, which also reports errors as the API server words them.
func (w *workloadScales) get(gr schema.GroupResource, ns, name string) (*autoscalingv1.Scale, bool) {
	inf := w.informerFor(gr)
	if inf == nil || !inf.HasSynced() {
		return nil, false
	}
	obj, exists, err := inf.GetStore().GetByKey(ns + "/" + name)
	if err != nil || !exists {
		return nil, false
	}
	cw, ok := obj.(*cachedWorkload)
	if !ok || cw.unreadable {
		return nil, false
	}
	rv := cw.resourceVersion
	sc := &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: cw.name, Namespace: cw.namespace},
		Spec:       autoscalingv1.ScaleSpec{Replicas: cw.replicas},
		Status:     autoscalingv1.ScaleStatus{Replicas: cw.statusReplicas, Selector: cw.selector},
	}
	key := writtenKey(gr, ns, name)
	w.mu.Lock()
	defer w.mu.Unlock()
	if wr, ok := w.written[key]; ok && rv < wr.resourceVersion {
		sc.Spec.Replicas, rv = wr.replicas, wr.resourceVersion
	}
	sc.ResourceVersion = strconv.FormatUint(rv, 10)
	return sc, true
}

// wrote remembers a scale the controller has written, for get to use until
// the informer has caught up with it.
func (w *workloadScales) wrote(gr schema.GroupResource, sc *autoscalingv1.Scale) {
	if w.informerFor(gr) == nil || sc == nil {
		return
	}
	rv, err := strconv.ParseUint(sc.ResourceVersion, 10, 64)
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.written == nil {
		w.written = map[string]writtenScale{}
	}
	w.written[writtenKey(gr, sc.Namespace, sc.Name)] = writtenScale{resourceVersion: rv, replicas: sc.Spec.Replicas}
}

func writtenKey(gr schema.GroupResource, ns, name string) string {
	return gr.Resource + "/" + ns + "/" + name
}
