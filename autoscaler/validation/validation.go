// Package validation checks an autoscaling/v2 HorizontalPodAutoscaler spec
// as the API server does (kubernetes pkg/apis/autoscaling/validation,
// v1.37; v1.36's rules are the same, the HPAScaleToZero gate in Options
// aside) once defaulting has run, so that the simulator refuses what a
// cluster would refuse. The MetricAutoscaler CRD's schema and CEL rules
// (autoscaler/api/v1alpha1) reject the same specs; one table of invalid
// specs (validationtest/invalid-specs.yaml) tests both.
package validation

import (
	"fmt"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	pathvalidation "k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The API server's bounds on behavior.
const (
	MaxPeriodSeconds              = 1800
	MaxStabilizationWindowSeconds = 3600
)

// Options are what validation depends on besides the spec.
type Options struct {
	// ScaleToZero (feature gate HPAScaleToZero) allows minReplicas 0.
	ScaleToZero bool
}

// Spec validates a defaulted spec; errors are located under path.
func Spec(spec *autoscalingv2.HorizontalPodAutoscalerSpec, path *field.Path, opts Options) field.ErrorList {
	var errs field.ErrorList
	lower := int32(1)
	if opts.ScaleToZero {
		lower = 0
	}
	if spec.MinReplicas != nil && *spec.MinReplicas < lower {
		errs = append(errs, field.Invalid(path.Child("minReplicas"), *spec.MinReplicas, fmt.Sprintf("must be greater than or equal to %d", lower)))
	}
	if spec.MaxReplicas < 1 {
		errs = append(errs, field.Invalid(path.Child("maxReplicas"), spec.MaxReplicas, "must be greater than 0"))
	}
	if spec.MinReplicas != nil && spec.MaxReplicas < *spec.MinReplicas {
		errs = append(errs, field.Invalid(path.Child("maxReplicas"), spec.MaxReplicas, "must be greater than or equal to `minReplicas`"))
	}
	errs = append(errs, objectReference(spec.ScaleTargetRef, path.Child("scaleTargetRef"))...)
	errs = append(errs, metrics(spec.Metrics, path.Child("metrics"), spec.MinReplicas)...)
	if b := spec.Behavior; b != nil {
		errs = append(errs, scalingRules(b.ScaleUp, path.Child("behavior", "scaleUp"))...)
		errs = append(errs, scalingRules(b.ScaleDown, path.Child("behavior", "scaleDown"))...)
	}
	return errs
}

// Describe renders an error as "path: what is wrong", without the value
// dump of field.Error.Error().
func Describe(e *field.Error) string {
	switch e.Type {
	case field.ErrorTypeRequired:
		if e.Detail == "" {
			return e.Field + ": required"
		}
		return e.Field + ": required: " + e.Detail
	case field.ErrorTypeNotSupported:
		return fmt.Sprintf("%s: unsupported value %v: %s", e.Field, e.BadValue, e.Detail)
	case field.ErrorTypeInvalid:
		return fmt.Sprintf("%s: %s, got %v", e.Field, e.Detail, e.BadValue)
	}
	return e.Field + ": " + e.Detail
}

func objectReference(ref autoscalingv2.CrossVersionObjectReference, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, pathSegment(ref.Kind, path.Child("kind"))...)
	errs = append(errs, pathSegment(ref.Name, path.Child("name"))...)
	return errs
}

func pathSegment(s string, path *field.Path) field.ErrorList {
	if s == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	var errs field.ErrorList
	for _, msg := range pathvalidation.IsValidPathSegmentName(s) {
		errs = append(errs, field.Invalid(path, s, msg))
	}
	return errs
}

var sourceTypes = []string{
	string(autoscalingv2.ContainerResourceMetricSourceType), string(autoscalingv2.ExternalMetricSourceType),
	string(autoscalingv2.ObjectMetricSourceType), string(autoscalingv2.PodsMetricSourceType),
	string(autoscalingv2.ResourceMetricSourceType),
}

func metrics(specs []autoscalingv2.MetricSpec, path *field.Path, minReplicas *int32) field.ErrorList {
	var errs field.ErrorList
	objectOrExternal := false
	for i := range specs {
		errs = append(errs, metric(&specs[i], path.Index(i))...)
		if t := specs[i].Type; t == autoscalingv2.ObjectMetricSourceType || t == autoscalingv2.ExternalMetricSourceType {
			objectOrExternal = true
		}
	}
	if minReplicas != nil && *minReplicas == 0 && !objectOrExternal {
		errs = append(errs, field.Forbidden(path, "must specify at least one Object or External metric to support scaling to zero replicas"))
	}
	return errs
}

