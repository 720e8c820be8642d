package record

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/behavior"
	"github.com/metricscale/metricscale/autoscaler/metricsource"
)

// Recording is what the record endpoint serves: a scenario (the format of
// docs/scenarios.md) whose replay makes the recorded decisions, the
// decisions themselves, and what the scenario cannot express, if anything.
type Recording struct {
	Scenario Document   `json:"scenario"`
	Recorded []Decision `json:"recorded"`
	// Warnings name the steps a replay may not reproduce, and why.
	Warnings []string `json:"warnings,omitempty"`
}

// Document is a scenario, as `autoscaler simulate -f` reads it.
type Document struct {
	Start        metav1.Time     `json:"start"`
	Controller   Controller      `json:"controller"`
	FeatureGates map[string]bool `json:"featureGates,omitempty"`
	Autoscaler   *Autoscaler     `json:"autoscaler"`
	Steps        []Step          `json:"steps"`
}

// Autoscaler is the recorded MetricAutoscaler: its spec and the status its
// first recorded reconcile read.
type Autoscaler struct {
	APIVersion string                        `json:"apiVersion"`
	Kind       string                        `json:"kind"`
	Metadata   metav1.ObjectMeta             `json:"metadata"`
	Spec       v1alpha1.MetricAutoscalerSpec `json:"spec"`
	Status     Status                        `json:"status"`
}

// Status is a status whose history is the controller's memory, to the
// nanosecond (the status types keep microseconds).
type Status struct {
	v1alpha1.MetricAutoscalerStatus
	History *History `json:"history,omitempty"`
}

// History is behavior.History as a scenario gives it.
type History struct {
	Recommendations []Recommendation `json:"recommendations,omitempty"`
	ScaleUpEvents   []ScaleEvent     `json:"scaleUpEvents,omitempty"`
	ScaleDownEvents []ScaleEvent     `json:"scaleDownEvents,omitempty"`
}

// Recommendation is a remembered proposal.
type Recommendation struct {
	Replicas int32     `json:"replicas"`
	Time     time.Time `json:"time"`
}

// ScaleEvent is a remembered rescale.
type ScaleEvent struct {
	Change   int32     `json:"change"`
	Time     time.Time `json:"time"`
	Outdated bool      `json:"outdated,omitempty"`
}

// Controller is the scenario's controller settings.
type Controller struct {
	Tolerance                    float64 `json:"tolerance"`
	CPUInitializationPeriod      string  `json:"cpuInitializationPeriod"`
	InitialReadinessDelay        string  `json:"initialReadinessDelay"`
	DownscaleStabilizationWindow string  `json:"downscaleStabilizationWindow"`
}

// Step is one reconcile's inputs. A list left out is the step before's.
type Step struct {
	At              string            `json:"at"`
	Scale           *Scale            `json:"scale,omitempty"`
	Pods            *[]corev1.Pod     `json:"pods,omitempty"`
	PodMetrics      *[]PodMetrics     `json:"podMetrics,omitempty"`
	CustomMetrics   *[]CustomMetric   `json:"customMetrics,omitempty"`
	ExternalMetrics *[]ExternalMetric `json:"externalMetrics,omitempty"`
	Failures        *[]Failure        `json:"failures,omitempty"`
	Autoscaler      *Edit             `json:"autoscaler,omitempty"`
	Status          *Status           `json:"status,omitempty"`
}

// Scale is the target's scale at a step.
type Scale struct {
	Replicas       int32  `json:"replicas"`
	StatusReplicas int32  `json:"statusReplicas"`
	Selector       string `json:"selector"`
}

// Edit is a new spec from a step on.
type Edit struct {
	APIVersion string                        `json:"apiVersion"`
	Kind       string                        `json:"kind"`
	Spec       v1alpha1.MetricAutoscalerSpec `json:"spec"`
}

