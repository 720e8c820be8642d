package convert

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/schedule"
)

// cronMeta is what a cron trigger's metadata says
// (keda.sh/docs/scalers/cron): from each start to the next end, in
// timezone, the trigger proposes desiredReplicas — a floor, since the
// HPA takes the largest proposal, which is what spec.schedules is.
type cronMeta struct {
	Timezone        string `keda:"timezone,required"`
	Start           string `keda:"start,required"`
	End             string `keda:"end,required"`
	DesiredReplicas string `keda:"desiredReplicas,required"`
}

var nonLabel = regexp.MustCompile(`[^a-z0-9-]+`)

// cronTrigger converts a cron trigger to a window of spec.schedules; nil
// with an issue when it does not convert (or raises nothing).
func (c *soConverter) cronTrigger(d *meta, t *KEDATrigger, i int) *v1alpha1.Schedule {
	var m cronMeta
	if !d.decode(&m) {
		return nil
	}
	desired, err := strconv.ParseInt(m.DesiredReplicas, 10, 32)
	if err != nil || desired < 0 {
		d.fail("desiredReplicas", "%q is not a whole number of replicas", m.DesiredReplicas)
		return nil
	}
	if desired == 0 {
		d.warn("desiredReplicas", "0 raises nothing (as in KEDA): no schedule written")
		return nil
	}
	if int32(desired) > c.maxReplicas {
		d.warn("desiredReplicas", "%d is above maxReplicaCount %d: the schedule's minReplicas is %d (KEDA's HPA stops at the maximum too)", desired, c.maxReplicas, c.maxReplicas)
		desired = int64(c.maxReplicas)
	}
	if c.modifier != nil {
		c.issue(true, d.field, "a cron trigger under advanced.scalingModifiers has no equivalent: a schedule is a floor beside the metrics, not a term of the formula")
		return nil
	}
	name := strings.Trim(nonLabel.ReplaceAllString(strings.ToLower(t.Name), "-"), "-")
	if name == "" || len(name) > 63 {
		name = fmt.Sprintf("s%d-cron", i)
	}
	s := &v1alpha1.Schedule{Name: name, Start: m.Start, End: m.End, TimeZone: m.Timezone, MinReplicas: int32(desired)}
	if _, errs := schedule.Compile([]v1alpha1.Schedule{*s}, field.NewPath("spec")); len(errs) > 0 {
		for _, e := range errs {
			key := map[string]string{"start": "start", "end": "end", "timeZone": "timezone"}[e.Field[strings.LastIndex(e.Field, ".")+1:]]
			if key == "" {
				key = "desiredReplicas"
			}
			d.fail(key, "%s", e.Detail)
		}
		return nil
	}
	return s
}
