package decision

import (
	"slices"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/behavior"
)

// fbStep is one reconcile of a fallback case: what the metrics answer and
// what must come out. The target's size carries from step to step.
type fbStep struct {
	failExternal, failCPU bool
	cpu                   int64 // milli-CPU per pod (requests are 1 CPU)
	external              []int64
	wantReplicas          int32
	wantActive            bool
	wantFailures          []int32 // failures per failing metric, in spec order
	wantEvent             string  // a fallback event reason this step emits
}

// anyScaleDown lets a scale-down happen at once, so that a case shows the
// fallback size and not the downscale window.
func anyScaleDown(h *autoscalingv2.HorizontalPodAutoscaler) *autoscalingv2.HorizontalPodAutoscaler {
	h.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{
		StabilizationWindowSeconds: ptr[int32](0),
		Policies:                   []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}},
	}}
	return h
}

func TestFallback(t *testing.T) {
	t.Parallel()
	fb := func(threshold, replicas int32, b v1alpha1.FallbackBehavior) *v1alpha1.Fallback {
		return &v1alpha1.Fallback{FailureThreshold: threshold, Replicas: replicas, Behavior: b}
	}
	down := func(n int) []fbStep { // n failing reconciles of the queue metric
		s := make([]fbStep, n)
		for i := range s {
			s[i] = fbStep{failExternal: true}
		}
		return s
	}
	// withSteps fills in the expectations of a run of failures.
	withSteps := func(steps []fbStep, want ...fbStep) []fbStep {
		for i := range want {
			w := want[i]
			w.failExternal = steps[i].failExternal || w.failExternal
			steps[i] = w
		}
		return steps
	}
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(d)} }

	cases := []struct {
		name     string
		hpa      *autoscalingv2.HorizontalPodAutoscaler
		fallback *v1alpha1.Fallback
		state    *v1alpha1.FallbackStatus
		status   []autoscalingv2.HorizontalPodAutoscalerCondition
		gates    Gates
		current  int32
		steps    []fbStep
	}{
		{
			// Below the threshold a failing metric keeps the size, as
			// upstream; the third failure starts the fallback.
			name: "threshold", hpa: anyScaleDown(hpa(nil, 20, externalMetric("30"))), fallback: fb(3, 7, ""), current: 4,
			steps: withSteps(down(4),
				fbStep{wantReplicas: 4, wantFailures: []int32{1}},
				fbStep{wantReplicas: 4, wantFailures: []int32{2}},
				fbStep{wantReplicas: 7, wantActive: true, wantFailures: []int32{3}, wantEvent: ReasonFallback},
				fbStep{wantReplicas: 7, wantActive: true, wantFailures: []int32{4}}),
		},
		{
			name: "static goes down too", hpa: anyScaleDown(hpa(nil, 20, externalMetric("30"))), fallback: fb(1, 2, v1alpha1.FallbackStatic), current: 6,
			steps: []fbStep{{failExternal: true, wantReplicas: 2, wantActive: true, wantFailures: []int32{1}, wantEvent: ReasonFallback}},
		},
		{
			name: "currentReplicas keeps the size", hpa: anyScaleDown(hpa(nil, 20, externalMetric("30"))), fallback: fb(1, 2, v1alpha1.FallbackCurrentReplicas), current: 6,
			steps: []fbStep{{failExternal: true, wantReplicas: 6, wantActive: true, wantFailures: []int32{1}, wantEvent: ReasonFallback}},
		},
		{
			name: "currentReplicasIfHigher keeps a larger size", hpa: anyScaleDown(hpa(nil, 20, externalMetric("30"))), fallback: fb(1, 2, v1alpha1.FallbackCurrentReplicasIfHigher), current: 6,
			steps: []fbStep{{failExternal: true, wantReplicas: 6, wantActive: true, wantFailures: []int32{1}, wantEvent: ReasonFallback}},
		},
		{
			name: "currentReplicasIfHigher raises a smaller size", hpa: anyScaleDown(hpa(nil, 20, externalMetric("30"))), fallback: fb(1, 9, v1alpha1.FallbackCurrentReplicasIfHigher), current: 6,
			steps: []fbStep{{failExternal: true, wantReplicas: 9, wantActive: true, wantFailures: []int32{1}, wantEvent: ReasonFallback}},
		},
		{
			name: "currentReplicasIfLower lowers a larger size", hpa: anyScaleDown(hpa(nil, 20, externalMetric("30"))), fallback: fb(1, 2, v1alpha1.FallbackCurrentReplicasIfLower), current: 6,
			steps: []fbStep{{failExternal: true, wantReplicas: 2, wantActive: true, wantFailures: []int32{1}, wantEvent: ReasonFallback}},
		},
		{
			name: "currentReplicasIfLower keeps a smaller size", hpa: anyScaleDown(hpa(nil, 20, externalMetric("30"))), fallback: fb(1, 9, v1alpha1.FallbackCurrentReplicasIfLower), current: 6,
			steps: []fbStep{{failExternal: true, wantReplicas: 6, wantActive: true, wantFailures: []int32{1}, wantEvent: ReasonFallback}},
		},
		{
			// cpu answers 8 (4 pods at 100% of 50): above the fallback size,
			// the healthy metric wins.
			name: "partial failure: a healthy metric above the fallback wins", hpa: anyScaleDown(hpa(nil, 20, cpuMetric(50), externalMetric("30"))),
			fallback: fb(1, 5, ""), current: 4,
			steps: []fbStep{{failExternal: true, cpu: 1000, wantReplicas: 8, wantActive: true, wantFailures: []int32{1}, wantEvent: ReasonFallback}},
		},
		{
			// cpu answers 2: the fallback size is a floor, and the target may
			// go down to it (upstream would keep 6 while a metric fails).
			name: "partial failure: the fallback is a floor", hpa: anyScaleDown(hpa(nil, 20, cpuMetric(50), externalMetric("30"))),
			fallback: fb(1, 5, ""), current: 6,
			steps: []fbStep{{failExternal: true, cpu: 250, wantReplicas: 5, wantActive: true, wantFailures: []int32{1}, wantEvent: ReasonFallback}},
		},
		{
			// Both fail; each run is counted on its own.
			name: "every metric failing", hpa: anyScaleDown(hpa(nil, 20, cpuMetric(50), externalMetric("30"))),
			fallback: fb(2, 5, ""), current: 3,
			steps: []fbStep{
				{failExternal: true, failCPU: true, wantReplicas: 3, wantFailures: []int32{1, 1}},
				{failExternal: true, failCPU: true, wantReplicas: 5, wantActive: true, wantFailures: []int32{2, 2}, wantEvent: ReasonFallback},
				{failExternal: true, cpu: 250, wantReplicas: 5, wantActive: true, wantFailures: []int32{3}},
			},
		},
		{
			// The first answer ends the fallback: the queue (60 over 4 pods
			// at 30 each → 2) decides at once.
			name: "recovery ends it at once", hpa: anyScaleDown(hpa(nil, 20, externalMetric("30"))), fallback: fb(2, 8, ""), current: 4,
			steps: []fbStep{
				{failExternal: true, wantReplicas: 4, wantFailures: []int32{1}},
				{failExternal: true, wantReplicas: 8, wantActive: true, wantFailures: []int32{2}, wantEvent: ReasonFallback},
				{external: []int64{60000}, wantReplicas: 2, wantEvent: ReasonFallbackEnded},
				{failExternal: true, wantReplicas: 2, wantFailures: []int32{1}},
			},
		},
		{
			name: "max applies", hpa: anyScaleDown(hpa(nil, 10, externalMetric("30"))), fallback: fb(1, 50, ""), current: 8,
			steps: []fbStep{{failExternal: true, wantReplicas: 10, wantActive: true, wantFailures: []int32{1}, wantEvent: ReasonFallback}},
		},
		{
			name: "min applies", hpa: anyScaleDown(hpa(ptr[int32](3), 10, externalMetric("30"))), fallback: fb(1, 0, ""), current: 8,
			steps: []fbStep{{failExternal: true, wantReplicas: 3, wantActive: true, wantFailures: []int32{1}, wantEvent: ReasonFallback}},
		},
		{
			// Without behavior the upstream rate limit (double, at least 4)
			// applies to the way up: 2 → 4 → 8 → 10.
			name: "scale-up rate applies", hpa: hpa(nil, 20, externalMetric("30")), fallback: fb(1, 10, ""), current: 2,
			steps: []fbStep{
				{failExternal: true, wantReplicas: 4, wantActive: true, wantFailures: []int32{1}, wantEvent: ReasonFallback},
				{failExternal: true, wantReplicas: 8, wantActive: true, wantFailures: []int32{2}},
				{failExternal: true, wantReplicas: 10, wantActive: true, wantFailures: []int32{3}},
			},
		},
		{
			// Without behavior the 5-minute downscale window holds a
			// fallback below the current size, as it holds any proposal.
			name: "downscale window applies", hpa: hpa(nil, 20, externalMetric("30")), fallback: fb(1, 2, ""), current: 6,
			steps: []fbStep{{failExternal: true, wantReplicas: 6, wantActive: true, wantFailures: []int32{1}, wantEvent: ReasonFallback}},
		},
		{
			// A restart or failover: the count goes on from the status.
			name: "restart continues the stored count", hpa: anyScaleDown(hpa(nil, 20, externalMetric("30"))), fallback: fb(3, 7, ""), current: 4,
			state: &v1alpha1.FallbackStatus{Metrics: []v1alpha1.MetricFailure{{Index: 0, Name: "External queue", Failures: 2, Since: at(-time.Minute)}}},
			steps: []fbStep{{failExternal: true, wantReplicas: 7, wantActive: true, wantFailures: []int32{3}, wantEvent: ReasonFallback}},
		},
		{
			// Restarted during fallback: no second start event, and the
			// fallback goes on.
			name: "restart during fallback", hpa: anyScaleDown(hpa(nil, 20, externalMetric("30"))), fallback: fb(3, 7, ""), current: 7,
			state: &v1alpha1.FallbackStatus{Active: true, Since: at(-time.Minute), Metrics: []v1alpha1.MetricFailure{{Index: 0, Name: "External queue", Failures: 5, Since: at(-2 * time.Minute)}}},
			steps: []fbStep{{failExternal: true, wantReplicas: 7, wantActive: true, wantFailures: []int32{6}}},
		},
		{
			// The stored run was counted for another metric at index 0.
			name: "an edited metric starts afresh", hpa: anyScaleDown(hpa(nil, 20, externalMetric("30"))), fallback: fb(3, 7, ""), current: 4,
			state: &v1alpha1.FallbackStatus{Metrics: []v1alpha1.MetricFailure{{Index: 0, Name: "External other", Failures: 2, Since: at(-time.Minute)}}},
			steps: []fbStep{{failExternal: true, wantReplicas: 4, wantFailures: []int32{1}}},
		},
		{
			// Scaled to zero by the autoscaler (minReplicas 0): the metrics
			// are read, and the fallback brings the target up.
			name: "at zero, scaled to zero by us", hpa: hpa(ptr[int32](0), 20, externalMetric("30")), fallback: fb(1, 3, ""), current: 0,
			gates:  Gates{ScaleToZero: true},
			status: []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.ScaledToZero, Status: corev1.ConditionTrue}},
			steps:  []fbStep{{failExternal: true, wantReplicas: 3, wantActive: true, wantFailures: []int32{1}, wantEvent: ReasonFallback}},
		},
		{
			name: "at zero, currentReplicas stays at zero", hpa: hpa(ptr[int32](0), 20, externalMetric("30")), fallback: fb(1, 3, v1alpha1.FallbackCurrentReplicas), current: 0,
			gates:  Gates{ScaleToZero: true},
			status: []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.ScaledToZero, Status: corev1.ConditionTrue}},
			steps:  []fbStep{{failExternal: true, wantReplicas: 0, wantActive: true, wantFailures: []int32{1}, wantEvent: ReasonFallback}},
		},
		{
			// Scaled to zero by someone else: scaling is off, no metric is
			// read, the stored count stays as it was.
			name: "at zero, scaled to zero by someone else", hpa: hpa(nil, 20, externalMetric("30")), fallback: fb(1, 3, ""), current: 0,
			state: &v1alpha1.FallbackStatus{Metrics: []v1alpha1.MetricFailure{{Index: 0, Name: "External queue", Failures: 2, Since: at(-time.Minute), LastError: "unavailable"}}},
			steps: []fbStep{{failExternal: true, wantReplicas: 0, wantFailures: []int32{2}}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pods := makePods(4)
			settings := DefaultSettings()
			settings.Gates.ScaleToZero = tc.gates.ScaleToZero
			a := tc.hpa.DeepCopy()
			a.Status.Conditions = tc.status
			state := tc.state
			current := tc.current
			var hist behavior.History
			for i, st := range tc.steps {
				src := &source{pods: pods, failExternal: st.failExternal, failCPU: st.failCPU, cpu: st.cpu, external: st.external}
				at := now.Add(time.Duration(i) * 15 * time.Second)
				res := run(Input{
					Autoscaler: a, Scale: Scale{current, current, "app=web"}, Pods: pods, Metrics: src,
					History: hist, Settings: settings, Now: at, Fallback: tc.fallback, FallbackState: state,
				}, nil)
				if res.Replicas != st.wantReplicas {
					t.Errorf("step %d: replicas %d, want %d (reason %q, err %v)", i, res.Replicas, st.wantReplicas, res.Reason, res.Err)
				}
				if res.Fallback == nil {
					t.Fatalf("step %d: no fallback status with spec.fallback set", i)
				}
				if res.Fallback.Active != st.wantActive {
					t.Errorf("step %d: active %v, want %v", i, res.Fallback.Active, st.wantActive)
				}
				var failures []int32
				for _, f := range res.Fallback.Metrics {
					failures = append(failures, f.Failures)
					if f.Since == nil || f.LastError == "" {
						t.Errorf("step %d: metric %d failure without since or error: %+v", i, f.Index, f)
					}
				}
				if !slices.Equal(failures, st.wantFailures) {
					t.Errorf("step %d: failures %v, want %v", i, failures, st.wantFailures)
				}
				wantCond := "True/" + ReasonFallback
				if !st.wantActive {
					wantCond = "False/" + ReasonMetricsAnswer
					if len(st.wantFailures) > 0 {
						wantCond = "False/" + ReasonBelowThreshold
					}
				}
				if st.failExternal && current == 0 && !tc.gates.ScaleToZero {
					wantCond = "absent" // no metric was read
				}
				if got := condition(res.Status, ConditionFallback); got != wantCond {
					t.Errorf("step %d: Fallback condition %s, want %s", i, got, wantCond)
				}
				var got []string
				for _, e := range res.Events {
					if e.Reason == ReasonFallback || e.Reason == ReasonFallbackEnded {
						got = append(got, e.Reason)
						if e.Reason == ReasonFallback && (!strings.Contains(e.Message, "External queue") || !strings.Contains(e.Message, "since")) {
							t.Errorf("step %d: event %q does not name the metric and since when", i, e.Message)
						}
					}
				}
				want := []string(nil)
				if st.wantEvent != "" {
					want = []string{st.wantEvent}
				}
				if strings.Join(got, ",") != strings.Join(want, ",") {
					t.Errorf("step %d: fallback events %v, want %v", i, got, want)
				}
				if res.Fallback.Active && (res.Fallback.Since == nil || (tc.state != nil && tc.state.Active && !res.Fallback.Since.Equal(tc.state.Since))) {
					t.Errorf("step %d: fallback since %v; a running fallback keeps its start", i, res.Fallback.Since)
				}
				a.Status, hist, state, current = res.Status, res.History, res.Fallback, res.Replicas
			}
		})
	}
}

