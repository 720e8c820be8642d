// Package schedule computes the floor that a MetricAutoscaler's
// spec.schedules put under its size at a given time: recurring windows,
// given by 5-field cron expressions in a time zone, each with a minimum and
// an optional linear ramp at its edges. Compile parses the spec (cron
// expressions, time zones); what it returns is pure: Floor and Next take
// the time as an argument and read no clock.
package schedule

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"time"
	// The images have no zoneinfo: the time zones are compiled in.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
)

// parser reads the 5 fields of crontab(5), as KEDA's cron scaler does: no
// seconds, no descriptors (@daily, @every), no CRON_TZ= prefix (the time
// zone is a field of its own).
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// Window is one compiled spec.schedules entry.
type Window struct {
	Name        string
	MinReplicas int32
	Ramp        time.Duration
	start, end  cron.Schedule
	duration    time.Duration
	loc         *time.Location
}

// Set is a MetricAutoscaler's compiled schedules; the zero Set raises
// nothing.
type Set []Window

// Compile parses spec.schedules; path is the spec's. An entry that does not
// compile is left out of the Set and reported, at its field.
func Compile(specs []v1alpha1.Schedule, path *field.Path) (Set, field.ErrorList) {
	var (
		set  Set
		errs field.ErrorList
	)
	for i := range specs {
		w, werrs := compile(&specs[i], path.Child("schedules").Index(i))
		if len(werrs) > 0 {
			errs = append(errs, werrs...)
			continue
		}
		set = append(set, w)
	}
	return set, errs
}

func compile(s *v1alpha1.Schedule, p *field.Path) (Window, field.ErrorList) {
	var errs field.ErrorList
	w := Window{Name: s.Name, MinReplicas: s.MinReplicas, Ramp: time.Duration(s.RampSeconds) * time.Second}
	if s.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), "a name for the window"))
	}
	var err error
	if w.start, err = parse(s.Start); err != nil {
		errs = append(errs, field.Invalid(p.Child("start"), s.Start, err.Error()))
	}
	switch {
	case s.End != "" && s.Duration != nil:
		errs = append(errs, field.Invalid(p.Child("end"), s.End, "exactly one of end and duration must be set"))
	case s.End != "":
		if w.end, err = parse(s.End); err != nil {
			errs = append(errs, field.Invalid(p.Child("end"), s.End, err.Error()))
		}
	case s.Duration != nil:
		w.duration = s.Duration.Duration
		if w.duration <= 0 {
			errs = append(errs, field.Invalid(p.Child("duration"), s.Duration.Duration.String(), "duration must be positive"))
		}
	default:
		errs = append(errs, field.Required(p.Child("end"), "exactly one of end and duration must be set"))
	}
	if w.loc, err = location(s.TimeZone); err != nil {
		errs = append(errs, field.Invalid(p.Child("timeZone"), s.TimeZone, err.Error()))
	}
	if s.MinReplicas < 1 {
		errs = append(errs, field.Invalid(p.Child("minReplicas"), s.MinReplicas, "must be greater than or equal to 1"))
	}
	if s.RampSeconds < 0 || s.RampSeconds > 86400 {
		errs = append(errs, field.Invalid(p.Child("rampSeconds"), s.RampSeconds, "must be between 0 and 86400"))
	}
	return w, errs
}

func parse(expr string) (cron.Schedule, error) {
	if n := len(strings.Fields(expr)); n != 5 {
		return nil, fmt.Errorf("a cron expression of 5 fields (minute hour day-of-month month day-of-week), got %d", n)
	}
	s, err := parser.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("not a cron expression: %w", err)
	}
	return s, nil
}

var (
	locMu sync.Mutex
	// locations caches the zones loaded: time.LoadLocation reads and
	// parses the zone's file at each call.
	locations = map[string]*time.Location{}
)

func location(name string) (*time.Location, error) {
	switch name {
	case "", "UTC":
		return time.UTC, nil
	case "Local":
		// The controller's zone is not the spec's.
		return nil, fmt.Errorf("an IANA time zone name such as Europe/Paris, not Local")
	}
	locMu.Lock()
	defer locMu.Unlock()
	if l, ok := locations[name]; ok {
		return l, nil
	}
	l, err := time.LoadLocation(name)
	if err != nil {
		// "unknown time zone NAME"
		return nil, err
	}
	locations[name] = l
	return l, nil
}

// Phase is where a window is at a given time.
type Phase uint8

// The phases in which a window raises the floor.
const (
	Outside Phase = iota
	// RampUp: before the window, the floor rising to MinReplicas.
	RampUp
	// Inside: the window is in force.
	Inside
	// RampDown: after the window, the floor falling back.
	RampDown
)

// Floor is what the schedules put under the size at a time.
type Floor struct {
	// Replicas is the floor (base when no window raises it).
	Replicas int32
	// Name, Phase, MinReplicas and Until describe the window that sets it,
	// when one does: Until is when the window ends (Inside), starts at full
	// floor (RampUp) or when its ramp ends (RampDown).
	Name        string
	Phase       Phase
	MinReplicas int32
	Until       time.Time
}

