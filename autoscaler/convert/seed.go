package convert

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/defaults"
	"github.com/metricscale/metricscale/autoscaler/metrictarget"
)

// Rescale is one rescale an HPA's controller reported: the size it set and
// when. Uncertain marks one whose size before is not known (occurrences of
// the same message were folded into one Event, so some rescales are
// missing around it).
type Rescale struct {
	Time      time.Time
	Replicas  int32
	Uncertain bool
}

// rescaleMessage is kube-controller-manager's SuccessfulRescale event
// message ("New size: 4; reason: cpu resource utilization (percentage of
// request) above target").
var rescaleMessage = regexp.MustCompile(`^New size: (\d+); reason: `)

// RescalesFromEvents reads an HPA's SuccessfulRescale Events. The event
// recorder folds repeats of one message into one Event (count, first and
// last timestamp): its first and last occurrence are known, those in
// between are not, so every rescale listed inside such a span is marked
// Uncertain.
func RescalesFromEvents(events []corev1.Event) []Rescale {
	type span struct{ from, to time.Time }
	var out []Rescale
	var gaps []span
	for _, e := range events {
		if e.Reason != "SuccessfulRescale" {
			continue
		}
		m := rescaleMessage.FindStringSubmatch(e.Message)
		if m == nil {
			continue
		}
		n, err := strconv.ParseInt(m[1], 10, 32)
		if err != nil {
			continue
		}
		first, last := e.FirstTimestamp.Time, e.LastTimestamp.Time
		if e.Series != nil && !e.Series.LastObservedTime.IsZero() {
			last = e.Series.LastObservedTime.Time
		}
		if last.IsZero() {
			last = e.EventTime.Time
		}
		if first.IsZero() {
			first = last
		}
		count := max(e.Count, 1)
		if e.Series != nil {
			count = max(count, e.Series.Count)
		}
		out = append(out, Rescale{Time: last, Replicas: int32(n)})
		if count >= 2 && first.Before(last) {
			out = append(out, Rescale{Time: first, Replicas: int32(n)})
		}
		if count > 2 || (count == 2 && !first.Before(last)) {
			gaps = append(gaps, span{first, last})
		}
	}
	slices.SortStableFunc(out, func(a, b Rescale) int { return a.Time.Compare(b.Time) })
	for i := range out {
		for _, g := range gaps {
			if out[i].Time.After(g.from) && !out[i].Time.After(g.to) {
				out[i].Uncertain = true
			}
		}
	}
	return out
}

// Seed is what a MetricAutoscaler's starting status is made of.
type Seed struct {
	// HPA is the autoscaler handed over, with its status.
	HPA *autoscalingv2.HorizontalPodAutoscaler
	// Replicas is the target's size now (its /scale spec.replicas).
	Replicas int32
	// Rescales are the HPA's reported rescales (RescalesFromEvents);
	// RescalesRead says whether they could be read at all.
	Rescales     []Rescale
	RescalesRead bool
	Now          time.Time
}

// StartingStatus is the status a MetricAutoscaler starts from in place of
// s.HPA, and notes on what of the HPA's history could not be rebuilt.
//
// The HPA's own status carries over: lastScaleTime, desiredReplicas,
// currentMetrics and conditions (ScaledToZero included, so a target the HPA
// scaled to zero stays "scaled to zero by the autoscaler"); currentReplicas
// is the target's size now.
//
// kube-controller-manager keeps an HPA's history — its recommendations and
// its scale events — in memory only, so the history is rebuilt:
//
//   - Recommendations: one, the current size, now. The scale-down
//     stabilization window then holds the current size for a whole window,
//     as kube-controller-manager itself does for an HPA it starts
//     reconciling after a restart: a scale-down the HPA was holding back is
//     held back as long or longer, never released early.
//   - Scale events (only an HPA with behavior uses them): the rescales of
//     the HPA's SuccessfulRescale events within the longest policy period of
//     their direction, each with the change from the size before it, so the
//     Pods and Percent policies count what the HPA already used of their
//     budget. A rescale whose size before is unknown is left out and said
//     so in the notes.
func StartingStatus(spec v1alpha1.MetricAutoscalerSpec, s Seed) (v1alpha1.MetricAutoscalerStatus, []string) {
	now := metav1.NewMicroTime(s.Now)
	st := s.HPA.Status.DeepCopy()
	status := v1alpha1.MetricAutoscalerStatus{
		LastScaleTime:   st.LastScaleTime,
		CurrentReplicas: s.Replicas,
		DesiredReplicas: st.DesiredReplicas,
		CurrentMetrics:  st.CurrentMetrics,
		Conditions:      st.Conditions,
		Reference:       spec.ScaleTargetRef.Kind + "/" + spec.ScaleTargetRef.Name,
		Targets:         metrictarget.Targets(spec.Metrics, st.CurrentMetrics),
		History: &v1alpha1.History{
			Recommendations: []v1alpha1.Recommendation{{Replicas: s.Replicas, Time: now}},
		},
	}
	hpaSpec := spec.HPASpec()
	hpaSpec = *hpaSpec.DeepCopy()
	defaults.Spec(&hpaSpec)
	if hpaSpec.Behavior == nil {
		// Without behavior the controller keeps no scale events.
		return status, nil
	}
	var notes []string
	if !s.RescalesRead {
		if st.LastScaleTime != nil && s.Now.Sub(st.LastScaleTime.Time) < longestPeriod(hpaSpec.Behavior) {
			notes = append(notes, fmt.Sprintf("the HPA last rescaled at %s, within its policies' period, and its events could not be read: the policies start from an empty budget",
				st.LastScaleTime.UTC().Format(time.RFC3339)))
		}
		return status, notes
	}
	upPeriod := periodOf(hpaSpec.Behavior.ScaleUp)
	downPeriod := periodOf(hpaSpec.Behavior.ScaleDown)
	for i, r := range s.Rescales {
		age := s.Now.Sub(r.Time)
		if age >= max(upPeriod, downPeriod) || r.Time.After(s.Now) {
			continue
		}
		if i == 0 || r.Uncertain {
			notes = append(notes, fmt.Sprintf("the rescale to %d at %s is left out of the policies' budget: the size before it is not known",
				r.Replicas, r.Time.UTC().Format(time.RFC3339)))
			continue
		}
		change := r.Replicas - s.Rescales[i-1].Replicas
		ev := v1alpha1.ScaleEvent{Time: metav1.NewMicroTime(r.Time)}
		switch {
		case change > 0 && age < upPeriod:
			ev.Change = change
			status.History.ScaleUpEvents = append(status.History.ScaleUpEvents, ev)
		case change < 0 && age < downPeriod:
			ev.Change = -change
			status.History.ScaleDownEvents = append(status.History.ScaleDownEvents, ev)
		}
	}
	return status, notes
}

func periodOf(r *autoscalingv2.HPAScalingRules) time.Duration {
	var longest int32
	if r != nil {
		for _, p := range r.Policies {
			longest = max(longest, p.PeriodSeconds)
		}
	}
	return time.Duration(longest) * time.Second
}

func longestPeriod(b *autoscalingv2.HorizontalPodAutoscalerBehavior) time.Duration {
	return max(periodOf(b.ScaleUp), periodOf(b.ScaleDown))
}