// PodMetrics is one pod's metrics.k8s.io sample.
type PodMetrics struct {
	Pod        string                         `json:"pod"`
	Timestamp  metav1.Time                    `json:"timestamp"`
	Window     string                         `json:"window"`
	Containers map[string]corev1.ResourceList `json:"containers"`
}

// ObjectRef names a custom metric's object.
type ObjectRef struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// CustomMetric is one custom.metrics.k8s.io series.
type CustomMetric struct {
	Object    ObjectRef         `json:"object"`
	Metric    string            `json:"metric"`
	Labels    map[string]string `json:"labels,omitempty"`
	Value     resource.Quantity `json:"value"`
	Timestamp *metav1.Time      `json:"timestamp,omitempty"`
	Window    string            `json:"window,omitempty"`
}

// ExternalMetric is one external.metrics.k8s.io series.
type ExternalMetric struct {
	Metric string            `json:"metric"`
	Labels map[string]string `json:"labels,omitempty"`
	Value  resource.Quantity `json:"value"`
}

// Failure makes the queries of one API for one metric fail.
type Failure struct {
	API    string `json:"api"`
	Metric string `json:"metric,omitempty"`
}

// ErrNotRecorded is returned for an object with no recorded reconcile.
var ErrNotRecorded = errors.New("no recorded reconciles")

// Export returns the recording of namespace/name from since on (the whole
// recording when since is zero).
func (r *Recorder) Export(namespace, name string, since time.Time) (*Recording, error) {
	if r == nil {
		return nil, ErrNotRecorded
	}
	r.mu.Lock()
	t := r.tapes[namespace+"/"+name]
	if t == nil || len(t.steps) == 0 {
		r.mu.Unlock()
		return nil, ErrNotRecorded
	}
	// Steps are immutable once added: a copy of the list and of the seed
	// is all the export needs.
	steps := slices.Clone(t.steps)
	hist := t.seed.DeepCopy()
	settings := t.settings
	uid := t.uid
	r.mu.Unlock()

	first := 0
	for first < len(steps) && steps[first].now.Before(since) {
		first++
	}
	if first == len(steps) {
		return nil, fmt.Errorf("%w since %s", ErrNotRecorded, since.UTC().Format(time.RFC3339))
	}
	for _, s := range steps[1 : first+1] {
		s.delta.apply(&hist)
	}
	steps = steps[first:]

	e := exporter{namespace: namespace}
	start := steps[0].now.UTC().Truncate(time.Second)
	doc := Document{
		Start: metav1.NewTime(start),
		Controller: Controller{
			Tolerance:                    settings.Tolerance,
			CPUInitializationPeriod:      settings.CPUInitializationPeriod.String(),
			InitialReadinessDelay:        settings.InitialReadinessDelay.String(),
			DownscaleStabilizationWindow: settings.DownscaleStabilizationWindow.String(),
		},
		FeatureGates: map[string]bool{
			"HPAConfigurableTolerance": settings.Gates.ConfigurableTolerance,
			"PodLevelResources":        settings.Gates.PodLevelResources,
		},
	}
	rec := &Recording{}
	for i, s := range steps {
		if i > 0 {
			s.delta.apply(&hist)
		}
		at := s.now.Sub(start)
		out := Step{At: at.String(), Scale: &Scale{Replicas: s.scale.Replicas, StatusReplicas: s.scale.StatusReplicas, Selector: s.scale.Selector}}
		if i == 0 {
			doc.Autoscaler = &Autoscaler{
				APIVersion: v1alpha1.GroupVersion.String(), Kind: "MetricAutoscaler",
				Metadata: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: uid},
				Spec:     *s.spec, Status: Status{MetricAutoscalerStatus: *s.status, History: exactHistory(hist)},
			}
		} else {
			if s.spec != steps[i-1].spec {
				out.Autoscaler = &Edit{APIVersion: v1alpha1.GroupVersion.String(), Kind: "MetricAutoscaler", Spec: *s.spec}
			}
			if s.explicit {
				out.Status = &Status{MetricAutoscalerStatus: *s.status, History: exactHistory(hist)}
			}
		}
		e.step(i, s, &out)
		doc.Steps = append(doc.Steps, out)
		d := s.decided
		d.At, d.Time = out.At, s.now.UTC().Format(time.RFC3339Nano)
		rec.Recorded = append(rec.Recorded, d)
	}
	rec.Scenario = doc
	rec.Warnings = e.warnings
	return rec, nil
}

