// Package replicas computes one metric's replica proposal the way the
// Kubernetes HPA controller does: pods are grouped into ready, unready,
// missing and ignored, the usage ratio is compared with the tolerance, and
// missing and unready pods are rebalanced before a second look.
package replicas

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	resourcehelpers "k8s.io/component-helpers/resource"

	"github.com/metricscale/metricscale/autoscaler/metricsource"
)

// Tolerances are the usage-ratio bands inside which no scaling happens.
type Tolerances struct {
	ScaleDown float64
	ScaleUp   float64
}

// Within reports whether ratio needs no change.
func (t Tolerances) Within(ratio float64) bool {
	return (1.0-t.ScaleDown) <= ratio && ratio <= (1.0+t.ScaleUp)
}

func (t Tolerances) String() string {
	return fmt.Sprintf("[down:%.1f%%, up:%.1f%%]", t.ScaleDown*100., t.ScaleUp*100.)
}

var (
	errNoPods    = errors.New("no pods returned by selector while calculating replica count")
	errNoMetrics = errors.New("did not receive metrics for targeted pods (pods might be unready)")
	errNoMatch   = errors.New("no metrics returned matched known pods")
)

type podState uint8

const (
	podReady podState = iota
	podUnready
	podMissing
	podIgnored
)

// Calculator proposes replica counts for one reconcile. Pods are the pods
// the target's selector selects in the autoscaler's namespace; Now is the
// reconcile's time. A Calculator reuses its scratch space across metrics, so
// one is made per reconcile and is not safe for concurrent use.
type Calculator struct {
	Source    metricsource.Source
	Namespace string
	Selector  labels.Selector
	Pods      []*corev1.Pod
	// ListPods, when set, fills Pods the first time a metric reads pods:
	// External and Object AverageValue metrics never do, so an autoscaler
	// with only those needs no pod cache.
	ListPods func() ([]*corev1.Pod, error)
	Now      time.Time

	CPUInitializationPeriod time.Duration
	InitialReadinessDelay   time.Duration
	// PodLevelResources enables pod-level requests (feature gate PodLevelResources).
	PodLevelResources bool
	// UpstreamArithmetic wraps on overflow as kube-controller-manager does
	// (see arith.go) and reads requests from spec only; off, counts and sums
	// saturate and a container's requests are its status' where reported.
	UpstreamArithmetic bool

	listed   bool
	trace    Trace
	states   []podState
	values   []int64 // each pod's sample, valid where it has one
	requests []int64
}

// grouping is the outcome of sorting pods by what their samples may say.
type grouping struct {
	ready, unready, missing int
	// entries is how many samples remain once ignored and unready pods' are
	// removed (samples of pods the selector does not know included).
	entries int
	// kept is the exact sum of those remaining samples.
	kept sum
}

// listPods fills Pods with ListPods, once.
func (c *Calculator) listPods() error {
	if c.ListPods == nil || c.listed {
		return nil
	}
	pods, err := c.ListPods()
	if err != nil {
		return fmt.Errorf("unable to get pods while calculating replica count: %w", err)
	}
	c.Pods, c.listed = pods, true
	return nil
}

func (c *Calculator) group(info metricsource.PodMetricsInfo, resource corev1.ResourceName) grouping {
	n := len(c.Pods)
	if cap(c.states) < n {
		c.states = make([]podState, n)
		c.values = make([]int64, n)
	}
	c.states, c.values = c.states[:n], c.values[:n]
	var g grouping
	found := 0
	for i, pod := range c.Pods {
		sample, ok := info[pod.Name]
		if ok {
			found++
		}
		st := c.classify(pod, sample, ok, resource)
		c.states[i], c.values[i] = st, sample.Value
		switch st {
		case podReady:
			g.ready++
			g.kept.add(sample.Value)
		case podMissing:
			g.missing++
		case podUnready:
			g.unready++
		}
	}
	g.entries = g.ready
	if found != len(info) {
		// Samples of pods the selector does not know stay in the average:
		// what is kept is every sample less those of pods set aside.
		g.entries += len(info) - found
		g.kept = sum{}
		for _, v := range info {
			g.kept.add(v.Value)
		}
		for i, pod := range c.Pods {
			if st := c.states[i]; st == podIgnored || st == podUnready {
				if m, ok := info[pod.Name]; ok {
					g.kept.sub(m.Value)
				}
			}
		}
	}
	return g
}

