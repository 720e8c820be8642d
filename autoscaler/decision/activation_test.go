package decision

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/behavior"
)

// actStep is one reconcile of an activation case, at offset at from now.
// The target's size, status and history carry from step to step.
type actStep struct {
	at           time.Duration
	external     []int64 // milli-values of the queue's series
	cpu          int64   // milli-CPU per pod (requests are 1 CPU)
	failExternal bool
	object       *int64 // an Object metric's value, when the case has one

	wantReplicas int32
	wantActive   bool
	// wantLastActive is the offset lastActiveTime must be at; nil: unset.
	wantLastActive *time.Duration
	wantCondition  string // the Active condition, status/reason
	wantEvents     string // activation events, comma-separated
	wantLimited    string // the ScalingLimited condition when set
	wantReason     string // a part of the rescale reason when set
}

// objSource adds an Object metric to source.
type objSource struct {
	*source
	object *int64
}

func (s objSource) ObjectMetric(context.Context, string, string, *autoscalingv2.CrossVersionObjectReference, labels.Selector) (int64, time.Time, error) {
	if s.object == nil {
		return 0, time.Time{}, errors.New("not found")
	}
	return *s.object, now, nil
}

func objectMetric(avg string) autoscalingv2.MetricSpec {
	q := resource.MustParse(avg)
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
		DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Kind: "Service", Name: "front"},
		Metric:          autoscalingv2.MetricIdentifier{Name: "requests"},
		Target:          autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &q}}}
}

func stz(cooldown time.Duration, activation ...v1alpha1.MetricActivation) *v1alpha1.ScaleToZero {
	return &v1alpha1.ScaleToZero{CooldownPeriod: &metav1.Duration{Duration: cooldown}, Activation: activation}
}

func act(metric, value string) v1alpha1.MetricActivation {
	return v1alpha1.MetricActivation{Metric: metric, Value: resource.MustParse(value)}
}

func d(x time.Duration) *time.Duration { return &x }

func milli(v int64) *int64 { return &v }

