// Package record keeps, per MetricAutoscaler and in bounded memory, the
// inputs of the controller's last reconciles — the spec, the status it
// read, the target's scale, the pods and every metric answer, the history
// and the time — and the decision each one made, and exports them as a
// Recording: a scenario that `autoscaler simulate` replays to the same
// decisions. Writing it as a scenario file and checking its replay is
// package replay's, so that the controller does not link the simulator.
//
// A Recorder costs nothing when the controller has none (--record off):
// every method works on a nil *Recorder and *Reconcile and does nothing.
//
// Memory per recorded reconcile is what changed since the one before: the
// history as the entries that reconcile changed (usually one
// recommendation), the metric answers (a few dozen bytes per External or
// Object value, per pod for pod metrics), and the spec, status and pods only
// when they differ from the step before (they are shared otherwise). See
// StepCost.
package record

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/behavior"
	"github.com/metricscale/metricscale/autoscaler/decision"
	"github.com/metricscale/metricscale/autoscaler/metricsource"
)

// Options bound what a Recorder keeps of each object.
type Options struct {
	// MaxSteps is the number of reconciles kept per object (at least 1).
	MaxSteps int
	// MaxAge drops reconciles older than this (0: no age bound).
	MaxAge time.Duration
}

// DefaultOptions: half an hour of reconciles, at most 360 (half an hour at
// a 5s sync period).
func DefaultOptions() Options { return Options{MaxSteps: 360, MaxAge: 30 * time.Minute} }

// Recorder keeps the recent reconciles of every MetricAutoscaler.
type Recorder struct {
	opts  Options
	mu    sync.Mutex
	tapes map[string]*tape
}

// New returns a Recorder with those bounds.
func New(opts Options) *Recorder {
	if opts.MaxSteps < 1 {
		opts.MaxSteps = 1
	}
	return &Recorder{opts: opts, tapes: map[string]*tape{}}
}

// tape is one object's recording: its steps, oldest first, and what is
// needed to restore the first step's input and to check the next one's.
type tape struct {
	uid   types.UID
	steps []*step
	// seed is the history the first step read (a private copy: deltas of
	// later steps are applied to it in place when the first step goes).
	seed behavior.History
	// lastInput is the history the newest step read and lastOut the one
	// it left, with lastWritten the status it wrote (in stored form), to
	// tell whether the next step reads what it left.
	lastInput, lastOut behavior.History
	lastWritten        *v1alpha1.MetricAutoscalerStatus
	// broken: the reconcile before the next step was not recorded (the
	// scale or the pods could not be read), so the next step's input
	// state is given explicitly.
	broken bool
	// settings are the controller's, as of the newest step.
	settings decision.Settings
}

// step is one recorded reconcile.
type step struct {
	now        time.Time
	generation int64
	// spec and status are shared with the step before when equal.
	spec   *v1alpha1.MetricAutoscalerSpec
	status *v1alpha1.MetricAutoscalerStatus
	// explicit: the state this step read is not what the step before
	// left; the scenario gives it at this step.
	explicit bool
	delta    historyDelta
	scale    decision.Scale
	pods     []*corev1.Pod // nil: not read
	podsRead bool
	answers  answers
	// writeFailed: the scale write failed.
	writeFailed bool
	decided     Decision
}

// Decision is what a recorded reconcile decided, to compare a replay with.
type Decision struct {
	At              string `json:"at"`
	Time            string `json:"time"`
	Replicas        int32  `json:"replicas"`
	Rescaled        bool   `json:"rescaled"`
	CurrentReplicas int32  `json:"currentReplicas"`
	DesiredReplicas int32  `json:"desiredReplicas"`
	Error           string `json:"error,omitempty"`
	// Rule is what produced the count (decision.Rule).
	Rule string `json:"rule"`
}

type answers struct {
	resource []resourceAnswer
	pods     []podsAnswer
	object   []objectAnswer
	external []externalAnswer
}

type resourceAnswer struct {
	resource  corev1.ResourceName
	container string
	info      metricsource.PodMetricsInfo
	failed    bool
}

type podsAnswer struct {
	metric, selector string
	info             metricsource.PodMetricsInfo
	failed           bool
}

type objectAnswer struct {
	metric, selector string
	ref              autoscalingv2.CrossVersionObjectReference
	value            int64
	failed           bool
}

type externalAnswer struct {
	metric, selector string
	values           []int64
	failed           bool
}

// Reconcile is one reconcile being recorded. Its methods are called by the
// one worker that runs the reconcile.
type Reconcile struct {
	r   *Recorder
	key string
	ma  *v1alpha1.MetricAutoscaler
	in  decision.Input
	st  *step
	// status is the input part of the status as read, taken before the
	// controller replaces it with the one it writes.
	status *v1alpha1.MetricAutoscalerStatus
	gap    bool
}

// Begin starts recording a reconcile of ma (the object as read, not to be
// modified afterwards). It returns nil on a nil Recorder.
func (r *Recorder) Begin(ma *v1alpha1.MetricAutoscaler) *Reconcile {
	if r == nil {
		return nil
	}
	return &Reconcile{r: r, key: ma.Namespace + "/" + ma.Name, ma: ma, st: &step{generation: ma.Generation}, status: inputStatus(&ma.Status)}
}

