// Package controller reconciles MetricAutoscalers (and, optionally, native
// autoscaling/v2 HorizontalPodAutoscalers) with the decision core: it reads
// the target's scale, the pods from a shared informer and the metrics APIs,
// writes the scale and the status, and requeues each object at its own
// sync period.
package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/behavior"
	"github.com/metricscale/metricscale/autoscaler/decision"
	"github.com/metricscale/metricscale/autoscaler/defaults"
	"github.com/metricscale/metricscale/autoscaler/history"
	"github.com/metricscale/metricscale/autoscaler/metricsource"
	"github.com/metricscale/metricscale/autoscaler/objectmetrics"
	mrecord "github.com/metricscale/metricscale/autoscaler/record"
	"github.com/metricscale/metricscale/autoscaler/schedule"
)

const (
	kindMA  = "MetricAutoscaler"
	kindHPA = "HorizontalPodAutoscaler"
)

// Config holds the controller's settings.
type Config struct {
	Settings decision.Settings
	Workers  int
	// HPASyncPeriod is the period of native HPAs (MetricAutoscalers have
	// their own).
	HPASyncPeriod time.Duration
	// HistorySyncInterval bounds how stale the history kept in a status
	// may get when nothing else in the status changes.
	HistorySyncInterval time.Duration
	// Recorder keeps the inputs and decisions of MetricAutoscalers'
	// reconciles (--record); nil records nothing.
	Recorder *mrecord.Recorder
	// MetricReadTimeout bounds the metric reads of one reconcile
	// (--metric-read-timeout; 0: DefaultMetricReadTimeout), and is never
	// more than the object's sync period. A read it cuts is a failed read.
	MetricReadTimeout time.Duration
}

// Clients are what the controller talks to.
type Clients struct {
	Kube kubernetes.Interface
	// MetricAutoscalers writes their status (maclient.Client).
	MetricAutoscalers StatusWriter
	// Dynamic reads APIServices (the metrics API guard).
	Dynamic dynamic.Interface
	Scales  scale.ScalesGetter
	Mapper  apimeta.RESTMapper
	Metrics metricsource.Source
}

// StatusWriter writes a MetricAutoscaler's status subresource and returns
// the object as stored.
type StatusWriter interface {
	UpdateStatus(ctx context.Context, ma *v1alpha1.MetricAutoscaler) (*v1alpha1.MetricAutoscaler, error)
}

// Informers are the shared informers the controller reads from; HPAs is
// nil unless native HPAs are reconciled too.
type Informers struct {
	MetricAutoscalers cache.SharedIndexInformer
	Pods              cache.SharedIndexInformer
	HPAs              cache.SharedIndexInformer
	// StartPods starts Pods; nil when it runs already. The controller
	// calls it at the first reconcile whose metrics read pods, so that
	// autoscalers on AverageValue External and Object metrics alone cost
	// no pod cache.
	StartPods func()
	// Workload returns the started informer of an apps/v1 workload
	// resource (deployments, statefulsets, replicasets) whose scale the
	// controller then reads from it, or nil to read it by GET; nil reads
	// every scale by GET. It is called once per resource, at the first
	// reconcile of a target of that kind.
	Workload func(schema.GroupResource) cache.SharedIndexInformer
}

// memo is what the controller remembers of one object between reconciles.
type memo struct {
	uid          types.UID
	history      packedHistory
	historySaved time.Time
	// storedHistory and storedStatus fingerprint the status the API
	// server holds, its history (the cache keeps no copy of it: see trimMA)
	// and the rest, so that a reconcile compares a hash, not the objects.
	storedHistory, storedStatus uint64
	// storedMetrics is the stored status.currentMetrics, as JSON (a
	// quarter of the decoded form): a reconcile that ends before computing
	// metrics keeps them, as kube-controller-manager keeps an HPA's.
	storedMetrics []byte
	// written is the object as the controller's last status write left it,
	// until the cache has caught up with it: a reconcile right after
	// another (as the change feed queues them) reads the status it wrote,
	// not the one before, and writes on its version.
	written *v1alpha1.MetricAutoscaler
}

