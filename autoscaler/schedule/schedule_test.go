package schedule

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
)

func mustCompile(t *testing.T, specs ...v1alpha1.Schedule) Set {
	t.Helper()
	set, errs := Compile(specs, field.NewPath("spec"))
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	return set
}

func at(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestFloor: the floor and when it next changes, at the edges of windows
// and along their ramps (2026-11-27 is a Friday).
func TestFloor(t *testing.T) {
	t.Parallel()
	office := v1alpha1.Schedule{Name: "office", Start: "0 9 * * *", End: "0 17 * * *", MinReplicas: 6}
	ramped := v1alpha1.Schedule{Name: "ramped", Start: "0 9 * * *", End: "0 17 * * *", MinReplicas: 7, RampSeconds: 600}
	weekdays := v1alpha1.Schedule{Name: "weekdays", Start: "0 9 * * 1-5", End: "0 17 * * *", MinReplicas: 4}
	paris := v1alpha1.Schedule{Name: "paris", Start: "30 8 * * 1-5", Duration: &metav1.Duration{Duration: time.Hour}, TimeZone: "Europe/Paris", MinReplicas: 3}
	batch := v1alpha1.Schedule{Name: "batch", Start: "0 12 * * *", Duration: &metav1.Duration{Duration: 30 * time.Minute}, MinReplicas: 9}
	empty := v1alpha1.Schedule{Name: "empty", Start: "0 9 * * *", End: "0 9 * * *", MinReplicas: 5, RampSeconds: 60}
	for _, tc := range []struct {
		name     string
		specs    []v1alpha1.Schedule
		now      string
		want     int32
		phase    Phase
		winner   string
		until    string
		wantNext string
	}{
		{"before the window", []v1alpha1.Schedule{office}, "2026-11-27T08:00:00Z", 2, Outside, "", "", "2026-11-27T09:00:00Z"},
		{"at its start", []v1alpha1.Schedule{office}, "2026-11-27T09:00:00Z", 6, Inside, "office", "2026-11-27T17:00:00Z", "2026-11-27T17:00:00Z"},
		{"just before its end", []v1alpha1.Schedule{office}, "2026-11-27T16:59:59Z", 6, Inside, "office", "2026-11-27T17:00:00Z", "2026-11-27T17:00:00Z"},
		{"at its end", []v1alpha1.Schedule{office}, "2026-11-27T17:00:00Z", 2, Outside, "", "", "2026-11-28T09:00:00Z"},
		{"ramp starts", []v1alpha1.Schedule{ramped}, "2026-11-27T08:50:00Z", 2, Outside, "", "", "2026-11-27T08:50:01Z"},
		// 5 replicas to add over 600s: one per 120s, rounded up.
		{"ramp up, a fifth", []v1alpha1.Schedule{ramped}, "2026-11-27T08:52:00Z", 3, RampUp, "ramped", "2026-11-27T09:00:00Z", "2026-11-27T08:52:01Z"},
		{"ramp up, halfway", []v1alpha1.Schedule{ramped}, "2026-11-27T08:55:00Z", 5, RampUp, "ramped", "2026-11-27T09:00:00Z", "2026-11-27T08:56:00.001Z"},
		{"ramped window", []v1alpha1.Schedule{ramped}, "2026-11-27T12:00:00Z", 7, Inside, "ramped", "2026-11-27T17:00:00Z", "2026-11-27T17:00:00Z"},
		{"ramp down starts", []v1alpha1.Schedule{ramped}, "2026-11-27T17:00:00Z", 7, RampDown, "ramped", "2026-11-27T17:10:00Z", "2026-11-27T17:02:00Z"},
		{"ramp down, halfway", []v1alpha1.Schedule{ramped}, "2026-11-27T17:05:00Z", 5, RampDown, "ramped", "2026-11-27T17:10:00Z", "2026-11-27T17:06:00Z"},
		{"ramp down over", []v1alpha1.Schedule{ramped}, "2026-11-27T17:10:00Z", 2, Outside, "", "", "2026-11-28T08:50:00Z"},
		// Saturday: the daily end fired since Friday's start.
		{"no start since the last end", []v1alpha1.Schedule{weekdays}, "2026-11-28T10:00:00Z", 2, Outside, "", "", "2026-11-30T09:00:00Z"},
		{"weekday window", []v1alpha1.Schedule{weekdays}, "2026-11-27T10:00:00Z", 4, Inside, "weekdays", "2026-11-27T17:00:00Z", "2026-11-27T17:00:00Z"},
		// 08:45 in Paris (UTC+1 in winter) is 07:45 UTC.
		{"time zone", []v1alpha1.Schedule{paris}, "2026-11-30T07:45:00Z", 3, Inside, "paris", "2026-11-30T08:30:00Z", "2026-11-30T08:30:00Z"},
		{"time zone, before", []v1alpha1.Schedule{paris}, "2026-11-30T08:45:00Z", 2, Outside, "", "", "2026-12-01T07:30:00Z"},
		{"the highest floor wins", []v1alpha1.Schedule{office, batch}, "2026-11-27T12:10:00Z", 9, Inside, "batch", "2026-11-27T12:30:00Z", "2026-11-27T12:30:00Z"},
		{"the first wins a tie", []v1alpha1.Schedule{office, {Name: "same", Start: "0 8 * * *", End: "0 18 * * *", MinReplicas: 6}}, "2026-11-27T12:10:00Z", 6, Inside, "office", "2026-11-27T17:00:00Z", "2026-11-27T17:00:00Z"},
		{"the nearest edge", []v1alpha1.Schedule{office, batch}, "2026-11-27T10:00:00Z", 6, Inside, "office", "2026-11-27T17:00:00Z", "2026-11-27T12:00:00Z"},
		{"an empty window raises nothing", []v1alpha1.Schedule{empty}, "2026-11-27T09:00:30Z", 2, Outside, "", "", "2026-11-28T09:00:00Z"},
		{"below the base", []v1alpha1.Schedule{office}, "2026-11-27T10:00:00Z", 8, Outside, "", "", "2026-11-27T17:00:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			set := mustCompile(t, tc.specs...)
			base := int32(2)
			if tc.name == "below the base" {
				base = 8
			}
			now := at(t, tc.now)
			f := set.Floor(now, base)
			if f.Replicas != tc.want || f.Phase != tc.phase || f.Name != tc.winner {
				t.Errorf("Floor = %d %v %q, want %d %v %q", f.Replicas, f.Phase, f.Name, tc.want, tc.phase, tc.winner)
			}
			if tc.until != "" && !f.Until.Equal(at(t, tc.until)) {
				t.Errorf("Until = %s, want %s", f.Until.UTC().Format(time.RFC3339Nano), tc.until)
			}
			next := set.Next(now, base)
			want, err := time.Parse(time.RFC3339Nano, tc.wantNext)
			if err != nil {
				t.Fatal(err)
			}
			if !next.Equal(want) {
				t.Errorf("Next = %s, want %s", next.UTC().Format(time.RFC3339Nano), tc.wantNext)
			}
		})
	}
}