func (c *Calculator) classify(pod *corev1.Pod, sample metricsource.PodMetric, found bool, resource corev1.ResourceName) podState {
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodFailed {
		return podIgnored
	}
	if pod.Status.Phase == corev1.PodPending {
		return podUnready
	}
	if !found {
		return podMissing
	}
	if resource != corev1.ResourceCPU {
		return podReady
	}
	cond := readyCondition(pod)
	if cond == nil || pod.Status.StartTime == nil {
		return podUnready
	}
	var unready bool
	if pod.Status.StartTime.Add(c.CPUInitializationPeriod).After(c.Now) {
		// Still initializing: a sample counts once the pod is ready and a
		// whole window has passed since it became so.
		unready = cond.Status == corev1.ConditionFalse || sample.Timestamp.Before(cond.LastTransitionTime.Add(sample.Window))
	} else {
		// Past initialization: set aside only a pod that has never been ready.
		unready = cond.Status == corev1.ConditionFalse && pod.Status.StartTime.Add(c.InitialReadinessDelay).After(cond.LastTransitionTime.Time)
	}
	if unready {
		return podUnready
	}
	return podReady
}

func readyCondition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func isRunningAndReady(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning {
		return false
	}
	cond := readyCondition(pod)
	return cond != nil && cond.Status == corev1.ConditionTrue
}

// ResourceUtilization proposes replicas for a Resource or ContainerResource
// metric with a Utilization target. It returns the proposal, the current
// utilization (percent of request) and the raw average usage (milli-units).
func (c *Calculator) ResourceUtilization(ctx context.Context, currentReplicas, targetUtilization int32, resource corev1.ResourceName, tol Tolerances, container string) (int32, int32, int64, error) {
	c.trace = Trace{Tolerance: tol, Target: int64(targetUtilization)}
	info, _, err := c.Source.ResourceMetric(ctx, resource, c.Namespace, c.Selector, container)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("unable to get metrics for resource %s: %w", resource, err)
	}
	if err := c.listPods(); err != nil {
		return 0, 0, 0, err
	}
	if len(c.Pods) == 0 {
		return 0, 0, 0, errNoPods
	}
	g := c.group(info, resource)
	if g.entries == 0 {
		return 0, 0, 0, errNoMetrics
	}
	if err := c.computeRequests(container, resource); err != nil {
		return 0, 0, 0, err
	}

	up := c.UpstreamArithmetic
	var usage, requested sum
	for i := range c.Pods {
		if c.states[i] == podReady {
			usage.add(c.values[i])
			requested.add(c.requests[i])
		}
	}
	if requested.value(up) == 0 {
		return 0, 0, 0, errNoMatch
	}
	utilization := c.utilization(usage.value(up), requested.value(up))
	raw := usage.div(int64(g.ready), up)
	ratio := float64(utilization) / float64(targetUtilization)
	c.traceGroups(g, int64(utilization), ratio)

	scaleUpWithUnready := g.unready > 0 && ratio > 1.0
	if !scaleUpWithUnready && g.missing == 0 {
		if tol.Within(ratio) {
			c.trace.Rule = RuleTolerance
			return currentReplicas, utilization, raw, nil
		}
		c.trace.Rule = RuleRatio
		return c.count(math.Ceil(ratio * float64(g.ready))), utilization, raw, nil
	}

	// Rebalance: missing pods count as their request (or the target when it
	// is above 100%) on a scale-down and as 0 on a scale-up; unready pods as
	// 0 on a scale-up.
	entries := g.entries
	if g.missing > 0 && (ratio < 1.0 || ratio > 1.0) {
		fallback := int64(max(100, targetUtilization))
		for i := range c.Pods {
			if c.states[i] != podMissing {
				continue
			}
			if ratio < 1.0 {
				usage.add(c.mulDiv(c.requests[i], fallback, 100))
			}
			requested.add(c.requests[i])
			entries++
		}
	}
	if scaleUpWithUnready {
		for i := range c.Pods {
			if c.states[i] == podUnready {
				requested.add(c.requests[i])
				entries++
			}
		}
	}
	if requested.value(up) == 0 {
		return 0, utilization, raw, errNoMatch
	}
	newRatio := float64(c.utilization(usage.value(up), requested.value(up))) / float64(targetUtilization)
	return c.rebalanced(currentReplicas, ratio, newRatio, entries, tol), utilization, raw, nil
}