// Controller reconciles autoscalers.
type Controller struct {
	cfg      Config
	clients  Clients
	inf      Informers
	recorder record.EventRecorder
	clock    clock.WithTicker
	queue    workqueue.TypedRateLimitingInterface[string]

	mu     sync.Mutex
	memory map[string]*memo

	podsOnce  sync.Once
	workloads *workloadScales
	guard     *metricsAPIGuard
	formulas  formulas
	// objects are the per-MetricAutoscaler gauges (objectmetrics.Default
	// but in tests).
	objects *objectmetrics.Gauges
	// vouch is the change feed that vouches for metric values, once
	// ChangeFeed.VouchFor is called.
	vouch atomic.Pointer[ChangeFeed]
}

// New wires a controller to its informers.
func New(cfg Config, clients Clients, inf Informers, recorder record.EventRecorder, clk clock.WithTicker) (*Controller, error) {
	c := &Controller{
		cfg: cfg, clients: clients, inf: inf, recorder: recorder, clock: clk,
		queue:     workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](), workqueue.TypedRateLimitingQueueConfig[string]{Name: "metricautoscalers", Clock: clk}),
		memory:    map[string]*memo{},
		workloads: &workloadScales{informer: inf.Workload},
		objects:   objectmetrics.Default,
	}
	c.guard = &metricsAPIGuard{c: c}
	// The cache keeps MetricAutoscalers trimmed (trimMA): no managedFields,
	// labels, history or the status a reconcile makes anew; unstructured
	// ones (a dynamic informer's) are made typed.
	if err := inf.MetricAutoscalers.SetTransform(c.trimMA); err != nil {
		return nil, fmt.Errorf("setting the MetricAutoscaler cache transform: %w", err)
	}
	if _, err := inf.MetricAutoscalers.AddEventHandler(c.handler(kindMA)); err != nil {
		return nil, err
	}
	if inf.HPAs != nil {
		if _, err := inf.HPAs.AddEventHandler(c.handler(kindHPA)); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// handler enqueues at once on create and on a spec change (a new
// generation); status-only updates wait for the object's next period.
func (c *Controller) handler(kind string) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.enqueue(kind, obj) },
		UpdateFunc: func(old, cur any) {
			o, err1 := apimeta.Accessor(old)
			n, err2 := apimeta.Accessor(cur)
			if err1 != nil || err2 != nil || o.GetGeneration() != n.GetGeneration() {
				c.enqueue(kind, cur)
			}
		},
		DeleteFunc: func(obj any) {
			key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
			if err != nil {
				return
			}
			k := kind + "/" + key
			c.queue.Forget(k)
			c.mu.Lock()
			delete(c.memory, k)
			c.mu.Unlock()
			if ns, name, err := cache.SplitMetaNamespaceKey(key); err == nil && kind == kindMA {
				c.cfg.Recorder.Forget(ns, name)
				c.objects.Forget(ns, name)
				c.formulas.forget(key)
			}
		},
	}
}

func (c *Controller) enqueue(kind string, obj any) {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.queue.Add(kind + "/" + key)
}

// Run processes the queue with the configured workers until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	synced := []cache.InformerSynced{c.inf.MetricAutoscalers.HasSynced}
	if c.inf.StartPods == nil {
		// A pod cache that runs already; one started on demand is waited
		// for when first read.
		synced = append(synced, c.inf.Pods.HasSynced)
	}
	if c.inf.HPAs != nil {
		synced = append(synced, c.inf.HPAs.HasSynced)
	}
	if !cache.WaitForNamedCacheSyncWithContext(ctx, synced...) {
		return errors.New("informer caches did not sync")
	}
	klog.FromContext(ctx).Info("Starting autoscaler workers", "workers", c.cfg.Workers)
	var wg sync.WaitGroup
	for range c.cfg.Workers {
		wg.Go(func() { wait.UntilWithContext(ctx, c.worker, time.Second) })
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	return nil
}

