package validation

import (
	"regexp"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/schedule"
)

// MaxSchedules is the CRD's bound on spec.schedules.
const MaxSchedules = 32

var scheduleName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// Schedules validates spec.schedules: what the CRD's schema and CEL rules
// check (names, bounds, minReplicas within maxReplicas), and what they
// cannot, which the controller reports as the InvalidSchedule condition: a
// cron expression that does not parse, an unknown time zone. path is the
// spec's.
func Schedules(spec *v1alpha1.MetricAutoscalerSpec, path *field.Path) field.ErrorList {
	if len(spec.Schedules) == 0 {
		return nil
	}
	p := path.Child("schedules")
	var errs field.ErrorList
	if len(spec.Schedules) > MaxSchedules {
		errs = append(errs, field.TooMany(p, len(spec.Schedules), MaxSchedules))
	}
	seen := map[string]bool{}
	for i, s := range spec.Schedules {
		ip := p.Index(i)
		switch {
		case s.Name == "":
		case len(s.Name) > 63 || !scheduleName.MatchString(s.Name):
			errs = append(errs, field.Invalid(ip.Child("name"), s.Name, "must be a DNS label (lower-case letters, digits and '-', at most 63)"))
		case seen[s.Name]:
			errs = append(errs, field.Duplicate(ip.Child("name"), s.Name))
		}
		seen[s.Name] = true
		if s.MinReplicas > spec.MaxReplicas {
			errs = append(errs, field.Invalid(ip.Child("minReplicas"), s.MinReplicas, "must be less than or equal to maxReplicas"))
		}
	}
	_, cerrs := schedule.Compile(spec.Schedules, path)
	return append(errs, cerrs...)
}