// rebalanced finishes a proposal whose ratio was recomputed with missing
// and unready pods filled in: no change when that lands inside the
// tolerance or flips the direction of the scale.
func (c *Calculator) rebalanced(currentReplicas int32, ratio, newRatio float64, entries int, tol Tolerances) int32 {
	c.trace.NewRatio, c.trace.Counted, c.trace.Rule = newRatio, entries, RuleRebalancedHold
	if tol.Within(newRatio) || (ratio < 1.0 && newRatio > 1.0) || (ratio > 1.0 && newRatio < 1.0) {
		return currentReplicas
	}
	proposal := c.count(math.Ceil(newRatio * float64(entries)))
	if (newRatio < 1.0 && proposal > currentReplicas) || (newRatio > 1.0 && proposal < currentReplicas) {
		return currentReplicas
	}
	c.trace.Rule = RuleRebalanced
	return proposal
}

// traceGroups notes the pod grouping and the first ratio of a pod-based
// calculation.
func (c *Calculator) traceGroups(g grouping, usage int64, ratio float64) {
	c.trace.Ready, c.trace.Unready, c.trace.Missing = g.ready, g.unready, g.missing
	c.trace.Ignored = len(c.Pods) - g.ready - g.unready - g.missing
	c.trace.Usage, c.trace.Ratio = usage, ratio
}

// ResourceAverageValue proposes replicas for a Resource or ContainerResource
// metric with an AverageValue target (milli-units per pod).
func (c *Calculator) ResourceAverageValue(ctx context.Context, currentReplicas int32, targetUsage int64, resource corev1.ResourceName, tol Tolerances, container string) (int32, int64, error) {
	c.trace = Trace{Tolerance: tol, Target: targetUsage}
	info, _, err := c.Source.ResourceMetric(ctx, resource, c.Namespace, c.Selector, container)
	if err != nil {
		return 0, 0, fmt.Errorf("unable to get metrics for resource %s: %w", resource, err)
	}
	return c.plain(info, currentReplicas, targetUsage, tol, resource)
}

// PodsAverageValue proposes replicas for a Pods metric.
func (c *Calculator) PodsAverageValue(ctx context.Context, currentReplicas int32, targetUsage int64, metricName string, tol Tolerances, metricSelector labels.Selector) (int32, int64, error) {
	c.trace = Trace{Tolerance: tol, Target: targetUsage}
	info, _, err := c.Source.PodsMetric(ctx, metricName, c.Namespace, c.Selector, metricSelector)
	if err != nil {
		return 0, 0, fmt.Errorf("unable to get metric %s: %w", metricName, err)
	}
	return c.plain(info, currentReplicas, targetUsage, tol, "")
}