func (c *Controller) worker(ctx context.Context) {
	for c.next(ctx) {
	}
}

func (c *Controller) next(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	period, err := c.reconcile(ctx, key)
	if err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Reconcile failed", "key", key)
	}
	if period > 0 {
		c.queue.Forget(key)
		// A key already waiting keeps the earlier of its two times, so a
		// reconcile triggered by a spec change starts no second cadence.
		c.queue.AddAfter(key, period)
	}
	return true
}

// reconcile handles one key and returns when to look at it again (0 when
// the object is gone).
func (c *Controller) reconcile(ctx context.Context, key string) (time.Duration, error) {
	kind, nsName, _ := strings.Cut(key, "/")
	ns, name, err := cache.SplitMetaNamespaceKey(nsName)
	if err != nil {
		return 0, err
	}
	start := c.clock.Now()
	var action string
	switch kind {
	case kindMA:
		var period time.Duration
		period, action, err = c.reconcileMA(ctx, key, ns, name)
		observeReconcile(kind, action, err, c.clock.Since(start))
		return period, err
	case kindHPA:
		action, err = c.reconcileHPA(ctx, key, ns, name)
		observeReconcile(kind, action, err, c.clock.Since(start))
		if apierrors.IsNotFound(err) {
			return 0, nil
		}
		return c.cfg.HPASyncPeriod, err
	}
	return 0, fmt.Errorf("unknown key %q", key)
}