func metric(m *autoscalingv2.MetricSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if m.Type == "" {
		errs = append(errs, field.Required(path.Child("type"), "must specify a metric source type"))
	}
	// The sources set, in upstream's order; only the first is validated.
	var present []string
	if m.Object != nil {
		if present = append(present, "object"); len(present) == 1 {
			errs = append(errs, objectSource(m.Object, path.Child("object"))...)
		}
	}
	if m.External != nil {
		if present = append(present, "external"); len(present) == 1 {
			errs = append(errs, externalSource(m.External, path.Child("external"))...)
		}
	}
	if m.Pods != nil {
		if present = append(present, "pods"); len(present) == 1 {
			errs = append(errs, podsSource(m.Pods, path.Child("pods"))...)
		}
	}
	if m.Resource != nil {
		if present = append(present, "resource"); len(present) == 1 {
			errs = append(errs, resourceSource(m.Resource.Name, nil, m.Resource.Target, path.Child("resource"))...)
		}
	}
	if m.ContainerResource != nil {
		if present = append(present, "containerResource"); len(present) == 1 {
			errs = append(errs, resourceSource(m.ContainerResource.Name, &m.ContainerResource.Container, m.ContainerResource.Target, path.Child("containerResource"))...)
		}
	}
	expected := ""
	switch m.Type {
	case autoscalingv2.ObjectMetricSourceType:
		expected = "object"
	case autoscalingv2.PodsMetricSourceType:
		expected = "pods"
	case autoscalingv2.ResourceMetricSourceType:
		expected = "resource"
	case autoscalingv2.ExternalMetricSourceType:
		expected = "external"
	case autoscalingv2.ContainerResourceMetricSourceType:
		expected = "containerResource"
	default:
		errs = append(errs, field.NotSupported(path.Child("type"), m.Type, sourceTypes))
	}
	if expected != "" {
		found := false
		for _, p := range present {
			found = found || p == expected
		}
		if !found {
			errs = append(errs, field.Required(path.Child(expected), "must populate information for the given metric source"))
		}
	}
	if len(present) != 1 {
		for _, p := range present {
			if p != expected {
				errs = append(errs, field.Forbidden(path.Child(p), "must populate the given metric source only"))
			}
		}
	}
	return errs
}

func objectSource(src *autoscalingv2.ObjectMetricSource, path *field.Path) field.ErrorList {
	errs := objectReference(src.DescribedObject, path.Child("describedObject"))
	errs = append(errs, metricIdentifier(src.Metric, path.Child("metric"))...)
	errs = append(errs, target(src.Target, path.Child("target"))...)
	if src.Target.Value == nil && src.Target.AverageValue == nil {
		errs = append(errs, field.Required(path.Child("target", "averageValue"), "must set either a target value or averageValue"))
	}
	return errs
}

func externalSource(src *autoscalingv2.ExternalMetricSource, path *field.Path) field.ErrorList {
	errs := metricIdentifier(src.Metric, path.Child("metric"))
	errs = append(errs, target(src.Target, path.Child("target"))...)
	if src.Target.Value == nil && src.Target.AverageValue == nil {
		errs = append(errs, field.Required(path.Child("target", "averageValue"), "must set either a target value for metric or a per-pod target"))
	}
	if src.Target.Value != nil && src.Target.AverageValue != nil {
		errs = append(errs, field.Forbidden(path.Child("target", "value"), "may not set both a target value for metric and a per-pod target"))
	}
	return errs
}

func podsSource(src *autoscalingv2.PodsMetricSource, path *field.Path) field.ErrorList {
	errs := metricIdentifier(src.Metric, path.Child("metric"))
	errs = append(errs, target(src.Target, path.Child("target"))...)
	if src.Target.AverageValue == nil {
		errs = append(errs, field.Required(path.Child("target", "averageValue"), "must specify a positive target averageValue"))
	}
	return errs
}

// resourceSource validates a Resource metric, or a ContainerResource one
// when container is set.
func resourceSource(name corev1.ResourceName, container *string, t autoscalingv2.MetricTarget, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		errs = append(errs, field.Required(path.Child("name"), "must specify a resource name"))
	} else {
		errs = append(errs, containerResourceName(name, path.Child("name"))...)
	}
	if container != nil {
		if *container == "" {
			errs = append(errs, field.Required(path.Child("container"), "must specify a container"))
		} else {
			for _, msg := range validation.IsDNS1123Label(*container) {
				errs = append(errs, field.Invalid(path.Child("container"), *container, msg))
			}
		}
	}
	errs = append(errs, target(t, path.Child("target"))...)
	if t.AverageUtilization == nil && t.AverageValue == nil {
		errs = append(errs, field.Required(path.Child("target", "averageUtilization"), "must set either a target raw value or a target utilization"))
	}
	if t.AverageUtilization != nil && t.AverageValue != nil {
		errs = append(errs, field.Forbidden(path.Child("target", "averageValue"), "may not set both a target raw value and a target utilization"))
	}
	return errs
}

