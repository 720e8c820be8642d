package validation

import (
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
)

// The MetricAutoscaler CRD's bounds that an HPA does not have: they keep
// the CEL rule that matches activation names with spec.metrics within the
// API server's cost budget.
const (
	MaxMetrics              = 1000
	MaxActivations          = 16
	MaxActivationNameLength = 253
)

// MetricAutoscaler validates what a MetricAutoscaler's CRD checks beyond
// the HPA spec (Spec): the bound on spec.metrics, spec.fallback,
// spec.scaleToZero, spec.schedules and spec.formula; path is the spec's.
func MetricAutoscaler(spec *v1alpha1.MetricAutoscalerSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(spec.Metrics) > MaxMetrics {
		errs = append(errs, field.TooMany(path.Child("metrics"), len(spec.Metrics), MaxMetrics))
	}
	errs = append(errs, Fallback(spec.Fallback, path.Child("fallback"))...)
	errs = append(errs, ScaleToZero(spec, path)...)
	errs = append(errs, Schedules(spec, path)...)
	errs = append(errs, Formula(spec, path)...)
	return errs
}

// ScaleToZero validates spec.scaleToZero as the CRD's schema and CEL rules
// do; path is the spec's. Each activation must name a spec metric, as
// MetricActivation.Metric says: metric.name for Object, External and Pods
// metrics, the resource name for Resource and ContainerResource ones.
func ScaleToZero(spec *v1alpha1.MetricAutoscalerSpec, path *field.Path) field.ErrorList {
	s := spec.ScaleToZero
	if s == nil {
		return nil
	}
	p := path.Child("scaleToZero")
	var errs field.ErrorList
	if spec.MinReplicas == nil || *spec.MinReplicas != 0 {
		errs = append(errs, field.Invalid(p, "minReplicas "+describeMin(spec.MinReplicas), "scaleToZero needs minReplicas 0"))
	}
	if s.CooldownPeriod != nil && s.CooldownPeriod.Duration < 0 {
		errs = append(errs, field.Invalid(p.Child("cooldownPeriod"), s.CooldownPeriod.Duration.String(), "cooldownPeriod must not be negative"))
	}
	ap := p.Child("activation")
	if len(s.Activation) > MaxActivations {
		errs = append(errs, field.TooMany(ap, len(s.Activation), MaxActivations))
	}
	names := metricNames(spec.Metrics)
	seen := map[string]bool{}
	for i, a := range s.Activation {
		ip := ap.Index(i)
		switch {
		case a.Metric == "":
			errs = append(errs, field.Required(ip.Child("metric"), "the name of a spec metric"))
		case len(a.Metric) > MaxActivationNameLength:
			errs = append(errs, field.TooLong(ip.Child("metric"), a.Metric, MaxActivationNameLength))
		case seen[a.Metric]:
			errs = append(errs, field.Duplicate(ip.Child("metric"), a.Metric))
		case !names[a.Metric]:
			errs = append(errs, field.Invalid(ip.Child("metric"), a.Metric, "names no metric of spec.metrics (metric.name, or the resource name of a Resource or ContainerResource metric)"))
		}
		seen[a.Metric] = true
		// A Quantity decoded from an absent field has no format; every
		// parsed one has one.
		if a.Value.Format == "" {
			errs = append(errs, field.Required(ip.Child("value"), "the activation value"))
		}
	}
	return errs
}

func describeMin(m *int32) string {
	if m == nil {
		return "unset (1)"
	}
	return fmt.Sprint(*m)
}

// metricNames are the names activation entries may give.
func metricNames(specs []autoscalingv2.MetricSpec) map[string]bool {
	names := map[string]bool{}
	for _, m := range specs {
		// Every source set counts, as in the CRD's rule (a metric with two
		// is refused elsewhere).
		if m.External != nil {
			names[m.External.Metric.Name] = true
		}
		if m.Object != nil {
			names[m.Object.Metric.Name] = true
		}
		if m.Pods != nil {
			names[m.Pods.Metric.Name] = true
		}
		if m.Resource != nil {
			names[string(m.Resource.Name)] = true
		}
		if m.ContainerResource != nil {
			names[string(m.ContainerResource.Name)] = true
		}
	}
	return names
}