func (c *Controller) reconcileMA(ctx context.Context, key, ns, name string) (time.Duration, string, error) {
	obj, exists, err := c.inf.MetricAutoscalers.GetIndexer().GetByKey(ns + "/" + name)
	if err != nil {
		return 0, actionNone, err
	}
	if !exists {
		c.objects.Forget(ns, name)
		return 0, actionNone, nil
	}
	typed, ok := obj.(*v1alpha1.MetricAutoscaler)
	if !ok {
		return 0, actionNone, fmt.Errorf("MetricAutoscaler %s/%s: the cache holds a %T", ns, name, obj)
	}
	// Read only: the core copies what it changes, and the status is written
	// from a new object.
	ma := c.freshest(key, typed)
	period := defaults.SyncPeriod
	if ma.Spec.SyncPeriod != nil && ma.Spec.SyncPeriod.Duration >= time.Second {
		period = ma.Spec.SyncPeriod.Duration
	}
	if ma.Spec.Paused {
		// The stored status, as far as the cache keeps it (no metric values).
		c.observe(ma, &ma.Status)
		return period, actionNone, nil
	}
	hist := c.recall(key, ma.UID)
	hpa := ma.HPAView()
	// Scale to zero is always on for MetricAutoscalers.
	settings := c.cfg.Settings
	settings.Gates.ScaleToZero = true
	rec := c.cfg.Recorder.Begin(ma)
	var guard func(context.Context, *autoscalingv2.HorizontalPodAutoscaler, *autoscalingv1.Scale) (backend, bool)
	if ma.Annotations[AllowMetricsAPITargetAnnotation] != "true" {
		guard = c.guard.served
	}
	schedules, scheduleErrs := schedule.Compile(ma.Spec.Schedules, field.NewPath("spec"))
	program, formulaErrs := c.formulas.compile(ma)
	res, refused := c.decide(ctx, key, hpa, hist, settings, ma.Spec.DryRun, period, guard, func(in *decision.Input) {
		in.Fallback, in.FallbackState = ma.Spec.Fallback, ma.Status.Fallback
		in.ScaleToZero, in.ScaleToZeroState = ma.Spec.ScaleToZero, ma.Status.ScaleToZero
		in.Schedules, in.ScheduleErr = schedules, scheduleErrs.ToAggregate()
		in.Formula, in.FormulaProgram, in.FormulaErr = ma.Spec.Formula, program, formulaErrs
		rec.Input(in) // last: the recording takes the input as the core gets it
	})
	if refused != nil {
		refuseMetricsAPITarget(ma, *refused, &res, c.clock.Now())
	}
	c.report(ma, res.Events)
	// The next reconcile comes at the next edge of a window (or step of a
	// ramp) when that is sooner: the floor rises on time without a change
	// of the metrics.
	period = untilNextEdge(schedules, ma.Spec.MinReplicas, c.clock.Now(), period)

	now := c.clock.Now()
	m := c.remember(key, ma.UID, res.History)
	if res.CurrentMetricsCarried {
		c.mu.Lock()
		stored := m.storedMetrics
		c.mu.Unlock()
		res.Status.CurrentMetrics = nil
		if stored != nil {
			if err := json.Unmarshal(stored, &res.Status.CurrentMetrics); err != nil {
				return period, action(res), fmt.Errorf("decoding the stored metrics of MetricAutoscaler %s/%s: %w", ns, name, err)
			}
		}
	}
	// The history changes at nearly every reconcile (a new recommendation)
	// and is saved at most every HistorySyncInterval when nothing else
	// changes: it is made and compared only when it may be written.
	status := maStatus(ma, res, nil)
	c.observe(ma, &status)
	storedStatus := fingerprint(status)
	c.mu.Lock()
	sameVisible, fresh, stored := storedStatus == m.storedStatus, now.Sub(m.historySaved) < c.cfg.HistorySyncInterval, m.storedHistory
	c.mu.Unlock()
	if sameVisible && fresh && rec == nil {
		return period, action(res), res.Err
	}
	status.History = history.ToStatus(res.History, &hpa.Spec, c.cfg.Settings.DownscaleStabilizationWindow, now)
	rec.Done(res, &status)
	storedHistory := fingerprint(status.History)
	if sameVisible && (fresh || storedHistory == stored) {
		return period, action(res), res.Err
	}
	// The status subresource takes the status alone (the API server keeps
	// the rest of the stored object); the version guards against a stale
	// cache.
	out := &v1alpha1.MetricAutoscaler{TypeMeta: ma.TypeMeta, Status: status,
		ObjectMeta: metav1.ObjectMeta{Name: ma.Name, Namespace: ma.Namespace, UID: ma.UID, ResourceVersion: ma.ResourceVersion}}
	written, err := c.clients.MetricAutoscalers.UpdateStatus(ctx, out)
	if err != nil {
		c.recorder.Event(ma, corev1.EventTypeWarning, "FailedUpdateStatus", err.Error())
		return period, action(res), errors.Join(res.Err, fmt.Errorf("updating status of MetricAutoscaler %s/%s: %w", ns, name, err))
	}
	storedObj, _ := typedMetricAutoscaler(written)
	c.mu.Lock()
	if f, ok := storedObj.(*v1alpha1.MetricAutoscaler); ok {
		m.written = trimmed(f)
	}
	m.historySaved, m.storedHistory, m.storedStatus = now, storedHistory, storedStatus
	m.storedMetrics = nil
	if len(status.CurrentMetrics) > 0 {
		m.storedMetrics, _ = json.Marshal(status.CurrentMetrics)
	}
	c.mu.Unlock()
	return period, action(res), res.Err
}

// observe sets ma's gauges from the status written for it, unless the
// object has been deleted (or recreated) since the reconcile read it.
func (c *Controller) observe(ma *v1alpha1.MetricAutoscaler, status *v1alpha1.MetricAutoscalerStatus) {
	c.objects.Observe(ma, status, func() bool {
		obj, exists, err := c.inf.MetricAutoscalers.GetIndexer().GetByKey(ma.Namespace + "/" + ma.Name)
		if err != nil || !exists {
			return false
		}
		o, err := apimeta.Accessor(obj)
		return err == nil && o.GetUID() == ma.UID
	})
}

