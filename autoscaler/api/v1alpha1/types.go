package v1alpha1

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API's group and version.
var GroupVersion = schema.GroupVersion{Group: "autoscaling.metricscale.dev", Version: "v1alpha1"}

// Resource is the plural resource name.
const Resource = "metricautoscalers"

// GroupVersionResource names MetricAutoscalers for dynamic clients.
var GroupVersionResource = GroupVersion.WithResource(Resource)

// MetricAutoscaler scales a workload through its /scale subresource on the
// metrics APIs, with the decisions of the Kubernetes HPA controller.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mas,categories=all
// +kubebuilder:printcolumn:name="Reference",type=string,JSONPath=`.status.reference`
// +kubebuilder:printcolumn:name="Targets",type=string,JSONPath=`.status.targets`
// +kubebuilder:printcolumn:name="MinPods",type=integer,JSONPath=`.spec.minReplicas`
// +kubebuilder:printcolumn:name="MaxPods",type=integer,JSONPath=`.spec.maxReplicas`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.status.currentReplicas`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Active",type=boolean,JSONPath=`.status.scaleToZero.active`,priority=1
// +kubebuilder:printcolumn:name="Fallback",type=boolean,JSONPath=`.status.fallback.active`,priority=1
type MetricAutoscaler struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MetricAutoscalerSpec   `json:"spec"`
	Status MetricAutoscalerStatus `json:"status,omitempty"`
}

// MetricAutoscalerSpec is an autoscaling/v2 HorizontalPodAutoscalerSpec,
// field for field, plus what the controller adds.
//
// The schema of the embedded upstream types, which take no markers, gets
// the API server's HPA validation from crdpatch (make generate).
//
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || self.minReplicas <= self.maxReplicas",message="must be greater than or equal to minReplicas",fieldPath=".maxReplicas"
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || self.minReplicas > 0 || (has(self.metrics) && self.metrics.exists(m, m.type == 'Object' || m.type == 'External'))",message="minReplicas 0 needs at least one Object or External metric",fieldPath=".metrics"
// +kubebuilder:validation:XValidation:rule="!has(self.scaleToZero) || (has(self.minReplicas) && self.minReplicas == 0)",message="scaleToZero needs minReplicas 0",fieldPath=".scaleToZero"
// +kubebuilder:validation:XValidation:rule="!has(self.scaleToZero) || !has(self.scaleToZero.activation) || self.scaleToZero.activation.all(a, has(self.metrics) && self.metrics.exists(m, (has(m.external) && m.external.metric.name == a.metric) || (has(m.object) && m.object.metric.name == a.metric) || (has(m.pods) && m.pods.metric.name == a.metric) || (has(m.resource) && m.resource.name == a.metric) || (has(m.containerResource) && m.containerResource.name == a.metric)))",message="each activation must name a metric of spec.metrics (metric.name, or the resource name of a Resource or ContainerResource metric)",fieldPath=".scaleToZero.activation"
// +kubebuilder:validation:XValidation:rule="!has(self.schedules) || self.schedules.all(s, s.minReplicas <= self.maxReplicas)",message="each schedule's minReplicas must be less than or equal to maxReplicas",fieldPath=".schedules"
// +kubebuilder:validation:XValidation:rule="!has(self.formula) || !has(self.formula.inputs) || self.formula.inputs.all(i, has(self.metrics) && i.metric >= 0 && i.metric < size(self.metrics) && (self.metrics[i.metric].type == 'External' || self.metrics[i.metric].type == 'Object'))",message="each input of the formula must be the index of an External or Object metric of spec.metrics",fieldPath=".formula.inputs"
type MetricAutoscalerSpec struct {
	// ScaleTargetRef points to the target resource to scale.
	ScaleTargetRef autoscalingv2.CrossVersionObjectReference `json:"scaleTargetRef"`
	// MinReplicas is the lower limit; 0 is allowed when at least one
	// Object or External metric is set (scale to zero).
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +optional
	MinReplicas *int32 `json:"minReplicas,omitempty"`
	// MaxReplicas is the upper limit.
	// +kubebuilder:validation:Minimum=1
	MaxReplicas int32 `json:"maxReplicas"`
	// Metrics are the specifications to compute the desired count from;
	// the largest proposal wins. Empty means cpu at 80% utilization.
	// At most 1000 (an HPA has no bound): the CEL rule that checks the
	// activation names against them must fit the API server's cost budget.
	// +kubebuilder:validation:MaxItems=1000
	// +listType=atomic
	// +optional
	Metrics []autoscalingv2.MetricSpec `json:"metrics,omitempty"`
	// Behavior configures scaling in both directions, as in an HPA.
	// +optional
	Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`

	// SyncPeriod is how often this autoscaler is reconciled.
	// +kubebuilder:default="15s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s')",message="syncPeriod must be at least 1s"
	// +optional
	SyncPeriod *metav1.Duration `json:"syncPeriod,omitempty"`
	// Paused stops reconciling: nothing is written, status included.
	// +optional
	Paused bool `json:"paused,omitempty"`
	// DryRun computes and reports decisions in status and events but
	// never writes the target's scale.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`

	// Fallback is the size to go to when metrics cannot be read; unset,
	// a failing metric keeps the size as an HPA does.
	// +optional
	Fallback *Fallback `json:"fallback,omitempty"`
	// ScaleToZero gates 0 -> 1 and 1 -> 0 on activation thresholds and a
	// cooldown; it needs minReplicas 0. Unset, minReplicas 0 scales to and
	// from zero as the HPAScaleToZero gate does.
	// +optional
	ScaleToZero *ScaleToZero `json:"scaleToZero,omitempty"`
	// Schedules raise the floor in time windows, ahead of known load: while
	// a window is in force the minimum is the largest of minReplicas and
	// the windows' minReplicas (never above maxReplicas). Not an HPA field.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.exists_one(b, b.name == a.name))",message="each schedule must have a name of its own"
	// +listType=map
	// +listMapKey=name
	// +optional
	Schedules []Schedule `json:"schedules,omitempty"`
	// Formula combines metrics of spec.metrics into one, computed by a CEL
	// expression, as KEDA's scalingModifiers do: the metrics it takes as
	// inputs propose no count of their own, the formula proposes one with
	// its target, and the largest proposal wins among it and the metrics it
	// does not take. Not an HPA field.
	// +optional
	Formula *Formula `json:"formula,omitempty"`
}