// TestRampIsMonotonic walks a ramp second by second: the floor never goes
// back, changes only at the times Next announced, and reaches the window's
// minimum at its start and the base at the ramp's end.
func TestRampIsMonotonic(t *testing.T) {
	t.Parallel()
	set := mustCompile(t, v1alpha1.Schedule{Name: "r", Start: "0 9 * * *", Duration: &metav1.Duration{Duration: time.Hour}, MinReplicas: 40, RampSeconds: 300})
	from, to := at(t, "2026-11-27T08:54:00Z"), at(t, "2026-11-27T10:06:00Z")
	prev := set.Floor(from, 1).Replicas
	wake := set.Next(from, 1)
	for now := from.Add(time.Second); now.Before(to); now = now.Add(time.Second) {
		f := set.Floor(now, 1)
		inside := !now.Before(at(t, "2026-11-27T09:00:00Z")) && now.Before(at(t, "2026-11-27T10:00:00Z"))
		switch {
		case now.Before(at(t, "2026-11-27T09:00:00Z")) && f.Replicas < prev,
			!now.Before(at(t, "2026-11-27T10:00:00Z")) && f.Replicas > prev:
			t.Fatalf("%s: floor %d after %d, against the ramp", now.Format(time.TimeOnly), f.Replicas, prev)
		case inside && f.Replicas != 40:
			t.Fatalf("%s: floor %d inside the window", now.Format(time.TimeOnly), f.Replicas)
		case f.Replicas != prev && now.Before(wake):
			t.Fatalf("%s: floor changed to %d before the announced %s", now.Format(time.TimeOnly), f.Replicas, wake.Format(time.TimeOnly))
		}
		if !now.Before(wake) {
			wake = set.Next(now, 1)
		}
		prev = f.Replicas
	}
	if got := set.Floor(at(t, "2026-11-27T10:05:00Z"), 1).Replicas; got != 1 {
		t.Errorf("after the ramp down: %d, want 1", got)
	}
	if got := set.Floor(at(t, "2026-11-27T08:55:00Z"), 1).Replicas; got != 1 {
		t.Errorf("at the ramp's start: %d, want 1", got)
	}
}