func TestActivation(t *testing.T) {
	t.Parallel()
	const (
		above   = "True/" + ReasonAboveActivation
		below   = "False/" + ReasonBelowActivation
		unknown = "/" + ReasonActivationRead
	)
	// The queue: 2 per pod, activation 5, minReplicas 0, scale-down at once.
	queue := func() *autoscalingv2.HorizontalPodAutoscaler {
		return anyScaleDown(hpa(ptr[int32](0), 10, externalMetric("2")))
	}
	cases := []struct {
		name     string
		hpa      *autoscalingv2.HorizontalPodAutoscaler
		spec     *v1alpha1.ScaleToZero
		state    *v1alpha1.ScaleToZeroStatus
		fallback *v1alpha1.Fallback
		current  int32
		steps    []actStep
	}{
		{
			// The HPA alone would go 0 → 2 on 3 messages (3/2 per pod); the
			// activation value 5 holds the target at zero until 10 arrive;
			// then 5 replicas (10/2) limited to 4 by the scale-up policy
			// (4 pods per 15s), 1 while the queue is at or below 5 for less
			// than the cooldown (2 for 4 messages: the HPA decides between
			// 1 and max), 0 once it has been for the whole minute.
			name: "zero to one and back after the cooldown", hpa: queue(), spec: stz(time.Minute, act("queue", "5")), current: 0,
			steps: []actStep{
				{at: 0, external: []int64{3000}, wantReplicas: 0, wantCondition: below},
				{at: 15 * time.Second, external: []int64{5000}, wantReplicas: 0, wantCondition: below},
				{at: 30 * time.Second, external: []int64{10000}, wantReplicas: 4, wantActive: true, wantLastActive: d(30 * time.Second),
					wantCondition: above, wantEvents: ReasonActivated, wantReason: "above its activation value 5"},
				{at: 45 * time.Second, external: []int64{0}, wantReplicas: 1, wantLastActive: d(30 * time.Second),
					wantCondition: below, wantEvents: ReasonDeactivated, wantLimited: "True/" + ReasonCoolingDown},
				{at: 75 * time.Second, external: []int64{4000}, wantReplicas: 2, wantLastActive: d(30 * time.Second), wantCondition: below},
				{at: 89 * time.Second, external: []int64{0}, wantReplicas: 1, wantLastActive: d(30 * time.Second), wantCondition: below, wantLimited: "True/" + ReasonCoolingDown},
				{at: 90 * time.Second, external: []int64{0}, wantReplicas: 0, wantLastActive: d(30 * time.Second), wantCondition: below, wantReason: "cooldown (1m0s)"},
				{at: 105 * time.Second, external: []int64{4000}, wantReplicas: 0, wantLastActive: d(30 * time.Second), wantCondition: below},
			},
		},
		{
			// A metric above its value during the cooldown starts it again.
			name: "activity restarts the cooldown", hpa: queue(), spec: stz(time.Minute, act("queue", "5")), current: 2,
			state: &v1alpha1.ScaleToZeroStatus{LastActiveTime: &metav1.Time{Time: now.Add(-50 * time.Second)}},
			steps: []actStep{
				{at: 0, external: []int64{6000}, wantReplicas: 3, wantActive: true, wantLastActive: d(0), wantCondition: above, wantEvents: ReasonActivated},
				{at: 30 * time.Second, external: []int64{0}, wantReplicas: 1, wantLastActive: d(0), wantCondition: below, wantEvents: ReasonDeactivated},
				{at: 59 * time.Second, external: []int64{0}, wantReplicas: 1, wantLastActive: d(0), wantCondition: below},
				{at: 60 * time.Second, external: []int64{0}, wantReplicas: 0, wantLastActive: d(0), wantCondition: below},
			},
		},
		{
			// A restart: the stored lastActiveTime is where the cooldown
			// counts from (the history, empty here, does not matter).
			name: "restart mid-cooldown keeps the clock", hpa: queue(), spec: stz(time.Minute, act("queue", "5")), current: 1,
			state: &v1alpha1.ScaleToZeroStatus{LastActiveTime: &metav1.Time{Time: now.Add(-50 * time.Second)}},
			steps: []actStep{
				{at: 0, external: []int64{0}, wantReplicas: 1, wantLastActive: d(-50 * time.Second), wantCondition: below},
				{at: 10 * time.Second, external: []int64{0}, wantReplicas: 0, wantLastActive: d(-50 * time.Second), wantCondition: below},
			},
		},
		{
			// Without an entry an External metric activates above 0 (KEDA's
			// default activationThreshold).
			name: "default activation value is 0", hpa: queue(), spec: stz(time.Minute), current: 0,
			steps: []actStep{
				{at: 0, external: []int64{0}, wantReplicas: 0, wantCondition: below},
				{at: 15 * time.Second, external: []int64{1}, wantReplicas: 1, wantActive: true, wantLastActive: d(15 * time.Second), wantCondition: above, wantEvents: ReasonActivated},
			},
		},
		{
			// Above a negative activation value with an empty queue, the
			// HPA proposes 0: activation still brings one replica.
			name: "activation brings at least one replica", hpa: queue(), spec: stz(time.Minute, act("queue", "-1")), current: 0,
			steps: []actStep{
				{at: 0, external: []int64{0}, wantReplicas: 1, wantActive: true, wantLastActive: d(0), wantCondition: above, wantEvents: ReasonActivated, wantLimited: "True/" + ReasonAboveActivation},
			},
		},
		{
			// A scale-up policy of 100% adds nothing to zero replicas; the
			// activation floor still brings one.
			name: "activation beats a percent policy from zero", spec: stz(time.Minute, act("queue", "5")), current: 0,
			hpa: func() *autoscalingv2.HorizontalPodAutoscaler {
				h := queue()
				h.Spec.Behavior.ScaleUp = &autoscalingv2.HPAScalingRules{Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}}}
				return h
			}(),
			steps: []actStep{
				{at: 0, external: []int64{10000}, wantReplicas: 1, wantActive: true, wantLastActive: d(0), wantCondition: above, wantEvents: ReasonActivated, wantLimited: "True/" + ReasonAboveActivation},
				// 1 → 2: the policy doubles, once the 0 → 1 is past its period.
				{at: 30 * time.Second, external: []int64{10000}, wantReplicas: 2, wantActive: true, wantLastActive: d(30 * time.Second), wantCondition: above},
			},
		},
		{
			// A failed read neither activates (the queue may be full) nor
			// lets the target go to zero (it may be busy); the state and
			// lastActiveTime stay as they were.
			name: "a failing metric never activates", hpa: queue(), spec: stz(time.Minute, act("queue", "5")), current: 0,
			steps: []actStep{
				{at: 0, failExternal: true, wantReplicas: 0, wantCondition: "False" + unknown},
				{at: 15 * time.Second, external: []int64{3000}, wantReplicas: 0, wantCondition: below},
			},
		},
		{
			name: "a failing metric never deactivates", hpa: queue(), spec: stz(time.Minute, act("queue", "5")), current: 3,
			state: &v1alpha1.ScaleToZeroStatus{Active: true, LastActiveTime: &metav1.Time{Time: now.Add(-time.Hour)}},
			steps: []actStep{
				{at: 0, failExternal: true, wantReplicas: 3, wantActive: true, wantLastActive: d(-time.Hour), wantCondition: "True" + unknown},
				{at: 15 * time.Second, failExternal: true, wantReplicas: 3, wantActive: true, wantLastActive: d(-time.Hour), wantCondition: "True" + unknown},
				// Answering again, idle since an hour: to zero at once.
				{at: 30 * time.Second, external: []int64{0}, wantReplicas: 0, wantLastActive: d(-time.Hour), wantCondition: below, wantEvents: ReasonDeactivated},
			},
		},
		{
			name: "a failing metric at zero keeps an active state but brings nothing", hpa: queue(), spec: stz(time.Minute, act("queue", "5")), current: 0,
			state: &v1alpha1.ScaleToZeroStatus{Active: true, LastActiveTime: &metav1.Time{Time: now.Add(-time.Minute)}},
			steps: []actStep{
				{at: 0, failExternal: true, wantReplicas: 0, wantActive: true, wantLastActive: d(-time.Minute), wantCondition: "True" + unknown},
			},
		},
		{
			// A CPU metric without an entry takes no part: busy pods do not
			// hold an idle queue's target up.
			name: "a per-pod metric without an entry takes no part", spec: stz(time.Minute, act("queue", "5")), current: 4,
			hpa:   anyScaleDown(hpa(ptr[int32](0), 10, cpuMetric(50), externalMetric("2"))),
			state: &v1alpha1.ScaleToZeroStatus{LastActiveTime: &metav1.Time{Time: now.Add(-time.Hour)}},
			steps: []actStep{
				{at: 0, external: []int64{0}, cpu: 1000, wantReplicas: 0, wantLastActive: d(-time.Hour), wantCondition: below},
			},
		},
		{
			// With an entry it does: 80% utilization is above 50 (the HPA
			// asks for 4 × 80/50 → 7); at 40% the HPA decides, 4 × 40/50 →
			// 4, and the cooldown starts.
			name: "a per-pod metric with an entry holds the target up", spec: stz(time.Minute, act("queue", "5"), act("cpu", "50")), current: 4,
			hpa:   anyScaleDown(hpa(ptr[int32](0), 10, cpuMetric(50), externalMetric("2"))),
			state: &v1alpha1.ScaleToZeroStatus{LastActiveTime: &metav1.Time{Time: now.Add(-time.Hour)}},
			steps: []actStep{
				{at: 0, external: []int64{0}, cpu: 800, wantReplicas: 7, wantActive: true, wantLastActive: d(0), wantCondition: above, wantEvents: ReasonActivated},
				{at: 15 * time.Second, external: []int64{0}, cpu: 400, wantReplicas: 4, wantLastActive: d(0), wantCondition: below, wantEvents: ReasonDeactivated},
			},
		},
		{
			// An Object metric with an AverageValue target compares the
			// object's value (7), not its share per pod (7/4 ≈ 2).
			name: "an Object metric compares its raw value", spec: stz(time.Minute, act("requests", "6")), current: 4,
			hpa:   anyScaleDown(hpa(ptr[int32](0), 10, objectMetric("2"))),
			state: &v1alpha1.ScaleToZeroStatus{LastActiveTime: &metav1.Time{Time: now.Add(-time.Hour)}},
			steps: []actStep{
				{at: 0, object: milli(7000), wantReplicas: 4, wantActive: true, wantLastActive: d(0), wantCondition: above, wantEvents: ReasonActivated},
				{at: 15 * time.Second, object: milli(6000), wantReplicas: 3, wantLastActive: d(0), wantCondition: below, wantEvents: ReasonDeactivated},
			},
		},
		{
			// Several series of one External metric are summed: 3 + 3 > 5.
			name: "an External metric compares its summed series", hpa: queue(), spec: stz(time.Minute, act("queue", "5")), current: 0,
			steps: []actStep{
				{at: 0, external: []int64{3000, 3000}, wantReplicas: 3, wantActive: true, wantLastActive: d(0), wantCondition: above, wantEvents: ReasonActivated},
			},
		},
		{
			// A negative reading (a wrapped lag sum, a broker bug) is
			// invalid, as a failed read: never "at or below activation".
			// Before, 5 replicas reading -4 went 5 -> 1 -> 0; now the HPA
			// does not scale down on it and the cooldown never ends on it.
			name: "a negative External reading is invalid, never idle", hpa: queue(), spec: stz(time.Minute, act("queue", "5")), current: 5,
			state: &v1alpha1.ScaleToZeroStatus{LastActiveTime: &metav1.Time{Time: now.Add(-time.Hour)}},
			steps: []actStep{
				{at: 0, external: []int64{-4000}, wantReplicas: 5, wantLastActive: d(-time.Hour), wantCondition: "False" + unknown},
				{at: 15 * time.Second, external: []int64{-4000}, wantReplicas: 5, wantLastActive: d(-time.Hour), wantCondition: "False" + unknown},
				// one negative series among good ones: the sum (6) hides it
				{at: 30 * time.Second, external: []int64{10000, -4000}, wantReplicas: 5, wantLastActive: d(-time.Hour), wantCondition: "False" + unknown},
				{at: 45 * time.Second, external: []int64{0}, wantReplicas: 0, wantLastActive: d(-time.Hour), wantCondition: below},
			},
		},
		{
			name: "a negative External reading at zero never activates", hpa: queue(), spec: stz(time.Minute, act("queue", "5")), current: 0,
			steps: []actStep{
				{at: 0, external: []int64{-4000}, wantReplicas: 0, wantCondition: "False" + unknown},
			},
		},
		{
			name: "a negative Object reading is invalid, never idle", spec: stz(time.Minute, act("requests", "6")), current: 4,
			hpa:   anyScaleDown(hpa(ptr[int32](0), 10, objectMetric("2"))),
			state: &v1alpha1.ScaleToZeroStatus{LastActiveTime: &metav1.Time{Time: now.Add(-time.Hour)}},
			steps: []actStep{
				{at: 0, object: milli(-4000), wantReplicas: 4, wantLastActive: d(-time.Hour), wantCondition: "False" + unknown},
			},
		},
		{
			// Never seen active, first seen running: the cooldown starts at
			// the first reconcile instead of cutting the target at once.
			name: "first seen running starts the cooldown", hpa: queue(), spec: stz(time.Minute, act("queue", "5")), current: 3,
			steps: []actStep{
				{at: 0, external: []int64{0}, wantReplicas: 1, wantLastActive: d(0), wantCondition: below},
				{at: time.Minute, external: []int64{0}, wantReplicas: 0, wantLastActive: d(0), wantCondition: below},
			},
		},
		{
			// Without behavior the 5-minute downscale window would hold 4;
			// the elapsed cooldown takes the target to zero regardless.
			name: "the elapsed cooldown goes past the downscale window", hpa: hpa(ptr[int32](0), 10, externalMetric("2")), spec: stz(time.Minute, act("queue", "5")), current: 4,
			state: &v1alpha1.ScaleToZeroStatus{LastActiveTime: &metav1.Time{Time: now.Add(-30 * time.Second)}},
			steps: []actStep{
				{at: 0, external: []int64{0}, wantReplicas: 4, wantLastActive: d(-30 * time.Second), wantCondition: below},
				{at: 30 * time.Second, external: []int64{0}, wantReplicas: 0, wantLastActive: d(-30 * time.Second), wantCondition: below, wantLimited: "False/" + ReasonCooldownElapsed},
			},
		},
		{
			// While the fallback is in force it decides: from zero to its
			// size, though no metric is known to be above its value.
			name: "fallback decides at zero", hpa: queue(), spec: stz(time.Minute, act("queue", "5")), current: 0,
			fallback: &v1alpha1.Fallback{FailureThreshold: 2, Replicas: 3},
			steps: []actStep{
				{at: 0, failExternal: true, wantReplicas: 0, wantCondition: "False" + unknown},
				{at: 15 * time.Second, failExternal: true, wantReplicas: 3, wantCondition: "False" + unknown},
				// Back and idle: the target is first seen running at 30s, the
				// cooldown counts from there.
				{at: 30 * time.Second, external: []int64{0}, wantReplicas: 1, wantLastActive: d(30 * time.Second), wantCondition: below},
				{at: 75 * time.Second, external: []int64{0}, wantReplicas: 1, wantLastActive: d(30 * time.Second), wantCondition: below},
				{at: 90 * time.Second, external: []int64{0}, wantReplicas: 0, wantLastActive: d(30 * time.Second), wantCondition: below},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pods := makePods(4)
			settings := DefaultSettings()
			settings.Gates.ScaleToZero = true // as for every MetricAutoscaler
			a := tc.hpa.DeepCopy()
			state := tc.state
			var fbState *v1alpha1.FallbackStatus
			current := tc.current
			var hist behavior.History
			for i, st := range tc.steps {
				src := objSource{&source{pods: pods, failExternal: st.failExternal, cpu: st.cpu, external: st.external}, st.object}
				at := now.Add(st.at)
				res := run(Input{
					Autoscaler: a, Scale: Scale{current, current, "app=web"}, Pods: pods, Metrics: src,
					History: hist, Settings: settings, Now: at, Fallback: tc.fallback, FallbackState: fbState,
					ScaleToZero: tc.spec, ScaleToZeroState: state,
				}, nil)
				if res.Replicas != st.wantReplicas {
					t.Errorf("step %d: replicas %d, want %d (reason %q, err %v)", i, res.Replicas, st.wantReplicas, res.Reason, res.Err)
				}
				s := res.ScaleToZero
				if s == nil {
					t.Fatalf("step %d: no status.scaleToZero with spec.scaleToZero set", i)
				}
				if s.Active != st.wantActive {
					t.Errorf("step %d: active %v, want %v", i, s.Active, st.wantActive)
				}
				switch {
				case st.wantLastActive == nil && s.LastActiveTime != nil:
					t.Errorf("step %d: lastActiveTime %v, want unset", i, s.LastActiveTime)
				case st.wantLastActive != nil && (s.LastActiveTime == nil || !s.LastActiveTime.Time.Equal(now.Add(*st.wantLastActive))):
					t.Errorf("step %d: lastActiveTime %v, want now%+v", i, s.LastActiveTime, *st.wantLastActive)
				}
				if got := condition(res.Status, ConditionActive); got != st.wantCondition {
					t.Errorf("step %d: Active condition %s, want %s", i, got, st.wantCondition)
				}
				var events []string
				for _, e := range res.Events {
					if e.Reason == ReasonActivated || e.Reason == ReasonDeactivated {
						events = append(events, e.Reason)
						if e.Message == "" {
							t.Errorf("step %d: %s event without a message", i, e.Reason)
						}
					}
				}
				if got := strings.Join(events, ","); got != st.wantEvents {
					t.Errorf("step %d: activation events %q, want %q", i, got, st.wantEvents)
				}
				if st.wantLimited != "" {
					if got := condition(res.Status, autoscalingv2.ScalingLimited); got != st.wantLimited {
						t.Errorf("step %d: ScalingLimited %s, want %s", i, got, st.wantLimited)
					}
				}
				if st.wantReason != "" && !strings.Contains(res.Reason, st.wantReason) {
					t.Errorf("step %d: reason %q, want it to say %q", i, res.Reason, st.wantReason)
				}
				if res.Rescaled && res.Replicas == 0 {
					if got := condition(res.Status, autoscalingv2.ScaledToZero); got != "True/ScaledToZero" {
						t.Errorf("step %d: ScaledToZero %s after scaling to zero", i, got)
					}
				}
				a.Status, hist, state, fbState, current = res.Status, res.History, res.ScaleToZero, res.Fallback, res.Replicas
			}
		})
	}
}