// Formula is a composite metric: Expression, a CEL expression over the
// values of Inputs, read as an External metric of one series whose value is
// the expression's. An input's value is the metric's value as read: the
// summed series of an External metric, the object's value of an Object
// metric. An input that cannot be read, or a result that is not a finite
// number at or above zero, fails the formula as a failed metric fails: no
// scale-down on it, and spec.fallback counts it.
//
// +kubebuilder:validation:XValidation:rule="!has(self.target) || (self.target.type == 'Value' ? has(self.target.value) && !has(self.target.averageValue) : self.target.type == 'AverageValue' && has(self.target.averageValue) && !has(self.target.value))",message="target must be of type Value with value set, or AverageValue with averageValue set",fieldPath=".target"
type Formula struct {
	// Name names the composite metric in status.currentMetrics, conditions,
	// events and explanations.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// Inputs bind names the expression uses to metrics of spec.metrics.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.exists_one(b, b.name == a.name))",message="each input must have a name of its own"
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.exists_one(b, b.metric == a.metric))",message="each metric may be an input once"
	// +listType=atomic
	Inputs []FormulaInput `json:"inputs"`
	// Expression is a CEL expression of the inputs' names, each a double,
	// whose result is a number: `orders + 2 * payments`,
	// `math.greatest(orders, payments)`, `orders > 100 ? orders : 0`.
	// Integer literals are read as doubles. It is compiled, type-checked and
	// its cost bounded at admission and by the controller.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Expression string `json:"expression"`
	// Target is the composite's target, as an External metric's: Value
	// (scale on the value against the current count) or AverageValue (the
	// value per pod).
	Target autoscalingv2.MetricTarget `json:"target"`
}

// FormulaInput binds a name of the expression to a metric of spec.metrics.
type FormulaInput struct {
	// Name is the CEL variable: a letter or '_', then letters, digits, '_'.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]*$`
	Name string `json:"name"`
	// Metric is the index in spec.metrics of an External or Object metric.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=999
	Metric int32 `json:"metric"`
}