func (c *Controller) reconcileHPA(ctx context.Context, key, ns, name string) (string, error) {
	obj, exists, err := c.inf.HPAs.GetIndexer().GetByKey(ns + "/" + name)
	if err != nil {
		return actionNone, err
	}
	if !exists {
		return actionNone, apierrors.NewNotFound(autoscalingv2.Resource("horizontalpodautoscalers"), name)
	}
	cached := obj.(*autoscalingv2.HorizontalPodAutoscaler)
	hpa := cached.DeepCopy()
	hpa.SetGroupVersionKind(autoscalingv2.SchemeGroupVersion.WithKind(kindHPA))
	hist := c.recall(key, hpa.UID)
	res, _ := c.decide(ctx, key, hpa, hist, c.cfg.Settings, false, c.cfg.HPASyncPeriod, nil, nil)
	c.report(hpa, res.Events)
	c.remember(key, hpa.UID, res.History)
	if apiequality.Semantic.DeepEqual(cached.Status, res.Status) {
		return action(res), res.Err
	}
	hpa.Status = res.Status
	if _, err := c.clients.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).UpdateStatus(ctx, hpa, metav1.UpdateOptions{}); err != nil {
		c.recorder.Event(hpa, corev1.EventTypeWarning, "FailedUpdateStatus", err.Error())
		return action(res), errors.Join(res.Err, fmt.Errorf("updating status of HorizontalPodAutoscaler %s/%s: %w", ns, name, err))
	}
	return action(res), res.Err
}

// typedMetricAutoscaler is a decoded MetricAutoscaler (typed, or
// unstructured from a dynamic client) as the cache keeps it: typed, without
// managedFields, its strings interned; other objects pass through.
func typedMetricAutoscaler(obj any) (any, error) {
	var ma *v1alpha1.MetricAutoscaler
	switch o := obj.(type) {
	case *v1alpha1.MetricAutoscaler:
		ma = o
	case *unstructured.Unstructured:
		ma = &v1alpha1.MetricAutoscaler{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, ma); err != nil {
			return nil, err
		}
	default:
		return obj, nil
	}
	ma.ManagedFields = nil
	ma.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(kindMA))
	internStrings(ma)
	return ma, nil
}

// trimMA is the MetricAutoscaler cache's transform: typedMetricAutoscaler,
// and the status's history moved out of the cached object. The controller
// keeps each object's history in memory (its memo), loaded from the status
// when first seen; the cache keeps only a fingerprint of the stored one, to
// know when it needs saving. The informer calls it once per object it
// decodes, never on what it has cached.
func (c *Controller) trimMA(obj any) (any, error) {
	out, err := typedMetricAutoscaler(obj)
	ma, ok := out.(*v1alpha1.MetricAutoscaler)
	if err != nil || !ok {
		return out, err
	}
	key := kindMA + "/" + ma.Namespace + "/" + ma.Name
	c.mu.Lock()
	m, ok := c.memory[key]
	if ok && m.uid == ma.UID && m.written != nil && m.written.UID == ma.UID && !olderVersion(m.written.ResourceVersion, ma.ResourceVersion) {
		// The echo of this controller's last status write, or of one before
		// it: the memo has the fingerprints of the last (at 1,000 objects,
		// most events are such echoes).
		c.mu.Unlock()
		return trimmed(ma), nil
	}
	c.mu.Unlock()
	storedHistory, storedStatus := fingerprint(ma.Status.History), fingerprint(withoutHistory(ma.Status))
	c.mu.Lock()
	m, ok = c.memory[key]
	if !ok || m.uid != ma.UID {
		m = &memo{uid: ma.UID, history: packHistory(history.FromStatus(ma.Status.History))}
		// Saved about when its newest entry was made: a restart does not
		// make every history look stale (and the first pass write them all).
		m.historySaved = m.history.latest()
		c.memory[key] = m
	}
	m.storedHistory, m.storedStatus = storedHistory, storedStatus
	m.storedMetrics = nil
	if len(ma.Status.CurrentMetrics) > 0 {
		m.storedMetrics, _ = json.Marshal(ma.Status.CurrentMetrics)
	}
	c.mu.Unlock()
	return trimmed(ma), nil
}