// Input takes the decision core's input, complete, and makes the core's
// reads of pods and metrics go through the recording. Call it last, just
// before the core runs.
func (rc *Reconcile) Input(in *decision.Input) {
	if rc == nil {
		return
	}
	rc.in = *in
	rc.st.now, rc.st.scale = in.Now, in.Scale
	if in.ScaleErr != nil {
		// A scenario's scale is always readable: such a step is left out.
		rc.gap = true
		return
	}
	in.Pods = &podsTap{inner: in.Pods, rc: rc}
	in.Metrics = &sourceTap{inner: in.Metrics, rc: rc}
}

// Done stores the reconcile: its decision and the status the controller
// writes after it (its next input, unless the write fails).
func (rc *Reconcile) Done(res decision.Result, written *v1alpha1.MetricAutoscalerStatus) {
	if rc == nil {
		return
	}
	rc.r.add(rc, res, written)
}

// Forget drops the recording of an object (deleted).
func (r *Recorder) Forget(namespace, name string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	delete(r.tapes, namespace+"/"+name)
	r.mu.Unlock()
}

func (r *Recorder) add(rc *Reconcile, res decision.Result, written *v1alpha1.MetricAutoscalerStatus) {
	st := rc.st
	st.writeFailed = !res.Rescaled && hasEvent(res.Events, "FailedRescale")
	st.decided = Decision{
		Replicas: res.Replicas, Rescaled: res.Rescaled,
		CurrentReplicas: res.Status.CurrentReplicas, DesiredReplicas: res.Status.DesiredReplicas,
		Rule: string(res.Explain.Rule(res.Metrics)),
	}
	if res.Err != nil {
		st.decided.Error = truncate(res.Err.Error(), 300)
	}
	snapshot := rc.status
	stored, err := storedForm(written)
	if err != nil {
		// Cannot happen for a status the API server accepts; the next step
		// then gives its state explicitly.
		stored = nil
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.tapes[rc.key]
	if t == nil || t.uid != rc.ma.UID {
		t = &tape{uid: rc.ma.UID}
		r.tapes[rc.key] = t
	}
	t.settings = rc.in.Settings
	if rc.gap {
		t.broken, t.lastWritten = true, nil
		return
	}
	var prev *step
	if n := len(t.steps); n > 0 {
		prev = t.steps[n-1]
	}
	hist := rc.in.History
	switch {
	case prev == nil:
		t.seed = hist.DeepCopy()
		st.explicit = true
	default:
		st.delta = diffHistory(t.lastInput, hist)
		st.explicit = t.broken || t.lastWritten == nil ||
			!apiequality.Semantic.DeepEqual(snapshot, t.lastWritten) || !sameHistory(t.lastOut, hist)
	}
	// Share what did not change with the step before.
	st.spec, st.status = &rc.ma.Spec, snapshot
	if prev != nil {
		shareStrings(&prev.answers, &st.answers)
		if prev.generation == st.generation && apiequality.Semantic.DeepEqual(prev.spec, st.spec) {
			st.spec = prev.spec
		}
		if apiequality.Semantic.DeepEqual(prev.status, st.status) {
			st.status = prev.status
		}
		if st.podsRead && prev.podsRead {
			st.pods = sharePods(prev.pods, st.pods)
		}
	}
	if st.spec == &rc.ma.Spec {
		st.spec = rc.ma.Spec.DeepCopy()
	}
	t.steps = append(t.steps, st)
	t.lastInput, t.lastOut, t.lastWritten, t.broken = hist, res.History, stored, false
	r.trim(t, st.now)
}

// trim drops the oldest steps beyond the bounds, moving the seed forward.
func (r *Recorder) trim(t *tape, now time.Time) {
	drop := 0
	for i, s := range t.steps {
		tooMany := len(t.steps)-i > r.opts.MaxSteps
		tooOld := r.opts.MaxAge > 0 && now.Sub(s.now) > r.opts.MaxAge
		if !tooMany && !tooOld {
			break
		}
		drop = i + 1
	}
	if drop == 0 {
		return
	}
	if drop >= len(t.steps) {
		t.steps = t.steps[:0]
		return
	}
	// Steps are not changed once added (an export reads them unlocked):
	// the new first step's input is the seed moved forward.
	for _, s := range t.steps[1 : drop+1] {
		s.delta.apply(&t.seed)
	}
	n := copy(t.steps, t.steps[drop:])
	clear(t.steps[n:])
	t.steps = t.steps[:n]
}

// inputStatus is the part of a status a reconcile reads: without the
// metrics' values, the history (the controller's memory is read instead)
// and the printed columns, which change at every step and decide nothing.
func inputStatus(s *v1alpha1.MetricAutoscalerStatus) *v1alpha1.MetricAutoscalerStatus {
	c := *s
	c.ObservedGeneration, c.CurrentMetrics, c.History, c.MetricProposals = nil, nil, nil, nil
	c.Reference, c.Targets = "", ""
	return &c
}

// storedForm is a written status's input part as the API server stores it
// (times in whole seconds), as the next reconcile reads it back.
func storedForm(s *v1alpha1.MetricAutoscalerStatus) (*v1alpha1.MetricAutoscalerStatus, error) {
	if s == nil {
		return nil, nil
	}
	data, err := json.Marshal(inputStatus(s))
	if err != nil {
		return nil, err
	}
	out := &v1alpha1.MetricAutoscalerStatus{}
	if err := json.Unmarshal(data, out); err != nil {
		return nil, err
	}
	return out, nil
}

func hasEvent(events []decision.Event, reason string) bool {
	for _, e := range events {
		if e.Reason == reason {
			return true
		}
	}
	return false
}

// sharePods returns cur with the pods equal to one of prev replaced by
// prev's, or prev itself when nothing changed.
func sharePods(prev, cur []*corev1.Pod) []*corev1.Pod {
	byName := make(map[string]*corev1.Pod, len(prev))
	for _, p := range prev {
		byName[p.Name] = p
	}
	same := len(prev) == len(cur)
	for i, p := range cur {
		if old, ok := byName[p.Name]; ok && apiequality.Semantic.DeepEqual(old, p) {
			cur[i] = old
			same = same && prev[i] == old
		} else {
			same = false
		}
	}
	if same {
		return prev
	}
	return cur
}

// shareStrings makes the selectors of cur's answers share the memory of
// prev's equal ones (a selector's string form is built at every query).
func shareStrings(prev, cur *answers) {
	for i := range cur.external {
		for _, p := range prev.external {
			if p.selector == cur.external[i].selector {
				cur.external[i].selector = p.selector
				break
			}
		}
	}
	for i := range cur.pods {
		for _, p := range prev.pods {
			if p.selector == cur.pods[i].selector {
				cur.pods[i].selector = p.selector
				break
			}
		}
	}
	for i := range cur.object {
		for _, p := range prev.object {
			if p.selector == cur.object[i].selector {
				cur.object[i].selector = p.selector
				break
			}
		}
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// podsTap records the pods the core lists.
type podsTap struct {
	inner decision.PodLister
	rc    *Reconcile
}

func (p *podsTap) List(sel labels.Selector) ([]*corev1.Pod, error) {
	pods, err := p.inner.List(sel)
	if err != nil {
		// The cache could not be read: a scenario's pods always can.
		p.rc.gap = true
		return pods, err
	}
	st := p.rc.st
	if !st.podsRead {
		st.podsRead = true
		st.pods = make([]*corev1.Pod, len(pods))
		copy(st.pods, pods)
	}
	return pods, nil
}

// sourceTap records every metric answer the core gets.
type sourceTap struct {
	inner metricsource.Source
	rc    *Reconcile
}

var _ metricsource.Source = (*sourceTap)(nil)

func (s *sourceTap) ResourceMetric(ctx context.Context, res corev1.ResourceName, ns string, sel labels.Selector, container string) (metricsource.PodMetricsInfo, time.Time, error) {
	info, ts, err := s.inner.ResourceMetric(ctx, res, ns, sel, container)
	a := &s.rc.st.answers
	a.resource = append(a.resource, resourceAnswer{resource: res, container: container, info: info, failed: err != nil})
	return info, ts, err
}

func (s *sourceTap) PodsMetric(ctx context.Context, metric, ns string, sel, metricSel labels.Selector) (metricsource.PodMetricsInfo, time.Time, error) {
	info, ts, err := s.inner.PodsMetric(ctx, metric, ns, sel, metricSel)
	a := &s.rc.st.answers
	a.pods = append(a.pods, podsAnswer{metric: metric, selector: wire(metricSel), info: info, failed: err != nil})
	return info, ts, err
}

func (s *sourceTap) ObjectMetric(ctx context.Context, metric, ns string, ref *autoscalingv2.CrossVersionObjectReference, metricSel labels.Selector) (int64, time.Time, error) {
	v, ts, err := s.inner.ObjectMetric(ctx, metric, ns, ref, metricSel)
	a := &s.rc.st.answers
	a.object = append(a.object, objectAnswer{metric: metric, selector: wire(metricSel), ref: *ref, value: v, failed: err != nil})
	return v, ts, err
}

func (s *sourceTap) ExternalMetric(ctx context.Context, metric, ns string, sel labels.Selector) ([]int64, time.Time, error) {
	values, ts, err := s.inner.ExternalMetric(ctx, metric, ns, sel)
	a := &s.rc.st.answers
	a.external = append(a.external, externalAnswer{metric: metric, selector: wire(sel), values: values, failed: err != nil})
	return values, ts, err
}

// wire is a selector as it travels to a metrics API: its string form, where
// "no selector" (labels.Nothing) is "" and selects everything.
func wire(sel labels.Selector) string {
	if sel == nil {
		return ""
	}
	return sel.String()
}

// StepCost is the memory a recorded reconcile of an autoscaler with one
// External metric costs once the spec, status and pods are shared with
// the step before (measured by TestStepCost), in bytes.
const StepCost = 600

func (t *tape) String() string { return fmt.Sprintf("tape(%d steps)", len(t.steps)) }