// Schedule is a recurring time window that raises the floor: from each time
// Start fires (in TimeZone) until End next fires, or for Duration. With
// RampSeconds the floor rises linearly from spec.minReplicas over the
// RampSeconds before the window starts, so that MinReplicas is in force at
// Start, and falls linearly over the RampSeconds after it ends (each step
// rounded up).
//
// +kubebuilder:validation:XValidation:rule="has(self.end) != has(self.duration)",message="exactly one of end and duration must be set"
type Schedule struct {
	// Name identifies the window in conditions, events and explanations.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// Start is a cron expression of 5 fields (minute hour day-of-month
	// month day-of-week, as crontab(5)): when each window starts.
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^\S+( +\S+){4}$`
	Start string `json:"start"`
	// End is a cron expression of 5 fields: a window ends the first time
	// End fires at or after its start (a window whose End fires at its
	// start is empty). Exactly one of end and duration.
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^\S+( +\S+){4}$`
	// +optional
	End string `json:"end,omitempty"`
	// Duration is how long each window lasts from its start.
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="duration must be positive"
	// +optional
	Duration *metav1.Duration `json:"duration,omitempty"`
	// TimeZone is the IANA time zone Start and End are read in, such as
	// Europe/Paris; empty means UTC.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z][-A-Za-z0-9_+]*(/[-A-Za-z0-9_+]+)*$`
	// +optional
	TimeZone string `json:"timeZone,omitempty"`
	// MinReplicas is the floor while the window is in force.
	// +kubebuilder:validation:Minimum=1
	MinReplicas int32 `json:"minReplicas"`
	// RampSeconds is how long the floor takes to rise before the window
	// and to fall after it; 0 switches it at the window's edges.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	// +optional
	RampSeconds int32 `json:"rampSeconds,omitempty"`
}

// FallbackBehavior says how the fallback size is chosen.
// +kubebuilder:validation:Enum=static;currentReplicas;currentReplicasIfHigher;currentReplicasIfLower
type FallbackBehavior string

// The fallback behaviors, as KEDA's.
const (
	// FallbackStatic goes to Fallback.Replicas.
	FallbackStatic FallbackBehavior = "static"
	// FallbackCurrentReplicas keeps the current size.
	FallbackCurrentReplicas FallbackBehavior = "currentReplicas"
	// FallbackCurrentReplicasIfHigher goes to the larger of the current
	// size and Fallback.Replicas.
	FallbackCurrentReplicasIfHigher FallbackBehavior = "currentReplicasIfHigher"
	// FallbackCurrentReplicasIfLower goes to the smaller of the current
	// size and Fallback.Replicas.
	FallbackCurrentReplicasIfLower FallbackBehavior = "currentReplicasIfLower"
)

// Fallback configures scaling while metrics fail.
type Fallback struct {
	// FailureThreshold is the number of consecutive reconciles in which a
	// metric could not be read before fallback starts.
	// +kubebuilder:validation:Minimum=1
	FailureThreshold int32 `json:"failureThreshold"`
	// Replicas is the fallback size.
	// +kubebuilder:validation:Minimum=0
	Replicas int32 `json:"replicas"`
	// Behavior chooses between Replicas and the current size.
	// +kubebuilder:default=static
	// +optional
	Behavior FallbackBehavior `json:"behavior,omitempty"`
}

// ScaleToZero configures activation and cooldown around zero replicas.
type ScaleToZero struct {
	// CooldownPeriod is how long every metric must stay at or below its
	// activation value before the target goes to zero.
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="cooldownPeriod must not be negative"
	// +optional
	CooldownPeriod *metav1.Duration `json:"cooldownPeriod,omitempty"`
	// Activation holds per-metric activation values. An Object or External
	// metric without one activates above zero; a Pods, Resource or
	// ContainerResource metric without one takes no part in activation.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.exists_one(b, b.metric == a.metric))",message="each metric may have one activation value only"
	// +listType=atomic
	// +optional
	Activation []MetricActivation `json:"activation,omitempty"`
}

// MetricActivation is the value above which a metric activates the target.
type MetricActivation struct {
	// Metric is the name of spec metrics it applies to: metric.name for
	// Object, External and Pods metrics, the resource name for Resource and
	// ContainerResource ones. It applies to every metric of that name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Metric string `json:"metric"`
	// Value is the activation threshold, compared with the metric's value
	// as read: the summed series of an External metric and the object's
	// value of an Object metric, whatever the target type (not the average
	// per pod, undefined at zero pods); the average per pod of a Pods
	// metric; the utilization in percent of a Resource or ContainerResource
	// Utilization target, the average per pod of an AverageValue one.
	Value resource.Quantity `json:"value"`
}