// TestAtZeroScaledBySomeoneElse: without spec.scaleToZero a target at zero
// the autoscaler did not scale there is left alone, as upstream; with it,
// zero is the autoscaler's to leave.
func TestAtZeroScaledBySomeoneElse(t *testing.T) {
	t.Parallel()
	pods := makePods(0)
	settings := DefaultSettings()
	settings.Gates.ScaleToZero = true
	in := Input{Autoscaler: hpa(ptr[int32](0), 10, externalMetric("2")), Scale: Scale{0, 0, "app=web"}, Pods: pods,
		Metrics: &source{pods: pods, external: []int64{10000}}, Settings: settings, Now: now}
	res := run(in, nil)
	if res.Replicas != 0 || res.ScaleToZero != nil || condition(res.Status, autoscalingv2.ScalingActive) != "False/ScalingDisabled" {
		t.Errorf("without scaleToZero: %d replicas, ScalingActive %s, state %+v; want left alone at zero",
			res.Replicas, condition(res.Status, autoscalingv2.ScalingActive), res.ScaleToZero)
	}
	in.ScaleToZero = stz(time.Minute, act("queue", "5"))
	res = run(in, nil)
	// 10/2 → 5, limited to 4 by the upstream rate without behavior.
	if res.Replicas != 4 || res.ScaleToZero == nil || !res.ScaleToZero.Active {
		t.Errorf("with scaleToZero: %d replicas, state %+v; want 4 and active", res.Replicas, res.ScaleToZero)
	}
}