// Raised says whether a window sets the floor above base.
func (f Floor) Raised() bool { return f.Phase != Outside }

// Floor is the largest floor of the windows at now, ramps from base
// (spec.minReplicas) included; the first window wins a tie.
func (s Set) Floor(now time.Time, base int32) Floor {
	best := Floor{Replicas: base}
	for i := range s {
		st := s[i].state(now, base)
		if st.level > best.Replicas {
			best = Floor{Replicas: st.level, Name: s[i].Name, Phase: st.phase, MinReplicas: s[i].MinReplicas, Until: st.until}
		}
	}
	return best
}

// Next is the first time after now at which the floor may change (zero
// when it never does): a window's edge or the next step of a ramp. Ramp
// steps are at least a second apart; it may be early, never late.
func (s Set) Next(now time.Time, base int32) time.Time {
	var next time.Time
	for i := range s {
		if n := s[i].state(now, base).next; !n.IsZero() && (next.IsZero() || n.Before(next)) {
			next = n
		}
	}
	return next
}

// state is a window at a time: its floor, its phase and when either next
// changes.
type state struct {
	level int32
	phase Phase
	until time.Time
	next  time.Time
}

// lookback bounds the search for the last start: cron finds no time more
// than 5 years ahead either, and 29 February recurs within 8.
const lookback = 9 * 365 * 24 * time.Hour

func (w *Window) state(now time.Time, base int32) state {
	t := now.In(w.loc)
	st := state{level: base}
	rise := int64(w.MinReplicas) - int64(base)
	consider := func(level int32, phase Phase, until, next time.Time) {
		if level > st.level {
			st.level, st.phase, st.until = level, phase, until
		}
		if !next.IsZero() && (st.next.IsZero() || next.Before(st.next)) {
			st.next = next
		}
	}
	// The window that started last, which ends last: inside it, or on its
	// ramp down.
	if start, ok := last(w.start, t); ok {
		end := w.endOf(start)
		switch {
		case end.Equal(start):
			// An empty window raises nothing.
		case end.IsZero() || t.Before(end):
			consider(w.MinReplicas, Inside, end, end)
		case w.Ramp > 0 && t.Before(end.Add(w.Ramp)) && rise > 0:
			left := end.Add(w.Ramp).Sub(t)
			k := ceilFraction(rise, left, w.Ramp)
			// The floor goes down to base+k-1 when left <= Ramp*(k-1)/rise.
			drop := end.Add(w.Ramp - scaled(w.Ramp, k-1, rise))
			consider(base+int32(k), RampDown, end.Add(w.Ramp), step(drop, t))
		}
	}
	// The next window: its ramp up, or its start.
	next := w.start.Next(t)
	if next.IsZero() {
		return st
	}
	if end := w.endOf(next); end.Equal(next) {
		// Empty: wake at the one after it.
		consider(base, Outside, time.Time{}, next)
		return st
	}
	rampStart := next.Add(-w.Ramp)
	switch {
	case w.Ramp == 0 || rise <= 0:
		consider(base, Outside, time.Time{}, next)
	case t.Before(rampStart):
		consider(base, Outside, time.Time{}, rampStart)
	default:
		k := ceilFraction(rise, t.Sub(rampStart), w.Ramp)
		// The floor goes up to base+k+1 once elapsed > Ramp*k/rise.
		up := rampStart.Add(scaled(w.Ramp, k, rise))
		if !up.After(t) {
			up = t
		}
		consider(base+int32(k), RampUp, next, step(up.Add(time.Millisecond), t))
	}
	return st
}

// endOf is the end of the window that starts at start (zero: none within
// the cron's search, the window does not end).
func (w *Window) endOf(start time.Time) time.Time {
	if w.end == nil {
		return start.Add(w.duration)
	}
	// Next is strictly after its argument, at whole minutes: from a second
	// before start, an end that fires at start counts.
	return w.end.Next(start.Add(-time.Second))
}

// last is the last time s fires at or before t.
func last(s cron.Schedule, t time.Time) (time.Time, bool) {
	for back := time.Minute; back <= 2*lookback; back *= 2 {
		f := s.Next(t.Add(-back))
		if f.IsZero() {
			return time.Time{}, false
		}
		if f.After(t) {
			continue
		}
		for {
			n := s.Next(f)
			if n.IsZero() || n.After(t) {
				return f, true
			}
			f = n
		}
	}
	return time.Time{}, false
}

// ceilFraction is ceil(rise × part/whole), in 1..rise for part in (0, whole].
func ceilFraction(rise int64, part, whole time.Duration) int64 {
	k := int64(math.Ceil(float64(rise) * part.Seconds() / whole.Seconds()))
	return min(max(k, 0), rise)
}

// scaled is d×k/n, without overflowing.
func scaled(d time.Duration, k, n int64) time.Duration {
	return time.Duration(math.Round(float64(d) * float64(k) / float64(n)))
}

// step is when to look again for a ramp step due at due: at least a second
// after now, so a steep ramp costs at most one reconcile a second.
func step(due, now time.Time) time.Time {
	if earliest := now.Add(time.Second); due.Before(earliest) {
		return earliest
	}
	return due
}