// TestCompileErrors: what no CRD rule can check is reported at its field.
func TestCompileErrors(t *testing.T) {
	t.Parallel()
	hour := &metav1.Duration{Duration: time.Hour}
	for _, tc := range []struct {
		name   string
		spec   v1alpha1.Schedule
		field  string
		detail string
	}{
		{"minute out of range", v1alpha1.Schedule{Name: "a", Start: "61 * * * *", Duration: hour, MinReplicas: 2}, "spec.schedules[1].start", "not a cron expression"},
		{"six fields", v1alpha1.Schedule{Name: "a", Start: "0 0 9 * * *", Duration: hour, MinReplicas: 2}, "spec.schedules[1].start", "5 fields"},
		{"descriptor", v1alpha1.Schedule{Name: "a", Start: "@daily", Duration: hour, MinReplicas: 2}, "spec.schedules[1].start", "5 fields"},
		{"bad end", v1alpha1.Schedule{Name: "a", Start: "0 9 * * *", End: "0 25 * * *", MinReplicas: 2}, "spec.schedules[1].end", "not a cron expression"},
		{"unknown zone", v1alpha1.Schedule{Name: "a", Start: "0 9 * * *", Duration: hour, TimeZone: "Mars/Olympus_Mons", MinReplicas: 2}, "spec.schedules[1].timeZone", "unknown time zone"},
		{"local zone", v1alpha1.Schedule{Name: "a", Start: "0 9 * * *", Duration: hour, TimeZone: "Local", MinReplicas: 2}, "spec.schedules[1].timeZone", "IANA"},
		{"end and duration", v1alpha1.Schedule{Name: "a", Start: "0 9 * * *", End: "0 10 * * *", Duration: hour, MinReplicas: 2}, "spec.schedules[1].end", "exactly one"},
		{"neither", v1alpha1.Schedule{Name: "a", Start: "0 9 * * *", MinReplicas: 2}, "spec.schedules[1].end", "exactly one"},
		{"zero duration", v1alpha1.Schedule{Name: "a", Start: "0 9 * * *", Duration: &metav1.Duration{}, MinReplicas: 2}, "spec.schedules[1].duration", "positive"},
		{"zero minReplicas", v1alpha1.Schedule{Name: "a", Start: "0 9 * * *", Duration: hour}, "spec.schedules[1].minReplicas", "greater than or equal to 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			good := v1alpha1.Schedule{Name: "good", Start: "0 9 * * *", Duration: hour, MinReplicas: 3}
			set, errs := Compile([]v1alpha1.Schedule{good, tc.spec}, field.NewPath("spec"))
			if len(errs) != 1 || errs[0].Field != tc.field || !strings.Contains(errs[0].Error(), tc.detail) {
				t.Fatalf("errors %v, want one at %s containing %q", errs.ToAggregate(), tc.field, tc.detail)
			}
			if len(set) != 1 || set[0].Name != "good" {
				t.Errorf("compiled %d windows, want the valid one alone", len(set))
			}
		})
	}
}

// BenchmarkFloor is what a reconcile adds per schedule: the floor and the
// next change of a weekday window with a ramp, in a time zone.
func BenchmarkFloor(b *testing.B) {
	set, errs := Compile([]v1alpha1.Schedule{{Name: "office", Start: "0 9 * * 1-5", End: "0 18 * * 1-5", TimeZone: "Europe/Paris", MinReplicas: 10, RampSeconds: 900}}, field.NewPath("spec"))
	if len(errs) > 0 {
		b.Fatal(errs.ToAggregate())
	}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC) // a Saturday: the longest look back
	for b.Loop() {
		_ = set.Floor(now, 2)
		_ = set.Next(now, 2)
	}
}