// exactHistory is the controller's memory as a scenario gives it: every
// entry (not the bounded copy it saves), to the nanosecond, in UTC.
func exactHistory(h behavior.History) *History {
	out := &History{}
	for _, r := range h.Recommendations {
		out.Recommendations = append(out.Recommendations, Recommendation{Replicas: r.Replicas, Time: r.Timestamp.UTC().Round(0)})
	}
	events := func(in []behavior.ScaleEvent) []ScaleEvent {
		var ev []ScaleEvent
		for _, e := range in {
			ev = append(ev, ScaleEvent{Change: e.Change, Time: e.Timestamp.UTC().Round(0), Outdated: e.Outdated})
		}
		return ev
	}
	out.ScaleUpEvents, out.ScaleDownEvents = events(h.ScaleUpEvents), events(h.ScaleDownEvents)
	return out
}

// exporter writes steps, giving each list only when it differs from the
// one the replay carries over.
type exporter struct {
	namespace string
	pods      *[]corev1.Pod
	podM      *[]PodMetrics
	custom    *[]CustomMetric
	external  *[]ExternalMetric
	failures  *[]Failure
	warnings  []string
}

func (e *exporter) warn(i int, s *step, format string, args ...any) {
	e.warnings = append(e.warnings, fmt.Sprintf("step %d (%s): ", i, s.now.UTC().Format(time.RFC3339))+fmt.Sprintf(format, args...))
}

func (e *exporter) step(i int, s *step, out *Step) {
	var failures []Failure
	fail := func(api, metric string) {
		f := Failure{API: api, Metric: metric}
		if !slices.Contains(failures, f) {
			failures = append(failures, f)
		}
	}
	if s.writeFailed {
		fail("scale", "")
	}

	known := map[string]bool{}
	if s.podsRead {
		pods := make([]corev1.Pod, len(s.pods))
		for j, p := range s.pods {
			pods[j] = *p
			known[p.Name] = true
		}
		if e.pods == nil || !apiequality.Semantic.DeepEqual(*e.pods, pods) {
			out.Pods, e.pods = &pods, &pods
		}
	}
	if i == 0 && out.Pods == nil {
		// A scenario's first step lists the pods: this one read none.
		empty := []corev1.Pod{}
		out.Pods, e.pods = &empty, &empty
	}

	a := &s.answers
	if len(a.resource) > 0 {
		podM := e.podMetrics(i, s, known)
		for _, r := range a.resource {
			if r.failed {
				fail("metrics.k8s.io", string(r.resource))
			}
		}
		if podM != nil && (e.podM == nil || !apiequality.Semantic.DeepEqual(*e.podM, podM)) {
			out.PodMetrics, e.podM = &podM, &podM
		}
	}
	if len(a.pods) > 0 || len(a.object) > 0 {
		var custom []CustomMetric
		for _, q := range a.pods {
			if q.failed {
				fail("custom.metrics.k8s.io", q.metric)
				continue
			}
			lbls := e.labelsFor(i, s, q.metric, q.selector)
			for _, pod := range slices.Sorted(maps.Keys(q.info)) {
				if !known[pod] {
					e.warn(i, s, "custom metric %s has a sample of pod %s, which the controller's pod cache did not list: the replay leaves it out", q.metric, pod)
					continue
				}
				m := q.info[pod]
				ts := metav1.NewTime(m.Timestamp)
				custom = append(custom, CustomMetric{Object: ObjectRef{Kind: "Pod", Name: pod}, Metric: q.metric, Labels: lbls,
					Value: *resource.NewMilliQuantity(m.Value, resource.DecimalSI), Timestamp: &ts, Window: m.Window.String()})
			}
		}
		for _, q := range a.object {
			if q.failed {
				fail("custom.metrics.k8s.io", q.metric)
				continue
			}
			name := q.ref.Name
			if q.ref.Kind == "Namespace" && apiGroup(q.ref.APIVersion) == "" {
				name = e.namespace
			}
			custom = append(custom, CustomMetric{Object: ObjectRef{Kind: q.ref.Kind, Name: name}, Metric: q.metric,
				Labels: e.labelsFor(i, s, q.metric, q.selector), Value: *resource.NewMilliQuantity(q.value, resource.DecimalSI)})
		}
		if custom != nil && (e.custom == nil || !apiequality.Semantic.DeepEqual(*e.custom, custom)) {
			out.CustomMetrics, e.custom = &custom, &custom
		}
	}
	if len(a.external) > 0 {
		var external []ExternalMetric
		seen := map[string]bool{}
		for _, q := range a.external {
			if q.failed {
				fail("external.metrics.k8s.io", q.metric)
				continue
			}
			key := q.metric + "\x00" + q.selector
			if seen[key] {
				continue // the same query twice in one reconcile: one answer
			}
			seen[key] = true
			lbls := e.labelsFor(i, s, q.metric, q.selector)
			for _, v := range q.values {
				external = append(external, ExternalMetric{Metric: q.metric, Labels: lbls, Value: *resource.NewMilliQuantity(v, resource.DecimalSI)})
			}
		}
		e.checkExternal(i, s, external)
		if external != nil && (e.external == nil || !apiequality.Semantic.DeepEqual(*e.external, external)) {
			out.ExternalMetrics, e.external = &external, &external
		}
	}
	if failures == nil {
		failures = []Failure{}
	}
	if (e.failures == nil && len(failures) > 0) || (e.failures != nil && !slices.Equal(*e.failures, failures)) {
		out.Failures, e.failures = &failures, &failures
	}
}