// containerResourceName accepts what a container may request: cpu,
// memory, ephemeral-storage, hugepages-*, and qualified extended names.
func containerResourceName(name corev1.ResourceName, path *field.Path) field.ErrorList {
	s := string(name)
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(s) {
		errs = append(errs, field.Invalid(path, s, msg))
	}
	if len(errs) > 0 {
		return errs
	}
	if !strings.Contains(s, "/") {
		switch {
		case name == corev1.ResourceCPU, name == corev1.ResourceMemory, name == corev1.ResourceEphemeralStorage,
			strings.HasPrefix(s, corev1.ResourceHugePagesPrefix):
			return nil
		}
		return field.ErrorList{field.Invalid(path, s, "must be a standard resource for containers")}
	}
	return nil
}

func metricIdentifier(id autoscalingv2.MetricIdentifier, path *field.Path) field.ErrorList {
	if id.Name == "" {
		return field.ErrorList{field.Required(path.Child("name"), "must specify a metric name")}
	}
	var errs field.ErrorList
	for _, msg := range pathvalidation.IsValidPathSegmentName(id.Name) {
		errs = append(errs, field.Invalid(path.Child("name"), id.Name, msg))
	}
	return errs
}

func target(t autoscalingv2.MetricTarget, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Type == "" {
		errs = append(errs, field.Required(path.Child("type"), "must specify a metric target type"))
	}
	if t.Type != autoscalingv2.UtilizationMetricType && t.Type != autoscalingv2.ValueMetricType && t.Type != autoscalingv2.AverageValueMetricType {
		errs = append(errs, field.Invalid(path.Child("type"), t.Type, "must be either Utilization, Value, or AverageValue"))
	}
	if t.Value != nil && t.Value.Sign() != 1 {
		errs = append(errs, field.Invalid(path.Child("value"), t.Value.String(), "must be positive"))
	}
	if t.AverageValue != nil && t.AverageValue.Sign() != 1 {
		errs = append(errs, field.Invalid(path.Child("averageValue"), t.AverageValue.String(), "must be positive"))
	}
	if t.AverageUtilization != nil && *t.AverageUtilization < 1 {
		errs = append(errs, field.Invalid(path.Child("averageUtilization"), *t.AverageUtilization, "must be greater than 0"))
	}
	return errs
}

var selectPolicies = []string{string(autoscalingv2.DisabledPolicySelect), string(autoscalingv2.MaxChangePolicySelect), string(autoscalingv2.MinChangePolicySelect)}
var policyTypes = []string{string(autoscalingv2.PercentScalingPolicy), string(autoscalingv2.PodsScalingPolicy)}

func scalingRules(r *autoscalingv2.HPAScalingRules, path *field.Path) field.ErrorList {
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	if w := r.StabilizationWindowSeconds; w != nil && *w < 0 {
		errs = append(errs, field.Invalid(path.Child("stabilizationWindowSeconds"), *w, "must be greater than or equal to zero"))
	}
	if w := r.StabilizationWindowSeconds; w != nil && *w > MaxStabilizationWindowSeconds {
		errs = append(errs, field.Invalid(path.Child("stabilizationWindowSeconds"), *w, fmt.Sprintf("must be less than or equal to %d", MaxStabilizationWindowSeconds)))
	}
	if s := r.SelectPolicy; s != nil && *s != autoscalingv2.MaxChangePolicySelect && *s != autoscalingv2.MinChangePolicySelect && *s != autoscalingv2.DisabledPolicySelect {
		errs = append(errs, field.NotSupported(path.Child("selectPolicy"), *s, selectPolicies))
	}
	policies := path.Child("policies")
	if len(r.Policies) == 0 {
		errs = append(errs, field.Required(policies, "must specify at least one Policy"))
	}
	for i, p := range r.Policies {
		at := policies.Index(i)
		if p.Type != autoscalingv2.PodsScalingPolicy && p.Type != autoscalingv2.PercentScalingPolicy {
			errs = append(errs, field.NotSupported(at.Child("type"), p.Type, policyTypes))
		}
		if p.Value <= 0 {
			errs = append(errs, field.Invalid(at.Child("value"), p.Value, "must be greater than 0"))
		}
		if p.PeriodSeconds <= 0 {
			errs = append(errs, field.Invalid(at.Child("periodSeconds"), p.PeriodSeconds, "must be greater than 0"))
		}
		if p.PeriodSeconds > MaxPeriodSeconds {
			errs = append(errs, field.Invalid(at.Child("periodSeconds"), p.PeriodSeconds, fmt.Sprintf("must be less than or equal to %d", MaxPeriodSeconds)))
		}
	}
	if r.Tolerance != nil && r.Tolerance.Sign() < 0 {
		errs = append(errs, field.Invalid(path.Child("tolerance"), r.Tolerance.String(), "must be greater than or equal to 0"))
	}
	return errs
}