// plain proposes replicas for a per-pod average that is not a percentage.
func (c *Calculator) plain(info metricsource.PodMetricsInfo, currentReplicas int32, targetUsage int64, tol Tolerances, resource corev1.ResourceName) (int32, int64, error) {
	if err := c.listPods(); err != nil {
		return 0, 0, err
	}
	if len(c.Pods) == 0 {
		return 0, 0, errNoPods
	}
	g := c.group(info, resource)
	if g.entries == 0 {
		return 0, 0, errNoMetrics
	}
	up := c.UpstreamArithmetic
	usage := g.kept.div(int64(g.entries), up)
	ratio := float64(usage) / float64(targetUsage)
	c.traceGroups(g, usage, ratio)

	scaleUpWithUnready := g.unready > 0 && ratio > 1.0
	if !scaleUpWithUnready && g.missing == 0 {
		if tol.Within(ratio) {
			c.trace.Rule = RuleTolerance
			return currentReplicas, usage, nil
		}
		c.trace.Rule = RuleRatio
		return c.count(math.Ceil(ratio * float64(g.ready))), usage, nil
	}

	// Missing pods count as the target on a scale-down and 0 on a scale-up;
	// unready pods as 0 on a scale-up.
	total, entries := g.kept, g.entries
	// A ratio of exactly 1 (or NaN) leaves missing pods out.
	if g.missing > 0 && (ratio < 1.0 || ratio > 1.0) {
		if ratio < 1.0 {
			for range g.missing {
				total.add(targetUsage)
			}
		}
		entries += g.missing
	}
	if scaleUpWithUnready {
		entries += g.unready
	}
	newRatio := float64(total.div(int64(entries), up)) / float64(targetUsage)
	return c.rebalanced(currentReplicas, ratio, newRatio, entries, tol), usage, nil
}

// ObjectValue proposes replicas for an Object metric with a Value target.
func (c *Calculator) ObjectValue(ctx context.Context, currentReplicas int32, targetUsage int64, metricName string, tol Tolerances, ref *autoscalingv2.CrossVersionObjectReference, metricSelector labels.Selector) (int32, int64, error) {
	c.trace = Trace{Tolerance: tol, Target: targetUsage}
	usage, _, err := c.Source.ObjectMetric(ctx, metricName, c.Namespace, ref, metricSelector)
	if err != nil {
		return 0, 0, fmt.Errorf("unable to get metric %s: %w on %s %s/%s", metricName, err, ref.Kind, c.Namespace, ref.Name)
	}
	c.trace.Usage = usage
	proposal, err := c.usageRatioProposal(currentReplicas, float64(usage)/float64(targetUsage), tol)
	return proposal, usage, err
}

// usageRatioProposal scales the ready pods by ratio. From zero replicas it
// ignores pods and tolerance, so that a workload can come back from zero.
func (c *Calculator) usageRatioProposal(currentReplicas int32, ratio float64, tol Tolerances) (int32, error) {
	c.trace.Ratio = ratio
	if currentReplicas == 0 {
		c.trace.Rule = RuleFromZero
		return c.count(math.Ceil(ratio)), nil
	}
	if tol.Within(ratio) {
		c.trace.Rule = RuleTolerance
		return currentReplicas, nil
	}
	if err := c.listPods(); err != nil {
		return 0, fmt.Errorf("unable to calculate ready pods: %w", err)
	}
	if len(c.Pods) == 0 {
		return 0, fmt.Errorf("unable to calculate ready pods: %w", errNoPods)
	}
	ready := 0
	for _, pod := range c.Pods {
		if isRunningAndReady(pod) {
			ready++
		}
	}
	c.trace.Rule, c.trace.Ready = RuleRatio, ready
	proposal := ratio * float64(ready)
	if proposal > math.MaxInt32 {
		return math.MaxInt32, nil
	}
	return c.count(math.Ceil(proposal)), nil
}