// podMetrics rebuilds the metrics.k8s.io answer of a step from the samples
// the core read: per pod, containers whose usage gives every query its
// answer — the container asked for, or the sum over all containers (with a
// container lacking the resource where the pod had no sample of it).
func (e *exporter) podMetrics(i int, s *step, known map[string]bool) []PodMetrics {
	if !slices.ContainsFunc(s.answers.resource, func(r resourceAnswer) bool { return !r.failed }) {
		return nil
	}
	byPod := map[string]*PodMetrics{}
	entry := func(pod string, m metricsource.PodMetric) *PodMetrics {
		pm := byPod[pod]
		if pm == nil {
			pm = &PodMetrics{Pod: pod, Timestamp: metav1.NewTime(m.Timestamp), Window: m.Window.String(), Containers: map[string]corev1.ResourceList{}}
			byPod[pod] = pm
		} else if !pm.Timestamp.Time.Equal(m.Timestamp) || pm.Window != m.Window.String() {
			e.warn(i, s, "metrics.k8s.io answered pod %s with two timestamps in one reconcile: the replay uses the first", pod)
		}
		return pm
	}
	var totals []resourceAnswer
	for _, r := range s.answers.resource {
		if r.failed {
			continue
		}
		if r.container == "" {
			totals = append(totals, r)
			continue
		}
		for pod, m := range r.info {
			pm := entry(pod, m)
			pm.Containers[r.container] = setUsage(pm.Containers[r.container], r.resource, m.Value)
		}
	}
	for _, r := range totals {
		for pod, m := range r.info {
			entry(pod, m)
		}
	}
	specContainers := map[string][]string{}
	for _, p := range s.pods {
		for _, c := range p.Spec.Containers {
			specContainers[p.Name] = append(specContainers[p.Name], c.Name)
		}
	}
	for pod, pm := range byPod {
		// A pod without a sample of a summed resource has a container
		// without it.
		for _, r := range totals {
			if _, ok := r.info[pod]; !ok {
				pm.Containers["without-"+string(r.resource)] = corev1.ResourceList{}
			}
		}
		for _, r := range totals {
			m, ok := r.info[pod]
			if !ok {
				continue
			}
			var named int64
			var lacking []string
			for name, usage := range pm.Containers {
				if q, has := usage[r.resource]; has {
					named += q.MilliValue()
				} else if name != "without-"+string(r.resource) {
					lacking = append(lacking, name)
				}
			}
			// The rest goes to the first of the pod's containers that has no
			// value yet, or to a container of the recording's own.
			rest := "recorded"
			for _, c := range specContainers[pod] {
				if _, has := pm.Containers[c][r.resource]; !has {
					rest = c
					break
				}
			}
			for _, name := range lacking {
				pm.Containers[name] = setUsage(pm.Containers[name], r.resource, 0)
			}
			pm.Containers[rest] = setUsage(pm.Containers[rest], r.resource, m.Value-named)
		}
	}
	out := make([]PodMetrics, 0, len(byPod))
	for _, pod := range slices.Sorted(maps.Keys(byPod)) {
		if !known[pod] {
			e.warn(i, s, "metrics.k8s.io has a sample of pod %s, which the controller's pod cache did not list: the replay leaves it out", pod)
			continue
		}
		out = append(out, *byPod[pod])
	}
	return out
}

