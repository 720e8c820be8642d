package convert

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/defaults"
	"github.com/metricscale/metricscale/autoscaler/validation"
)

// The annotations in which the API server keeps, on an autoscaling/v1 HPA,
// what only autoscaling/v2 can say (kubernetes pkg/apis/autoscaling).
const (
	annotationV1Metrics    = "autoscaling.alpha.kubernetes.io/metrics"
	annotationV1Conditions = "autoscaling.alpha.kubernetes.io/conditions"
	annotationV1Behavior   = "autoscaling.alpha.kubernetes.io/behavior"
	annotationLastApplied  = "kubectl.kubernetes.io/last-applied-configuration"
)

// Annotations and labels convert puts on the MetricAutoscalers it writes.
const (
	// AnnotationFrom names the source object: "HorizontalPodAutoscaler/web".
	AnnotationFrom = "convert.metricscale.dev/from"
	// AnnotationFromUID is the source HPA's UID: a handover resumes only
	// for the HPA it began with.
	AnnotationFromUID = "convert.metricscale.dev/from-uid"
	// LabelHandover is "pending" from the MetricAutoscaler's creation until
	// the HPA is gone and it is unpaused, then "done".
	LabelHandover = "convert.metricscale.dev/handover"
)

// DecodeHPA reads a HorizontalPodAutoscaler of any served or past version
// as autoscaling/v2. autoscaling/v1 is converted as the API server does:
// targetCPUUtilizationPercentage becomes a cpu Utilization metric, and the
// v2-only parts come back from the annotations it keeps them in.
func DecodeHPA(o Object) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	if o.Kind != "HorizontalPodAutoscaler" {
		return nil, fmt.Errorf("%s: kind %q is not HorizontalPodAutoscaler", o.Where, o.Kind)
	}
	switch o.APIVersion {
	case "autoscaling/v2", "autoscaling/v2beta2", "autoscaling/v1", "autoscaling/v2beta1":
	default:
		return nil, fmt.Errorf("%s: apiVersion %q: want autoscaling/v1, autoscaling/v2, autoscaling/v2beta2 or autoscaling/v2beta1", o.Where, o.APIVersion)
	}
	hpa, err := decodeHPAVersion(o.APIVersion, o.JSON)
	if err != nil {
		// A status that does not parse (a documentation example's
		// "lastScaleTime: <some-time>") is dropped: convert writes no status.
		// The spec's error, if any, is the one to report.
		if stripped, ok := withoutStatus(o.JSON); ok {
			hpa, err = decodeHPAVersion(o.APIVersion, stripped)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", o.Where, o.Describe(), err)
	}
	hpa.APIVersion, hpa.Kind = "autoscaling/v2", "HorizontalPodAutoscaler"
	if hpa.Name == "" {
		return nil, fmt.Errorf("%s: metadata.name: required", o.Where)
	}
	return hpa, nil
}

// withoutStatus is an object's JSON without its status; false when it has
// none.
func withoutStatus(data []byte) ([]byte, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return nil, false
	}
	if _, ok := m["status"]; !ok {
		return nil, false
	}
	delete(m, "status")
	out, err := json.Marshal(m)
	return out, err == nil
}

func decodeHPAVersion(apiVersion string, data []byte) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	var hpa *autoscalingv2.HorizontalPodAutoscaler
	var err error
	switch apiVersion {
	case "autoscaling/v2", "autoscaling/v2beta2":
		// v2beta2 and v2 have the same fields
		hpa = &autoscalingv2.HorizontalPodAutoscaler{}
		err = decodeStrict(data, hpa)
	case "autoscaling/v1":
		hpa, err = decodeV1(data)
	case "autoscaling/v2beta1":
		hpa, err = decodeV2beta1(data)
	default: // DecodeHPA checked it
		return nil, fmt.Errorf("apiVersion %q", apiVersion)
	}
	return hpa, err
}

// HPAObjects are the HorizontalPodAutoscalers of objs (a helm template or
// kubectl --dry-run output holds other kinds too); notes name the others,
// skipped.
func HPAObjects(objs []Object) (hpas []Object, notes []string) {
	for _, o := range objs {
		if o.Kind == "HorizontalPodAutoscaler" {
			hpas = append(hpas, o)
			continue
		}
		notes = append(notes, fmt.Sprintf("%s: %s: skipped: not a HorizontalPodAutoscaler", o.Where, o.Describe()))
	}
	return hpas, notes
}