// trimmed keeps of ma what a reconcile reads: the rest of the status is
// made anew by each reconcile, and labels and annotations (kubectl's
// last-applied configuration among them) are read by none but the
// guard's opt-in (AllowMetricsAPITargetAnnotation).
func trimmed(ma *v1alpha1.MetricAutoscaler) *v1alpha1.MetricAutoscaler {
	ma.Status.History, ma.Status.CurrentMetrics, ma.Status.Reference, ma.Status.Targets, ma.Status.MetricProposals = nil, nil, "", "", nil
	ma.Labels = nil
	// of the annotations (kubectl's last-applied configuration among them)
	// only the guard's opt-in is read
	allow, ok := ma.Annotations[AllowMetricsAPITargetAnnotation]
	ma.Annotations = nil
	if ok {
		ma.Annotations = map[string]string{AllowMetricsAPITargetAnnotation: allow}
	}
	return ma
}

// freshest is the cached object, or the one the last status write left
// when the cache has not seen that write yet.
func (c *Controller) freshest(key string, cached *v1alpha1.MetricAutoscaler) *v1alpha1.MetricAutoscaler {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.memory[key]
	if !ok || m.written == nil {
		return cached
	}
	w := m.written
	if w.UID == cached.UID && olderVersion(cached.ResourceVersion, w.ResourceVersion) {
		return w
	}
	m.written = nil
	return cached
}

// olderVersion says a is an older resource version than b (both numbers,
// as etcd's are; anything else is not older).
func olderVersion(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	return err1 == nil && err2 == nil && x < y
}

// fingerprint identifies a status, or its history, as the API server
// stores it (JSON: quantities canonical, times in seconds or microseconds):
// equal fingerprints, no change to write. It costs about half a semantic
// comparison of the two (BenchmarkStatusCompare), and the cache then needs
// no copy of what it fingerprints.
func fingerprint(v any) uint64 {
	data, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	f := fnv.New64a()
	_, _ = f.Write(data)
	return f.Sum64()
}

func withoutHistory(s v1alpha1.MetricAutoscalerStatus) v1alpha1.MetricAutoscalerStatus {
	s.History = nil
	return s
}

// recall returns the history the controller keeps for key: for a
// MetricAutoscaler loaded from its status by the cache transform (trimMA)
// when first seen; for a native HPA, as kube-controller-manager, only what
// this process has seen (empty after a restart or a recreation).
func (c *Controller) recall(key string, uid types.UID) behavior.History {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.memory[key]; ok && m.uid == uid {
		return m.history.unpack()
	}
	return behavior.History{}
}

func (c *Controller) remember(key string, uid types.UID, h behavior.History) *memo {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.memory[key]
	if !ok || m.uid != uid {
		m = &memo{uid: uid}
		c.memory[key] = m
	}
	m.history = packHistory(h)
	return m
}