// TestNoScaleToZeroDecidesAsUpstream: an object without spec.scaleToZero
// decides exactly as before, whatever status.scaleToZero holds.
func TestNoScaleToZeroDecidesAsUpstream(t *testing.T) {
	t.Parallel()
	pods := makePods(4)
	settings := DefaultSettings()
	settings.Gates.ScaleToZero = true
	stale := &v1alpha1.ScaleToZeroStatus{Active: true, LastActiveTime: &metav1.Time{Time: now.Add(-time.Hour)}}
	scaled := []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.ScaledToZero, Status: corev1.ConditionTrue}}
	for _, tc := range []struct {
		current int32
		src     *source
	}{
		{0, &source{pods: pods, external: []int64{3000}}},
		{4, &source{pods: pods, external: []int64{0}}},
		{4, &source{pods: pods, failExternal: true}},
	} {
		h := anyScaleDown(hpa(ptr[int32](0), 10, externalMetric("2")))
		h.Status.Conditions = scaled
		base := Input{Autoscaler: h, Scale: Scale{tc.current, tc.current, "app=web"}, Pods: pods, Metrics: tc.src, Settings: settings, Now: now}
		want := run(base, nil)
		withState := base
		withState.ScaleToZeroState = stale
		got := run(withState, nil)
		if got.ScaleToZero != nil {
			t.Errorf("status.scaleToZero %+v without spec.scaleToZero, want none", got.ScaleToZero)
		}
		if got.Replicas != want.Replicas || !apiequality.Semantic.DeepEqual(got.Status, want.Status) || !apiequality.Semantic.DeepEqual(got.Events, want.Events) {
			t.Errorf("a stored activation state changed the decision: %d %+v, want %d %+v", got.Replicas, got.Status, want.Replicas, want.Status)
		}
	}
}