// ObjectAverageValue proposes replicas for an Object metric with an
// AverageValue target: the object's value shared by the current pods.
func (c *Calculator) ObjectAverageValue(ctx context.Context, statusReplicas int32, targetAverage int64, metricName string, tol Tolerances, ref *autoscalingv2.CrossVersionObjectReference, metricSelector labels.Selector) (int32, int64, error) {
	c.trace = Trace{Tolerance: tol, Target: targetAverage}
	usage, _, err := c.Source.ObjectMetric(ctx, metricName, c.Namespace, ref, metricSelector)
	if err != nil {
		return 0, 0, fmt.Errorf("unable to get metric %s: %w on %s %s/%s", metricName, err, ref.Kind, c.Namespace, ref.Name)
	}
	proposal := statusReplicas
	ratio := float64(usage) / (float64(targetAverage) * float64(proposal))
	c.trace.Usage, c.trace.Ratio, c.trace.Rule = usage, ratio, RuleTolerance
	if !tol.Within(ratio) {
		c.trace.Rule = RuleAverage
		proposal = c.count(math.Ceil(float64(usage) / float64(targetAverage)))
	}
	return proposal, c.ceil64(float64(usage) / float64(statusReplicas)), nil
}

// ExternalValue proposes replicas for an External metric with a Value
// target: the matching series are summed (saturating at MaxInt64).
func (c *Calculator) ExternalValue(ctx context.Context, currentReplicas int32, targetUsage int64, metricName string, tol Tolerances, metricSelector *metav1.LabelSelector) (int32, int64, error) {
	c.trace = Trace{Tolerance: tol, Target: targetUsage}
	values, err := c.external(ctx, metricName, metricSelector)
	if err != nil {
		return 0, 0, err
	}
	usage := c.sumExternal(values)
	c.trace.Usage = usage
	proposal, err := c.usageRatioProposal(currentReplicas, float64(usage)/float64(targetUsage), tol)
	return proposal, usage, err
}

// ExternalAverageValue proposes replicas for an External metric with an
// AverageValue target: the summed series shared by the current pods.
func (c *Calculator) ExternalAverageValue(ctx context.Context, statusReplicas int32, targetPerPod int64, metricName string, tol Tolerances, metricSelector *metav1.LabelSelector) (int32, int64, error) {
	c.trace = Trace{Tolerance: tol, Target: targetPerPod}
	values, err := c.external(ctx, metricName, metricSelector)
	if err != nil {
		return 0, 0, err
	}
	usage := c.sumExternalPerPod(values)
	proposal := statusReplicas
	ratio := float64(usage) / (float64(targetPerPod) * float64(proposal))
	c.trace.Usage, c.trace.Ratio, c.trace.Rule = usage, ratio, RuleTolerance
	if !tol.Within(ratio) {
		c.trace.Rule = RuleAverage
		p := math.Ceil(float64(usage) / float64(targetPerPod))
		if p > float64(math.MaxInt32) {
			proposal = math.MaxInt32
		} else {
			proposal = c.count(p)
		}
	}
	if float64(usage) >= float64(math.MaxInt64) {
		usage = math.MaxInt64
	} else {
		usage = c.ceil64(float64(usage) / float64(statusReplicas))
	}
	return proposal, usage, nil
}

// sumExternal sums an External Value metric's series. Upstream saturates
// a positive overflow at its first step and lets a negative one wrap.
func (c *Calculator) sumExternal(values []int64) int64 {
	if !c.UpstreamArithmetic {
		var s sum
		for _, v := range values {
			s.add(v)
		}
		return s.value(false)
	}
	var usage int64
	for _, v := range values {
		if v > 0 && usage > math.MaxInt64-v {
			return math.MaxInt64
		}
		usage += v
	}
	return usage
}

// sumExternalPerPod sums an External AverageValue metric's series.
// Upstream takes any negative running sum for an overflow, so [-5] or
// [10, -10.001] read as MaxInt64 and scale to maxReplicas.
func (c *Calculator) sumExternalPerPod(values []int64) int64 {
	if !c.UpstreamArithmetic {
		var s sum
		for _, v := range values {
			s.add(v)
		}
		return s.value(false)
	}
	var usage int64
	for _, v := range values {
		usage += v
		if usage < 0 {
			return math.MaxInt64
		}
	}
	return usage
}