// decide runs one reconcile of the core around the scale read and write;
// extra adds a MetricAutoscaler's own inputs. The core's metric reads
// share one deadline (readTimeout of period); the scale read and write
// are not under it. A guard that finds the target serving a metrics API
// makes it a dry run and returns that API's backend.
func (c *Controller) decide(ctx context.Context, key string, hpa *autoscalingv2.HorizontalPodAutoscaler, hist behavior.History, settings decision.Settings, dryRun bool, period time.Duration,
	guard func(context.Context, *autoscalingv2.HorizontalPodAutoscaler, *autoscalingv1.Scale) (backend, bool), extra func(*decision.Input)) (decision.Result, *backend) {
	sc, gr, scaleErr := c.getScale(ctx, hpa)
	var refused *backend
	if guard != nil && scaleErr == nil {
		if b, ok := guard(ctx, hpa, sc); ok {
			refused, dryRun = &b, true
		}
	}
	timeout := c.readTimeout(period)
	readCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	in := decision.Input{
		Autoscaler: hpa,
		ScaleErr:   scaleErr,
		Pods:       lazyPods{c, hpa.Namespace},
		Metrics:    deadlineSource{Source: c.batch(key, hpa, sc), timeout: timeout},
		History:    hist,
		Settings:   settings,
		Now:        c.clock.Now(),
	}
	if sc != nil {
		in.Scale = decision.Scale{Replicas: sc.Spec.Replicas, StatusReplicas: sc.Status.Replicas, Selector: sc.Status.Selector}
	}
	if extra != nil {
		extra(&in)
	}
	plan := decision.Decide(readCtx, in)
	cancel()
	switch {
	case !plan.Rescale:
		return plan.Finish(nil), refused
	case dryRun:
		return plan.FinishDryRun(), refused
	}
	return plan.Finish(c.updateScale(ctx, hpa, gr, sc, plan.DesiredReplicas)), refused
}

// getScale reads the target's scale (from the workload cache for apps/v1
// workloads, else by a GET of /scale), trying each REST mapping of its kind.
func (c *Controller) getScale(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler) (*autoscalingv1.Scale, schema.GroupResource, error) {
	ref := hpa.Spec.ScaleTargetRef
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil, schema.GroupResource{}, err
	}
	mappings, err := c.clients.Mapper.RESTMappings(schema.GroupKind{Group: gv.Group, Kind: ref.Kind})
	if err != nil {
		if r, ok := c.clients.Mapper.(apimeta.ResettableRESTMapper); ok {
			r.Reset() // a CRD installed since the last discovery
		}
		return nil, schema.GroupResource{}, fmt.Errorf("unable to determine resource for scale target reference: %w", err)
	}
	var firstErr error
	for _, m := range mappings {
		gr := m.Resource.GroupResource()
		if sc, ok := c.workloads.get(gr, hpa.Namespace, ref.Name); ok {
			return sc, gr, nil
		}
		sc, err := c.clients.Scales.Scales(hpa.Namespace).Get(ctx, gr, ref.Name, metav1.GetOptions{})
		if err == nil {
			return sc, gr, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if firstErr == nil {
		firstErr = errors.New("unrecognized resource")
	}
	// The core names the target when it reports this.
	return nil, schema.GroupResource{}, firstErr
}

// updateScale writes the new size, rereading the scale on conflicts.
func (c *Controller) updateScale(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, gr schema.GroupResource, sc *autoscalingv1.Scale, replicas int32) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sc.Spec.Replicas = replicas
		written, err := c.clients.Scales.Scales(hpa.Namespace).Update(ctx, gr, sc, metav1.UpdateOptions{})
		if err == nil {
			c.workloads.wrote(gr, written)
			return nil
		}
		if latest, getErr := c.clients.Scales.Scales(hpa.Namespace).Get(ctx, gr, sc.Name, metav1.GetOptions{}); getErr == nil {
			sc = latest
		}
		return err
	})
}

func (c *Controller) report(obj runtime.Object, events []decision.Event) {
	for _, e := range events {
		c.recorder.Event(obj, e.Type, e.Reason, e.Message)
	}
}

const (
	actionNone      = "none"
	actionScaleUp   = "scale_up"
	actionScaleDown = "scale_down"
)

func action(res decision.Result) string {
	switch {
	case !res.Rescaled:
		return actionNone
	case res.Replicas > res.Status.CurrentReplicas:
		return actionScaleUp
	}
	return actionScaleDown
}