// TestActivationDryRun: a dry run reports the activation, and the target
// stays at zero.
func TestActivationDryRun(t *testing.T) {
	t.Parallel()
	pods := makePods(0)
	settings := DefaultSettings()
	settings.Gates.ScaleToZero = true
	in := Input{Autoscaler: hpa(ptr[int32](0), 10, externalMetric("2")), Scale: Scale{0, 0, "app=web"}, Pods: pods,
		Metrics: &source{pods: pods, external: []int64{10000}}, Settings: settings, Now: now,
		ScaleToZero: stz(time.Minute, act("queue", "5"))}
	plan := Decide(t.Context(), in)
	if !plan.Rescale || plan.DesiredReplicas != 4 {
		t.Fatalf("plan: rescale %v to %d, want 4", plan.Rescale, plan.DesiredReplicas)
	}
	res := plan.FinishDryRun()
	if res.Replicas != 0 || res.Rescaled || res.Status.DesiredReplicas != 4 || res.ScaleToZero == nil || !res.ScaleToZero.Active {
		t.Errorf("dry run: replicas %d rescaled %v desired %d state %+v; want 0 false 4 active", res.Replicas, res.Rescaled, res.Status.DesiredReplicas, res.ScaleToZero)
	}
}

// TestActivationIsPure: Decide leaves the stored state it is given alone.
func TestActivationIsPure(t *testing.T) {
	t.Parallel()
	pods := makePods(4)
	settings := DefaultSettings()
	settings.Gates.ScaleToZero = true
	last := metav1.NewTime(now.Add(-time.Hour))
	state := &v1alpha1.ScaleToZeroStatus{LastActiveTime: &last}
	in := Input{Autoscaler: anyScaleDown(hpa(ptr[int32](0), 10, externalMetric("2"))), Scale: Scale{4, 4, "app=web"}, Pods: pods,
		Metrics: &source{pods: pods, external: []int64{10000}}, Settings: settings, Now: now,
		ScaleToZero: stz(time.Minute, act("queue", "5")), ScaleToZeroState: state}
	a, b := run(in, nil), run(in, nil)
	if state.Active || !state.LastActiveTime.Equal(&last) {
		t.Errorf("Decide changed the stored state: %+v", state)
	}
	if !apiequality.Semantic.DeepEqual(a.ScaleToZero, b.ScaleToZero) || a.Replicas != b.Replicas {
		t.Errorf("two runs on the same input differ: %+v vs %+v", a.ScaleToZero, b.ScaleToZero)
	}
}