// MetricAutoscalerStatus is an autoscaling/v2 HorizontalPodAutoscalerStatus
// plus each metric's proposal and the history the decisions rest on.
type MetricAutoscalerStatus struct {
	// ObservedGeneration is the spec generation last reconciled.
	// +optional
	ObservedGeneration *int64 `json:"observedGeneration,omitempty"`
	// LastScaleTime is when the target was last rescaled.
	// +optional
	LastScaleTime *metav1.Time `json:"lastScaleTime,omitempty"`
	// CurrentReplicas is the target's size when last seen.
	// +optional
	CurrentReplicas int32 `json:"currentReplicas,omitempty"`
	// DesiredReplicas is the size last computed.
	DesiredReplicas int32 `json:"desiredReplicas"`
	// CurrentMetrics are the metrics' values when last read.
	// +listType=atomic
	// +optional
	CurrentMetrics []autoscalingv2.MetricStatus `json:"currentMetrics,omitempty"`
	// Conditions are AbleToScale, ScalingActive, ScalingLimited and
	// ScaledToZero, as an HPA's.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []autoscalingv2.HorizontalPodAutoscalerCondition `json:"conditions,omitempty"`

	// Reference is the target as Kind/Name, for printing.
	// +optional
	Reference string `json:"reference,omitempty"`
	// Targets renders current/target per metric, as `kubectl get hpa`.
	// +optional
	Targets string `json:"targets,omitempty"`
	// MetricProposals has, per spec metric, the replica count it proposed
	// (-1 when it could not be computed).
	// +listType=atomic
	// +optional
	MetricProposals []int32 `json:"metricProposals,omitempty"`
	// History is what stabilization and policies remember, kept here so
	// that a restarted controller decides as if it never stopped.
	// +optional
	History *History `json:"history,omitempty"`
	// Fallback counts failed reads per metric and says whether the
	// fallback size is in force; kept here to survive restarts.
	// +optional
	Fallback *FallbackStatus `json:"fallback,omitempty"`
	// ScaleToZero is the activation state.
	// +optional
	ScaleToZero *ScaleToZeroStatus `json:"scaleToZero,omitempty"`
}

// FallbackStatus is the fallback state.
type FallbackStatus struct {
	// Active is true while the fallback size is in force.
	Active bool `json:"active"`
	// Since is when fallback last started.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
	// Metrics lists the spec metrics that failed in the last reconciles.
	// +listType=atomic
	// +optional
	Metrics []MetricFailure `json:"metrics,omitempty"`
}

// MetricFailure is one spec metric's run of failed reads.
type MetricFailure struct {
	// Index is the metric's position in spec.metrics.
	Index int32 `json:"index"`
	// Name is the metric's name, for reading.
	// +optional
	Name string `json:"name,omitempty"`
	// Failures is the number of consecutive reconciles it failed in.
	Failures int32 `json:"failures"`
	// Since is when its first failure of this run was seen.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
	// LastError is the last read's error.
	// +optional
	LastError string `json:"lastError,omitempty"`
}

// ScaleToZeroStatus is the activation state.
type ScaleToZeroStatus struct {
	// Active is true when some metric was above its activation value at
	// the last read; a read that fails keeps the previous state.
	Active bool `json:"active"`
	// LastActiveTime is when a metric was last seen above its activation
	// value (or the target first seen running, when no metric was yet);
	// the cooldown counts from it.
	// +optional
	LastActiveTime *metav1.Time `json:"lastActiveTime,omitempty"`
}

// History is the bounded memory of an autoscaler: recommendations within
// the longest stabilization window (the newest of each size: an older one
// of the same size changes no stabilization) and scale events within the
// longest policy period.
type History struct {
	// +listType=atomic
	// +optional
	Recommendations []Recommendation `json:"recommendations,omitempty"`
	// +listType=atomic
	// +optional
	ScaleUpEvents []ScaleEvent `json:"scaleUpEvents,omitempty"`
	// +listType=atomic
	// +optional
	ScaleDownEvents []ScaleEvent `json:"scaleDownEvents,omitempty"`
}

// Recommendation is a past unstabilized proposal.
type Recommendation struct {
	Replicas int32 `json:"replicas"`
	// Time is when it was made, to the microsecond.
	Time metav1.MicroTime `json:"time"`
}

// ScaleEvent is a past rescale by Change replicas.
type ScaleEvent struct {
	Change int32            `json:"change"`
	Time   metav1.MicroTime `json:"time"`
	// +optional
	Outdated bool `json:"outdated,omitempty"`
}

// MetricAutoscalerList is a list of MetricAutoscalers.
//
// +kubebuilder:object:root=true
type MetricAutoscalerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MetricAutoscaler `json:"items"`
}

// AddToScheme registers the types.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &MetricAutoscaler{}, &MetricAutoscalerList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