// Labels and annotations that say a tool owns an object and will put it
// back as it was: Helm (helm.sh/docs, "Labels and Annotations"; and the
// annotations Helm 3 adopts objects by), Argo CD, Flux.
var owners = []struct {
	label, annotation, value string // value: "" for any
	tool, what               string
}{
	{label: "app.kubernetes.io/managed-by", value: "Helm", tool: "Helm", what: "the next helm upgrade recreates the HPA: remove it from the chart (or turn it off in the release's values) first"},
	{annotation: "meta.helm.sh/release-name", tool: "Helm", what: "the next helm upgrade recreates the HPA: remove it from the chart (or turn it off in the release's values) first"},
	{label: "argocd.argoproj.io/instance", tool: "Argo CD", what: "Argo CD recreates the HPA at its next sync: remove it from the application's source first"},
	{annotation: "argocd.argoproj.io/tracking-id", tool: "Argo CD", what: "Argo CD recreates the HPA at its next sync: remove it from the application's source first"},
	{label: "kustomize.toolkit.fluxcd.io/name", tool: "Flux", what: "Flux recreates the HPA at its next reconciliation: remove it from the Kustomization's source first"},
	{label: "helm.toolkit.fluxcd.io/name", tool: "Flux", what: "Flux's HelmRelease recreates the HPA at its next reconciliation: remove it from the chart first"},
}

// OwnerWarnings say which tool manages hpa and will recreate it after a
// conversion deleted it; one per tool.
func OwnerWarnings(hpa *autoscalingv2.HorizontalPodAutoscaler) []string {
	var out []string
	seen := map[string]bool{}
	for _, o := range owners {
		var v string
		var ok bool
		key := o.label
		if key != "" {
			v, ok = hpa.Labels[key]
		} else {
			key = o.annotation
			v, ok = hpa.Annotations[key]
		}
		if !ok || (o.value != "" && v != o.value) || seen[o.tool] {
			continue
		}
		seen[o.tool] = true
		name := hpa.Name
		if hpa.Namespace != "" {
			name = hpa.Namespace + "/" + name
		}
		out = append(out, fmt.Sprintf("HorizontalPodAutoscaler %s is managed by %s (%s: %s): %s, or the HPA and the MetricAutoscaler will both scale %s %s", name, o.tool, key, v, o.what, hpa.Spec.ScaleTargetRef.Kind, hpa.Spec.ScaleTargetRef.Name))
	}
	return out
}

// fromV1Bounds is a v2 HPA with the target and bounds of a v1 or v2beta1
// one, which have the same fields.
func fromV1Bounds(meta metav1.ObjectMeta, ref autoscalingv1.CrossVersionObjectReference, minR *int32, maxR int32) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: meta, Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference(ref),
		MinReplicas:    minR,
		MaxReplicas:    maxR,
	}}
}

func decodeV1(data []byte) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	var in autoscalingv1.HorizontalPodAutoscaler
	if err := decodeStrict(data, &in); err != nil {
		return nil, err
	}
	out := fromV1Bounds(in.ObjectMeta, in.Spec.ScaleTargetRef, in.Spec.MinReplicas, in.Spec.MaxReplicas)
	out.Status = autoscalingv2.HorizontalPodAutoscalerStatus{
		ObservedGeneration: in.Status.ObservedGeneration,
		LastScaleTime:      in.Status.LastScaleTime,
		CurrentReplicas:    in.Status.CurrentReplicas,
		DesiredReplicas:    in.Status.DesiredReplicas,
	}
	// The annotation holds the metrics other than the cpu utilization one,
	// which comes last (the API server's order).
	if enc, ok := in.Annotations[annotationV1Metrics]; ok {
		var others []autoscalingv1.MetricSpec
		if err := json.Unmarshal([]byte(enc), &others); err != nil {
			return nil, fmt.Errorf("metadata.annotations[%s]: %w", annotationV1Metrics, err)
		}
		for i, m := range others {
			v2, err := metricFromV1(m)
			if err != nil {
				return nil, fmt.Errorf("metadata.annotations[%s][%d]: %w", annotationV1Metrics, i, err)
			}
			out.Spec.Metrics = append(out.Spec.Metrics, v2)
		}
	}
	if p := in.Spec.TargetCPUUtilizationPercentage; p != nil {
		out.Spec.Metrics = append(out.Spec.Metrics, cpuUtilization(*p))
	}
	if len(out.Spec.Metrics) == 0 {
		// autoscaling/v1's implicit default, made explicit as in v2
		out.Spec.Metrics = []autoscalingv2.MetricSpec{cpuUtilization(defaults.DefaultCPUUtilization)}
	}
	if enc, ok := in.Annotations[annotationV1Behavior]; ok {
		// The internal type's field names ("ScaleUp"): encoding/json matches
		// them case-insensitively.
		var b autoscalingv2.HorizontalPodAutoscalerBehavior
		if err := json.Unmarshal([]byte(enc), &b); err != nil {
			return nil, fmt.Errorf("metadata.annotations[%s]: %w", annotationV1Behavior, err)
		}
		out.Spec.Behavior = &b
	}
	if enc, ok := in.Annotations[annotationV1Conditions]; ok {
		var conds []autoscalingv1.HorizontalPodAutoscalerCondition
		if err := json.Unmarshal([]byte(enc), &conds); err != nil {
			return nil, fmt.Errorf("metadata.annotations[%s]: %w", annotationV1Conditions, err)
		}
		for _, c := range conds {
			out.Status.Conditions = append(out.Status.Conditions, autoscalingv2.HorizontalPodAutoscalerCondition{
				Type: autoscalingv2.HorizontalPodAutoscalerConditionType(c.Type), Status: c.Status,
				LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message,
			})
		}
	}
	return out, nil
}