// TestActivationRecordsWhatItDecides: where activation or the cooldown
// overrides the HPA's proposal (4 messages at 2 per pod ask for 2, but 4 is
// not above the activation value 5), the recommendation that stabilization
// remembers is the size decided, 0, not the HPA's 2: a later activation
// from zero must not be pulled up by a proposal that never applied.
func TestActivationRecordsWhatItDecides(t *testing.T) {
	t.Parallel()
	pods := makePods(4)
	settings := DefaultSettings()
	settings.Gates.ScaleToZero = true
	for _, tc := range []struct {
		name    string
		current int32
		state   *v1alpha1.ScaleToZeroStatus
	}{
		{"held at zero", 0, nil},
		{"cooldown elapsed", 4, &v1alpha1.ScaleToZeroStatus{LastActiveTime: &metav1.Time{Time: now.Add(-time.Hour)}}},
	} {
		in := Input{Autoscaler: hpa(ptr[int32](0), 10, externalMetric("2")), Scale: Scale{tc.current, tc.current, "app=web"}, Pods: pods,
			Metrics: &source{pods: pods, external: []int64{4000}}, Settings: settings, Now: now,
			ScaleToZero: stz(time.Minute, act("queue", "5")), ScaleToZeroState: tc.state}
		res := run(in, nil)
		recs := res.History.Recommendations
		if res.Replicas != 0 || len(recs) == 0 || recs[len(recs)-1].Replicas != 0 {
			t.Errorf("%s: %d replicas, recommendations %+v; want 0 and a last recommendation of 0", tc.name, res.Replicas, recs)
		}
	}
}