// TestNoFallbackDecidesAsUpstream checks that an object without
// spec.fallback decides exactly as before, stored state or not.
func TestNoFallbackDecidesAsUpstream(t *testing.T) {
	t.Parallel()
	pods := makePods(4)
	stale := &v1alpha1.FallbackStatus{Active: true, Metrics: []v1alpha1.MetricFailure{{Index: 0, Name: "External queue", Failures: 9}}}
	for _, src := range []*source{
		{pods: pods, failExternal: true, cpu: 250},
		{pods: pods, failExternal: true, cpu: 1000},
		{pods: pods, external: []int64{10000}, cpu: 250},
	} {
		h := anyScaleDown(hpa(nil, 20, cpuMetric(50), externalMetric("30")))
		base := Input{Autoscaler: h, Scale: Scale{6, 6, "app=web"}, Pods: pods, Metrics: src, Settings: DefaultSettings(), Now: now}
		want := run(base, nil)
		withState := base
		withState.FallbackState = stale
		got := run(withState, nil)
		if got.Fallback != nil {
			t.Errorf("status.fallback %+v without spec.fallback, want none", got.Fallback)
		}
		if got.Replicas != want.Replicas || !apiequality.Semantic.DeepEqual(got.Status, want.Status) || !apiequality.Semantic.DeepEqual(got.Events, want.Events) {
			t.Errorf("a stored fallback state changed the decision: %d %+v, want %d %+v", got.Replicas, got.Status, want.Replicas, want.Status)
		}
	}
}