// hpaV2beta1 is an autoscaling/v2beta1 HPA (no longer in k8s.io/api); its
// metrics have the fields of autoscaling/v1's MetricSpec.
type hpaV2beta1 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		ScaleTargetRef autoscalingv1.CrossVersionObjectReference `json:"scaleTargetRef"`
		MinReplicas    *int32                                    `json:"minReplicas,omitempty"`
		MaxReplicas    int32                                     `json:"maxReplicas"`
		Metrics        []autoscalingv1.MetricSpec                `json:"metrics,omitempty"`
	} `json:"spec"`
	Status struct {
		ObservedGeneration *int64                                           `json:"observedGeneration,omitempty"`
		LastScaleTime      *metav1.Time                                     `json:"lastScaleTime,omitempty"`
		CurrentReplicas    int32                                            `json:"currentReplicas"`
		DesiredReplicas    int32                                            `json:"desiredReplicas"`
		CurrentMetrics     []json.RawMessage                                `json:"currentMetrics"`
		Conditions         []autoscalingv1.HorizontalPodAutoscalerCondition `json:"conditions,omitempty"`
	} `json:"status"`
}

func decodeV2beta1(data []byte) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	var in hpaV2beta1
	if err := decodeStrict(data, &in); err != nil {
		return nil, err
	}
	out := fromV1Bounds(in.ObjectMeta, in.Spec.ScaleTargetRef, in.Spec.MinReplicas, in.Spec.MaxReplicas)
	for i, m := range in.Spec.Metrics {
		v2, err := metricFromV1(m)
		if err != nil {
			return nil, fmt.Errorf("spec.metrics[%d]: %w", i, err)
		}
		out.Spec.Metrics = append(out.Spec.Metrics, v2)
	}
	out.Status = autoscalingv2.HorizontalPodAutoscalerStatus{
		ObservedGeneration: in.Status.ObservedGeneration,
		LastScaleTime:      in.Status.LastScaleTime,
		CurrentReplicas:    in.Status.CurrentReplicas,
		DesiredReplicas:    in.Status.DesiredReplicas,
	}
	for _, c := range in.Status.Conditions {
		out.Status.Conditions = append(out.Status.Conditions, autoscalingv2.HorizontalPodAutoscalerCondition{
			Type: autoscalingv2.HorizontalPodAutoscalerConditionType(c.Type), Status: c.Status,
			LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message,
		})
	}
	return out, nil
}

func cpuUtilization(percent int32) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{
		Type: autoscalingv2.ResourceMetricSourceType,
		Resource: &autoscalingv2.ResourceMetricSource{
			Name:   corev1.ResourceCPU,
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &percent},
		},
	}
}