// external reads an External metric's matching series.
func (c *Calculator) external(ctx context.Context, metricName string, metricSelector *metav1.LabelSelector) ([]int64, error) {
	sel, err := metav1.LabelSelectorAsSelector(metricSelector)
	if err != nil {
		return nil, err
	}
	values, _, err := c.Source.ExternalMetric(ctx, metricName, c.Namespace, sel)
	if err != nil {
		return nil, fmt.Errorf("unable to get external metric %s/%s/%+v: %w", c.Namespace, metricName, metricSelector, err)
	}
	return values, nil
}

// computeRequests fills c.requests with each pod's request of resource: one
// container's, the pod-level request when set (and no container is named),
// or the sum over containers and restartable init containers (sidecars).
func (c *Calculator) computeRequests(container string, resource corev1.ResourceName) error {
	if cap(c.requests) < len(c.Pods) {
		c.requests = make([]int64, len(c.Pods))
	}
	c.requests = c.requests[:len(c.Pods)]
	for i, pod := range c.Pods {
		var err error
		if c.PodLevelResources && container == "" && resourcehelpers.IsPodLevelRequestsSet(pod) {
			c.requests[i], err = podLevelRequest(pod, resource)
		} else {
			c.requests[i], err = containerRequests(pod, container, resource, !c.UpstreamArithmetic)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func podLevelRequest(pod *corev1.Pod, resource corev1.ResourceName) (int64, error) {
	q, ok := resourcehelpers.PodRequests(pod, resourcehelpers.PodResourcesOptions{})[resource]
	if !ok {
		return 0, fmt.Errorf("missing pod-level request for %s in Pod %s", resource, pod.Name)
	}
	return q.MilliValue(), nil
}

// containerRequests sums the containers' requests of resource. With
// actual, a container's request is the one its status reports
// (status.containerStatuses[].resources), where it reports one: during an
// in-place resize spec holds the size asked for and status the size the
// container has, and usage is measured against the latter (upstream reads
// spec; docs/scenarios.md, deviation 8).
func containerRequests(pod *corev1.Pod, container string, resource corev1.ResourceName, actual bool) (int64, error) {
	var total int64
	for i, n := 0, len(pod.Spec.Containers)+len(pod.Spec.InitContainers); i < n; i++ {
		var ctr *corev1.Container
		if i < len(pod.Spec.Containers) {
			ctr = &pod.Spec.Containers[i]
		} else {
			ctr = &pod.Spec.InitContainers[i-len(pod.Spec.Containers)]
			// Only restartable init containers (sidecars) run beside the app.
			if ctr.RestartPolicy == nil || *ctr.RestartPolicy != corev1.ContainerRestartPolicyAlways {
				continue
			}
		}
		if container != "" && container != ctr.Name {
			continue
		}
		q, ok := ctr.Resources.Requests[resource]
		if actual {
			if st, found := statusRequest(pod, ctr.Name, i >= len(pod.Spec.Containers), resource); found {
				q, ok = st, true
			}
		}
		if !ok {
			return 0, fmt.Errorf("missing request for %s in container %s of Pod %s", resource, ctr.Name, pod.Name)
		}
		total += q.MilliValue()
		if container != "" {
			// Container names are unique within a pod.
			return total, nil
		}
	}
	if container != "" {
		return 0, fmt.Errorf("container %s not found in Pod %s", container, pod.Name)
	}
	return total, nil
}

// statusRequest is a container's request of resource as its status reports
// it, if it does.
func statusRequest(pod *corev1.Pod, name string, init bool, res corev1.ResourceName) (resource.Quantity, bool) {
	statuses := pod.Status.ContainerStatuses
	if init {
		statuses = pod.Status.InitContainerStatuses
	}
	for i := range statuses {
		if st := &statuses[i]; st.Name == name && st.Resources != nil {
			q, ok := st.Resources.Requests[res]
			return q, ok
		}
	}
	return resource.Quantity{}, false
}