// TestActivationConditionTimesHold: a ScalingLimited condition that the
// cooldown (or activation) sets again at each reconcile keeps its
// transition time, though stabilization rewrites it in between.
func TestActivationConditionTimesHold(t *testing.T) {
	t.Parallel()
	pods := makePods(4)
	settings := DefaultSettings()
	settings.Gates.ScaleToZero = true
	for _, tc := range []struct {
		name    string
		current int32
		queue   int64
		reason  string
	}{
		{"cooling down", 1, 0, ReasonCoolingDown},
		{"held at zero", 0, 4000, ReasonBelowActivation},
	} {
		a := anyScaleDown(hpa(ptr[int32](0), 10, externalMetric("2")))
		state := &v1alpha1.ScaleToZeroStatus{LastActiveTime: &metav1.Time{Time: now}}
		var first metav1.Time
		for i := range 3 {
			res := run(Input{Autoscaler: a, Scale: Scale{tc.current, tc.current, "app=web"}, Pods: pods,
				Metrics: &source{pods: pods, external: []int64{tc.queue}}, Settings: settings, Now: now.Add(time.Duration(i) * 15 * time.Second),
				ScaleToZero: stz(time.Hour, act("queue", "5")), ScaleToZeroState: state}, nil)
			var c *autoscalingv2.HorizontalPodAutoscalerCondition
			for j := range res.Status.Conditions {
				if res.Status.Conditions[j].Type == autoscalingv2.ScalingLimited {
					c = &res.Status.Conditions[j]
				}
			}
			if c == nil || c.Status != corev1.ConditionTrue || c.Reason != tc.reason {
				t.Fatalf("%s, reconcile %d: ScalingLimited %+v, want True/%s", tc.name, i, c, tc.reason)
			}
			if i == 0 {
				first = c.LastTransitionTime
			} else if !c.LastTransitionTime.Equal(&first) {
				t.Errorf("%s, reconcile %d: ScalingLimited moved from %v to %v", tc.name, i, first, c.LastTransitionTime)
			}
			a.Status, state = res.Status, res.ScaleToZero
		}
	}
}

