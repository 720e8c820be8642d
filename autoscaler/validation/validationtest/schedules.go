package validationtest

// InvalidSchedule is a MetricAutoscaler spec, valid but for its
// spec.schedules. Field is where the simulator's validation reports it;
// the CRD reports it there or at an enclosing field (a CEL rule on the
// entry, the list or the spec). CRD says whether the CRD can see it at
// all: a cron expression with a field out of range, or a time zone that
// does not exist, has the right shape for the schema, and only the
// simulator's validation and the controller (condition Scheduled, reason
// InvalidSchedule) find it.
type InvalidSchedule = Invalid

// Invalid is a MetricAutoscaler spec valid but for one field of an
// extension (spec.schedules, spec.formula): Field is where the simulator's
// validation reports it, CRD whether the CRD can see it at all.
type Invalid struct {
	Name  string
	Spec  map[string]any
	Field string
	CRD   bool
}

// ScheduleSpec is a valid spec whose first schedule is edited by mutate
// (nil deletes a key).
func ScheduleSpec(mutate map[string]any) map[string]any {
	s := map[string]any{"name": "office", "start": "0 9 * * 1-5", "end": "0 17 * * 1-5", "timeZone": "Europe/Paris", "minReplicas": 4, "rampSeconds": 600}
	for k, v := range mutate {
		if v == nil {
			delete(s, k)
			continue
		}
		s[k] = v
	}
	return map[string]any{
		"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
		"minReplicas":    1,
		"maxReplicas":    10,
		"schedules": []any{
			s,
			map[string]any{"name": "batch", "start": "0 2 * * *", "duration": "1h", "minReplicas": 2},
		},
	}
}

// InvalidSchedules are the invalid spec.schedules both must reject, and
// those only the simulator's validation (and the controller) can.
func InvalidSchedules() []InvalidSchedule {
	return []InvalidSchedule{
		{"end and duration", ScheduleSpec(map[string]any{"duration": "1h"}), "spec.schedules[0].end", true},
		{"neither end nor duration", ScheduleSpec(map[string]any{"end": nil}), "spec.schedules[0].end", true},
		{"minReplicas above maxReplicas", ScheduleSpec(map[string]any{"minReplicas": 11}), "spec.schedules[0].minReplicas", true},
		{"zero minReplicas", ScheduleSpec(map[string]any{"minReplicas": 0}), "spec.schedules[0].minReplicas", true},
		{"name not a DNS label", ScheduleSpec(map[string]any{"name": "Office"}), "spec.schedules[0].name", true},
		{"duplicate name", ScheduleSpec(map[string]any{"name": "batch"}), "spec.schedules[1].name", true},
		{"ramp over a day", ScheduleSpec(map[string]any{"rampSeconds": 86401}), "spec.schedules[0].rampSeconds", true},
		{"six cron fields", ScheduleSpec(map[string]any{"start": "0 0 9 * * 1-5"}), "spec.schedules[0].start", true},
		{"a descriptor", ScheduleSpec(map[string]any{"end": "@daily"}), "spec.schedules[0].end", true},
		{"time zone with a space", ScheduleSpec(map[string]any{"timeZone": "Europe Paris"}), "spec.schedules[0].timeZone", true},
		{"minute out of range", ScheduleSpec(map[string]any{"start": "60 9 * * 1-5"}), "spec.schedules[0].start", false},
		{"day of week out of range", ScheduleSpec(map[string]any{"end": "0 17 * * 8"}), "spec.schedules[0].end", false},
		{"unknown time zone", ScheduleSpec(map[string]any{"timeZone": "Mars/Olympus_Mons"}), "spec.schedules[0].timeZone", false},
		{"the controller's zone", ScheduleSpec(map[string]any{"timeZone": "Local"}), "spec.schedules[0].timeZone", false},
	}
}
