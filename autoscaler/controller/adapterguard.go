package controller

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/klog/v2"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/decision"
)

// AllowMetricsAPITargetAnnotation, set to "true" on a MetricAutoscaler,
// lets it scale a workload that serves a metrics API (see metricsAPIGuard).
const AllowMetricsAPITargetAnnotation = "autoscaling.metricscale.dev/allow-metrics-api-target"

// ReasonTargetServesMetricsAPI is the AbleToScale condition's reason and
// the Warning event's of a MetricAutoscaler refused by the guard.
const ReasonTargetServesMetricsAPI = "TargetServesMetricsAPI"

// metricsAPIGroups are the APIs whose backends the guard protects: the
// metrics every autoscaler reads.
var metricsAPIGroups = map[string]bool{"custom.metrics.k8s.io": true, "external.metrics.k8s.io": true, "metrics.k8s.io": true}

// apiServicesGVR is apiregistration.k8s.io/v1 APIServices.
var apiServicesGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// backendsTTL is how long the list of metrics API backends is reused.
const backendsTTL = time.Minute

// backend is a Service behind a metrics APIService.
type backend struct {
	apiService         string
	namespace, service string
	selector           labels.Selector
}

// metricsAPIGuard tells whether a MetricAutoscaler's target serves a
// metrics API (the adapter, metrics-server, prometheus-adapter, KEDA's
// server): scaled down it takes away what the autoscalers read, and at
// zero no failed read ever brings it back. A CRD validation rule cannot
// see it (it sees the object alone, not the APIServices and Services), so
// the controller refuses such a target at each reconcile: the AbleToScale
// condition and a Warning event name the APIService, the metrics are still
// read and shown, and the scale is not written. The annotation
// AllowMetricsAPITargetAnnotation: "true" lifts it.
type metricsAPIGuard struct {
	c *Controller

	mu       sync.Mutex
	backends []backend
	fetched  time.Time
	warned   bool
}

// list returns the metrics APIs' backends, relisted every backendsTTL.
// Without the permission to read APIServices and Services the guard is
// off, said once in the log.
func (g *metricsAPIGuard) list(ctx context.Context) []backend {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.c.clock.Now()
	if !g.fetched.IsZero() && now.Sub(g.fetched) < backendsTTL {
		return g.backends
	}
	g.fetched = now
	bs, err := g.fetch(ctx)
	if err != nil {
		if !g.warned {
			klog.FromContext(ctx).Error(err, "Cannot list the metrics APIs' backends: MetricAutoscalers that target them are not refused (grant list on apiservices and get on services)")
			g.warned = true
		}
		return g.backends
	}
	g.backends = bs
	return bs
}

func (g *metricsAPIGuard) fetch(ctx context.Context) ([]backend, error) {
	list, err := g.c.clients.Dynamic.Resource(apiServicesGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing APIServices: %w", err)
	}
	var out []backend
	for _, item := range list.Items {
		group, _, _ := unstructuredString(item.Object, "spec", "group")
		ns, _, _ := unstructuredString(item.Object, "spec", "service", "namespace")
		name, _, _ := unstructuredString(item.Object, "spec", "service", "name")
		if !metricsAPIGroups[group] || ns == "" || name == "" {
			continue
		}
		svc, err := g.c.clients.Kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading Service %s/%s of APIService %s: %w", ns, name, item.GetName(), err)
		}
		if len(svc.Spec.Selector) == 0 {
			continue // endpoints managed by hand: no pods to match
		}
		out = append(out, backend{apiService: item.GetName(), namespace: ns, service: name, selector: labels.SelectorFromSet(svc.Spec.Selector)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].apiService < out[j].apiService })
	return out, nil
}

func unstructuredString(obj map[string]any, fields ...string) (string, bool, error) {
	cur := any(obj)
	for _, f := range fields {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false, nil
		}
		cur = m[f]
	}
	s, ok := cur.(string)
	return s, ok, nil
}

// served returns the backend the target of hpa (in scale sc) serves, if
// any: one of its pods is selected by the backend's Service, or, with no
// pods (at zero), its selector's labels are.
func (g *metricsAPIGuard) served(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, sc *autoscalingv1.Scale) (backend, bool) {
	if sc == nil || sc.Status.Selector == "" {
		return backend{}, false
	}
	var candidates []backend
	for _, b := range g.list(ctx) {
		if b.namespace == hpa.Namespace {
			candidates = append(candidates, b)
		}
	}
	if len(candidates) == 0 {
		return backend{}, false
	}
	sel, err := labels.Parse(sc.Status.Selector)
	if err != nil {
		return backend{}, false
	}
	pods, err := lazyPods{g.c, hpa.Namespace}.List(sel)
	if err != nil {
		pods = nil
	}
	implied := impliedLabels(sel)
	for _, b := range candidates {
		if b.selector.Matches(implied) {
			return b, true
		}
		for _, p := range pods {
			if b.selector.Matches(labels.Set(p.Labels)) {
				return b, true
			}
		}
	}
	return backend{}, false
}

// impliedLabels are the labels every pod sel selects has: its = and
// one-value in requirements.
func impliedLabels(sel labels.Selector) labels.Set {
	set := labels.Set{}
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			if vals := r.ValuesUnsorted(); len(vals) == 1 {
				set[r.Key()] = vals[0]
			}
		}
	}
	return set
}

// refuseMetricsAPITarget turns res, a dry run's, into the refusal: the
// AbleToScale condition False naming the APIService, a Warning event
// instead of the dry run's, and nothing written to the scale.
func refuseMetricsAPITarget(ma *v1alpha1.MetricAutoscaler, b backend, res *decision.Result, now time.Time) {
	msg := fmt.Sprintf("not scaling %s %s/%s: it serves the metrics API %s (pods of Service %s/%s), and scaled down it takes away the metrics every autoscaler reads — at zero nothing would scale it back; set the annotation %s: \"true\" to allow it",
		ma.Spec.ScaleTargetRef.Kind, ma.Namespace, ma.Spec.ScaleTargetRef.Name, b.apiService, b.namespace, b.service, AllowMetricsAPITargetAnnotation)
	ltt := metav1.NewTime(now)
	for _, c := range ma.Status.Conditions {
		if c.Type == autoscalingv2.AbleToScale && c.Status == corev1.ConditionFalse && c.Reason == ReasonTargetServesMetricsAPI {
			ltt = c.LastTransitionTime
		}
	}
	cond := autoscalingv2.HorizontalPodAutoscalerCondition{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionFalse, Reason: ReasonTargetServesMetricsAPI, Message: msg, LastTransitionTime: ltt}
	conds := make([]autoscalingv2.HorizontalPodAutoscalerCondition, 0, len(res.Status.Conditions)+1)
	found := false
	for _, c := range res.Status.Conditions {
		if c.Type == autoscalingv2.AbleToScale {
			c, found = cond, true
		}
		conds = append(conds, c)
	}
	if !found {
		conds = append([]autoscalingv2.HorizontalPodAutoscalerCondition{cond}, conds...)
	}
	res.Status.Conditions = conds
	res.Status.DesiredReplicas = res.Status.CurrentReplicas
	events := res.Events[:0:0]
	for _, e := range res.Events {
		if e.Reason != "DryRunRescale" {
			events = append(events, e)
		}
	}
	res.Events = append(events, decision.Event{Type: corev1.EventTypeWarning, Reason: ReasonTargetServesMetricsAPI, Message: msg})
}