func setUsage(l corev1.ResourceList, name corev1.ResourceName, milli int64) corev1.ResourceList {
	if l == nil {
		l = corev1.ResourceList{}
	}
	format := resource.DecimalSI
	if name == corev1.ResourceMemory {
		format = resource.BinarySI
	}
	l[name] = *resource.NewMilliQuantity(milli, format)
	return l
}

// labelsFor returns labels that the query's metric selector matches.
func (e *exporter) labelsFor(i int, s *step, metric, selector string) map[string]string {
	lbls, ok := satisfying(selector)
	if !ok {
		e.warn(i, s, "no labels match the selector %q of metric %s: the replay may answer it differently", selector, metric)
	}
	return lbls
}

// checkExternal warns when the world of the scenario would answer an
// External query with other series than the controller got (two queries of
// one metric whose selectors match each other's labels).
func (e *exporter) checkExternal(i int, s *step, entries []ExternalMetric) {
	for _, q := range s.answers.external {
		if q.failed {
			continue
		}
		sel, err := labels.Parse(q.selector)
		if err != nil {
			continue
		}
		var got []int64
		for _, m := range entries {
			if m.Metric == q.metric && sel.Matches(labels.Set(m.Labels)) {
				got = append(got, m.Value.MilliValue())
			}
		}
		if !slices.Equal(got, q.values) {
			e.warn(i, s, "External metric %s{%s}: the replay answers %v, the controller read %v", q.metric, q.selector, got, q.values)
		}
	}
}

// satisfying returns a label set that the selector (in its string form)
// matches, and false when it found none.
func satisfying(selector string) (map[string]string, bool) {
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, false
	}
	reqs, _ := sel.Requirements()
	out := map[string]string{}
	for _, r := range reqs {
		vals := r.Values().List()
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			if len(vals) > 0 {
				out[r.Key()] = vals[0]
			}
		case selection.Exists:
			if _, ok := out[r.Key()]; !ok {
				out[r.Key()] = "recorded"
			}
		case selection.GreaterThan, selection.LessThan:
			if len(vals) > 0 {
				if n, err := strconv.ParseInt(vals[0], 10, 64); err == nil {
					if r.Operator() == selection.GreaterThan {
						n++
					} else {
						n--
					}
					out[r.Key()] = strconv.FormatInt(n, 10)
				}
			}
		}
	}
	if len(out) == 0 {
		out = nil
	}
	return out, sel.Matches(labels.Set(out))
}

func apiGroup(apiVersion string) string {
	for i := 0; i < len(apiVersion); i++ {
		if apiVersion[i] == '/' {
			return apiVersion[:i]
		}
	}
	return ""
}