// TestPerPodMetricsSitOutAtZero: at zero a per-pod metric neither activates
// the target (the test source answers for pods that a real cluster would
// not have) nor, failing, hides the state of the metrics that count.
func TestPerPodMetricsSitOutAtZero(t *testing.T) {
	t.Parallel()
	pods := makePods(4)
	settings := DefaultSettings()
	settings.Gates.ScaleToZero = true
	for _, src := range []*source{
		{pods: pods, cpu: 900, external: []int64{0}},
		{pods: pods, failCPU: true, external: []int64{0}},
	} {
		res := run(Input{Autoscaler: hpa(ptr[int32](0), 10, cpuMetric(50), externalMetric("2")), Scale: Scale{0, 0, "app=web"}, Pods: pods,
			Metrics: src, Settings: settings, Now: now, ScaleToZero: stz(time.Minute, act("queue", "5"), act("cpu", "20"))}, nil)
		if res.Replicas != 0 || res.ScaleToZero.Active {
			t.Errorf("cpu %d (fails: %v) at zero: %d replicas, active %v; want 0, inactive", src.cpu, src.failCPU, res.Replicas, res.ScaleToZero.Active)
		}
		if got := condition(res.Status, ConditionActive); got != "False/"+ReasonBelowActivation {
			t.Errorf("cpu %d (fails: %v) at zero: Active condition %s, want False/%s", src.cpu, src.failCPU, got, ReasonBelowActivation)
		}
	}
}