// TestFallbackDryRun checks that a dry run reports the fallback as it would
// act, and keeps the size.
func TestFallbackDryRun(t *testing.T) {
	t.Parallel()
	pods := makePods(4)
	in := Input{
		Autoscaler: anyScaleDown(hpa(nil, 20, externalMetric("30"))), Scale: Scale{4, 4, "app=web"}, Pods: pods,
		Metrics: &source{pods: pods, failExternal: true}, Settings: DefaultSettings(), Now: now,
		Fallback: &v1alpha1.Fallback{FailureThreshold: 1, Replicas: 8},
	}
	plan := Decide(t.Context(), in)
	if !plan.Rescale || plan.DesiredReplicas != 8 {
		t.Fatalf("plan: rescale %v to %d, want 8", plan.Rescale, plan.DesiredReplicas)
	}
	res := plan.FinishDryRun()
	if res.Replicas != 4 || res.Rescaled || res.Status.DesiredReplicas != 8 {
		t.Errorf("dry run: replicas %d rescaled %v desired %d, want 4 false 8", res.Replicas, res.Rescaled, res.Status.DesiredReplicas)
	}
	if res.Fallback == nil || !res.Fallback.Active {
		t.Errorf("dry run: fallback %+v, want active", res.Fallback)
	}
	if !strings.HasPrefix(res.Reason, "metrics failed") {
		t.Errorf("reason %q does not say the fallback decided", res.Reason)
	}
}

func TestFallbackSize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		behavior         v1alpha1.FallbackBehavior
		current, replica int32
		want             int32
	}{
		{"", 4, 2, 2},
		{v1alpha1.FallbackStatic, 4, 6, 6},
		{v1alpha1.FallbackCurrentReplicas, 4, 6, 4},
		{v1alpha1.FallbackCurrentReplicasIfHigher, 4, 6, 6},
		{v1alpha1.FallbackCurrentReplicasIfHigher, 8, 6, 8},
		{v1alpha1.FallbackCurrentReplicasIfLower, 4, 6, 4},
		{v1alpha1.FallbackCurrentReplicasIfLower, 8, 6, 6},
	} {
		if got := fallbackSize(&v1alpha1.Fallback{Replicas: tc.replica, Behavior: tc.behavior}, tc.current); got != tc.want {
			t.Errorf("%q at %d with replicas %d: %d, want %d", tc.behavior, tc.current, tc.replica, got, tc.want)
		}
	}
}