// metricFromV1 converts an autoscaling/v1 (v2beta1-shaped) metric as the
// API server's conversion does: the target type follows from which target
// field is set.
func metricFromV1(m autoscalingv1.MetricSpec) (autoscalingv2.MetricSpec, error) {
	out := autoscalingv2.MetricSpec{Type: autoscalingv2.MetricSourceType(m.Type)}
	switch m.Type {
	case autoscalingv1.ObjectMetricSourceType:
		if m.Object == nil {
			return out, fmt.Errorf("object: required for type Object")
		}
		t := autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: &m.Object.TargetValue}
		if m.Object.AverageValue != nil {
			t = autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: m.Object.AverageValue}
		}
		out.Object = &autoscalingv2.ObjectMetricSource{
			DescribedObject: autoscalingv2.CrossVersionObjectReference(m.Object.Target),
			Metric:          autoscalingv2.MetricIdentifier{Name: m.Object.MetricName, Selector: m.Object.Selector},
			Target:          t,
		}
	case autoscalingv1.PodsMetricSourceType:
		if m.Pods == nil {
			return out, fmt.Errorf("pods: required for type Pods")
		}
		avg := m.Pods.TargetAverageValue
		out.Pods = &autoscalingv2.PodsMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: m.Pods.MetricName, Selector: m.Pods.Selector},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &avg},
		}
	case autoscalingv1.ResourceMetricSourceType:
		if m.Resource == nil {
			return out, fmt.Errorf("resource: required for type Resource")
		}
		out.Resource = &autoscalingv2.ResourceMetricSource{Name: m.Resource.Name, Target: resourceTarget(m.Resource.TargetAverageUtilization, m.Resource)}
	case autoscalingv1.ContainerResourceMetricSourceType:
		if m.ContainerResource == nil {
			return out, fmt.Errorf("containerResource: required for type ContainerResource")
		}
		cr := m.ContainerResource
		t := autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: cr.TargetAverageValue}
		if cr.TargetAverageUtilization != nil {
			t = autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: cr.TargetAverageUtilization}
		}
		out.ContainerResource = &autoscalingv2.ContainerResourceMetricSource{Name: cr.Name, Container: cr.Container, Target: t}
	case autoscalingv1.ExternalMetricSourceType:
		if m.External == nil {
			return out, fmt.Errorf("external: required for type External")
		}
		t := autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: m.External.TargetAverageValue}
		if m.External.TargetValue != nil {
			t = autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: m.External.TargetValue}
		}
		out.External = &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: m.External.MetricName, Selector: m.External.MetricSelector},
			Target: t,
		}
	default:
		return out, fmt.Errorf("type: unknown %q", m.Type)
	}
	return out, nil
}

func resourceTarget(utilization *int32, r *autoscalingv1.ResourceMetricSource) autoscalingv2.MetricTarget {
	if utilization != nil {
		return autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: utilization}
	}
	return autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: r.TargetAverageValue}
}

// HPAOptions are what a conversion adds to the HPA's spec.
type HPAOptions struct {
	// SyncPeriod, if set, is the MetricAutoscaler's syncPeriod (unset: the
	// CRD's default, 15s, kube-controller-manager's default HPA period).
	SyncPeriod *metav1.Duration
}

// FromHPA is the MetricAutoscaler taking hpa's place: same name, namespace,
// labels, annotations (less the API server's v1 ones and kubectl's last
// applied configuration) and spec. Its status is not set here: see
// StartingStatus. A spec the API server would refuse is an error naming
// the field.
func FromHPA(hpa *autoscalingv2.HorizontalPodAutoscaler, opts HPAOptions) (*v1alpha1.MetricAutoscaler, error) {
	spec := hpa.Spec.DeepCopy()
	checked := spec.DeepCopy()
	defaults.Spec(checked)
	// MetricAutoscalers always allow minReplicas 0 with an Object or External
	// metric (the CRD's rule), whatever the HPAScaleToZero gate of the cluster.
	if errs := validation.Spec(checked, field.NewPath("spec"), validation.Options{ScaleToZero: true}); len(errs) > 0 {
		return nil, fmt.Errorf("HorizontalPodAutoscaler %s/%s: %s", hpa.Namespace, hpa.Name, describeErrs(errs))
	}
	ma := &v1alpha1.MetricAutoscaler{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "MetricAutoscaler"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        hpa.Name,
			Namespace:   hpa.Namespace,
			Labels:      maps.Clone(hpa.Labels),
			Annotations: map[string]string{},
		},
		Spec: v1alpha1.MetricAutoscalerSpec{
			ScaleTargetRef: spec.ScaleTargetRef,
			MinReplicas:    spec.MinReplicas,
			MaxReplicas:    spec.MaxReplicas,
			Metrics:        spec.Metrics,
			Behavior:       spec.Behavior,
			SyncPeriod:     opts.SyncPeriod,
		},
	}
	for k, v := range hpa.Annotations {
		if !strings.HasPrefix(k, "autoscaling.alpha.kubernetes.io/") && k != annotationLastApplied {
			ma.Annotations[k] = v
		}
	}
	ma.Annotations[AnnotationFrom] = "HorizontalPodAutoscaler/" + hpa.Name
	return ma, nil
}

func hasObjectOrExternal(ms []autoscalingv2.MetricSpec) bool {
	for _, m := range ms {
		if m.Type == autoscalingv2.ObjectMetricSourceType || m.Type == autoscalingv2.ExternalMetricSourceType {
			return true
		}
	}
	return false
}

func describeErrs(errs field.ErrorList) string {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = validation.Describe(e)
	}
	return strings.Join(msgs, "; ")
}
