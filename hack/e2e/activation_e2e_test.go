//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
)

// TestActivation scales a worker on KWOK to and from zero through
// spec.scaleToZero, on a queue depth pushed to the adapter: at zero with 3
// messages (activation value 5; the HPA alone would want 1) it stays at
// zero; 25 messages bring it up (3 replicas at 10 per pod) with an
// Activated event; the queue emptied, it keeps one replica for the cooldown
// (30s, counted from the last reconcile that saw the queue above 5) — also
// across an autoscaler restart, which must not reset the clock — and then
// goes to zero, with a Deactivated event and a rescale saying why. The
// status, the Active condition and `kubectl get mas -o wide` show the state.
func TestActivation(t *testing.T) {
	needAutoscaler(t)
	ctx := context.Background()
	start := time.Now()
	ns := cluster.CreateNamespace(t, "activation")
	queue := "activation-" + ns
	const (
		cooldown   = 30 * time.Second
		activation = 5
		perPod     = 10
	)
	q := &pushedQueue{t: t, queue: queue}
	q.set(3)
	stop := q.keepPushing()
	defer stop()

	cluster.CreateDeployment(t, KwokDeployment(ns, "worker", 0, "100m", "10m"))
	ma := newMA(ns, "worker", 0, 10, time.Second, queueSpec(queue, fmt.Sprint(perPod)))
	ma.Spec.Behavior = noScaleDownWindow()
	ma.Spec.ScaleToZero = &v1alpha1.ScaleToZero{
		CooldownPeriod: &metav1.Duration{Duration: cooldown},
		Activation:     []v1alpha1.MetricActivation{{Metric: "queue_messages_ready", Value: resource.MustParse(fmt.Sprint(activation))}},
	}
	createMA(t, ma)

	// At zero, 3 messages: the metric is read (the state is written) and
	// the target stays at zero over several reconciles.
	Eventually(t, 30*time.Second, 200*time.Millisecond, "the first reconcile at zero", func(ctx context.Context) (bool, string, error) {
		m, err := getMA(ctx, ns, "worker")
		if err != nil {
			return false, "", err
		}
		c := findCond(m.Status.Conditions, "Active")
		return m.Status.ScaleToZero != nil && c != nil, fmt.Sprintf("status %+v", m.Status.ScaleToZero), nil
	})
	held := time.Now()
	for time.Since(held) < 5*time.Second {
		if r, err := replicasOf(ctx, ns, "worker"); err != nil || r != 0 {
			t.Fatalf("3 messages, activation value %d: the worker went to %d (%v)", activation, r, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	m := mustGetMA(t, ns)
	if s := m.Status.ScaleToZero; s.Active || s.LastActiveTime != nil {
		t.Errorf("status.scaleToZero %+v at zero below the activation value, want inactive, never active", s)
	}
	if c := findCond(m.Status.Conditions, "Active"); c.Status != corev1.ConditionFalse || c.Reason != "BelowActivation" {
		t.Errorf("Active condition %s/%s, want False/BelowActivation", c.Status, c.Reason)
	}
	if c := findCond(m.Status.Conditions, "ScalingLimited"); c == nil || c.Reason != "BelowActivation" {
		t.Errorf("ScalingLimited %+v, want it to say activation held the HPA's 1 replica", c)
	}
	if col := activeColumn(t, ns); col != "false" {
		t.Errorf("kubectl get mas -o wide: ACTIVE %q, want false", col)
	}
	t.Logf("held at zero with 3 messages for 5s: %s", findCond(m.Status.Conditions, "ScalingLimited").Message)

	// 25 messages: above 5, the HPA sizes it: ceil(25/10) = 3.
	q.set(25)
	pushed := time.Now()
	waitReplicas(t, ns, "worker", 3, 30*time.Second)
	t.Logf("activated: 0 → 3 replicas %s after the push", time.Since(pushed).Round(100*time.Millisecond))
	waitMAStatus(t, ns, "worker", 3)
	m = mustGetMA(t, ns)
	if s := m.Status.ScaleToZero; !s.Active || s.LastActiveTime == nil {
		t.Errorf("status.scaleToZero %+v after activation, want active with lastActiveTime", s)
	}
	if c := findCond(m.Status.Conditions, "Active"); c == nil || c.Status != corev1.ConditionTrue || !strings.Contains(c.Message, "above its activation value 5") {
		t.Errorf("Active condition %+v, want True naming the value", c)
	}
	if col := activeColumn(t, ns); col != "true" {
		t.Errorf("kubectl get mas -o wide: ACTIVE %q, want true", col)
	}
	if n := fallbackEvents(t, ns, "Activated"); n != 1 {
		t.Errorf("%d Activated events, want 1", n)
	}

	// Empty: the HPA asks for 0; the target keeps 1 until the cooldown
	// from the last reconcile that saw 25 has passed.
	q.set(0)
	waitReplicas(t, ns, "worker", 1, 30*time.Second)
	// The scale is written before the status: wait for the status too.
	waitMAStatus(t, ns, "worker", 1)
	m = mustGetMA(t, ns)
	last := m.Status.ScaleToZero.LastActiveTime
	if m.Status.ScaleToZero.Active || last == nil {
		t.Fatalf("status.scaleToZero %+v with an empty queue, want inactive with lastActiveTime", m.Status.ScaleToZero)
	}
	if c := findCond(m.Status.Conditions, "ScalingLimited"); c == nil || c.Reason != "CoolingDown" {
		t.Errorf("ScalingLimited %+v during the cooldown, want CoolingDown", c)
	}
	t.Logf("cooling down: last active at %s (stored to the second)", last.UTC().Format(time.RFC3339))

	// A restart during the cooldown: the new autoscaler counts from the
	// stored lastActiveTime. A lost state would restart the clock at the
	// new autoscaler's first reconcile ("first seen running"), a few
	// seconds later: the check below sees a changed lastActiveTime.
	time.Sleep(time.Until(last.Add(3 * time.Second)))
	restartBegan := time.Now()
	restartAutoscaler(t)
	t.Logf("autoscaler restarted in %s", time.Since(restartBegan).Round(100*time.Millisecond))

	var zeroAt time.Time
	var early string
	Eventually(t, cooldown+45*time.Second, 100*time.Millisecond, "the worker at zero after the cooldown", func(ctx context.Context) (bool, string, error) {
		r, err := replicasOf(ctx, ns, "worker")
		if err != nil {
			return false, "", err
		}
		if r == 0 {
			zeroAt = time.Now()
			if zeroAt.Before(last.Add(cooldown)) && early == "" {
				early = fmt.Sprintf("at zero %s after the last activity, before the %s cooldown", zeroAt.Sub(last.Time), cooldown)
			}
			return true, "", nil
		}
		if r != 1 && early == "" {
			early = fmt.Sprintf("%d replicas during the cooldown, want 1", r)
		}
		return false, fmt.Sprintf("%d replica, %s since the last activity", r, time.Since(last.Time).Round(time.Second)), nil
	})
	if early != "" {
		t.Error(early)
	}
	t.Logf("to zero %s after the stored last activity (cooldown %s)", zeroAt.Sub(last.Time).Round(100*time.Millisecond), cooldown)
	waitMAStatus(t, ns, "worker", 0)
	m = mustGetMA(t, ns)
	if s := m.Status.ScaleToZero; s.Active || s.LastActiveTime == nil || !s.LastActiveTime.Equal(last) {
		t.Errorf("status.scaleToZero %+v after the restart and cooldown, want inactive, last active still %s", s, last.UTC().Format(time.RFC3339))
	}
	if c := findCond(m.Status.Conditions, "ScaledToZero"); c == nil || c.Status != corev1.ConditionTrue {
		t.Errorf("ScaledToZero %+v, want True", c)
	}
	if col := activeColumn(t, ns); col != "false" {
		t.Errorf("kubectl get mas -o wide: ACTIVE %q, want false", col)
	}
	if n := fallbackEvents(t, ns, "Deactivated"); n != 1 {
		t.Errorf("%d Deactivated events, want 1", n)
	}
	if msg := rescaleTo0(t, ns); !strings.Contains(msg, "cooldown") {
		t.Errorf("the rescale to zero says %q, want the cooldown as its reason", msg)
	}
	out, err := cluster.Kubectl(ctx, "describe", "mas", "worker", "-n", ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Activated", "Deactivated", "Scale To Zero", "Last Active Time"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl describe mas does not show %q:\n%s", want, out)
		}
	}
	t.Logf("TestActivation took %s", time.Since(start).Round(time.Second))
}

// pushedQueue keeps pushing a queue's depth, so that the adapter's
// --max-age never ages it out while a phase waits.
type pushedQueue struct {
	t     *testing.T
	queue string
	mu    sync.Mutex
	depth int
}

func (q *pushedQueue) set(depth int) {
	q.mu.Lock()
	q.depth = depth
	q.mu.Unlock()
	pushDepth(q.t, q.queue, depth)
}

func (q *pushedQueue) keepPushing() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(10 * time.Second):
			}
			q.mu.Lock()
			d := q.depth
			q.mu.Unlock()
			if err := cluster.Push(ctx, fmt.Sprintf("queue_messages_ready{queue=%q} %d\n", q.queue, d)); err != nil && ctx.Err() == nil {
				q.t.Errorf("pushing the queue depth again: %v", err)
			}
		}
	}()
	return func() { cancel(); <-done }
}

func mustGetMA(t *testing.T, ns string) *v1alpha1.MetricAutoscaler {
	t.Helper()
	m, err := getMA(context.Background(), ns, "worker")
	if err != nil {
		t.Fatal(err)
	}
	if m.Status.ScaleToZero == nil {
		t.Fatalf("no status.scaleToZero: %+v", m.Status)
	}
	return m
}

// activeColumn is the ACTIVE column of `kubectl get mas -o wide`, read at
// the header's offsets (TARGETS holds spaces).
func activeColumn(t *testing.T, ns string) string {
	t.Helper()
	out, err := cluster.Kubectl(context.Background(), "get", "mas", "worker", "-n", ns, "-o", "wide")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("kubectl get mas -o wide:\n%s", out)
	}
	header, row := lines[0], lines[1]
	i := strings.Index(header, "ACTIVE")
	if i < 0 || i >= len(row) {
		t.Fatalf("no ACTIVE column in kubectl get mas -o wide:\n%s", out)
	}
	fields := strings.Fields(row[i:])
	if len(fields) == 0 {
		t.Fatalf("an empty ACTIVE column:\n%s", out)
	}
	return fields[0]
}

// rescaleTo0 is the message of the SuccessfulRescale event to size 0.
func rescaleTo0(t *testing.T, ns string) string {
	t.Helper()
	var msg string
	Eventually(t, 10*time.Second, 200*time.Millisecond, "the rescale to zero event", func(ctx context.Context) (bool, string, error) {
		l, err := cluster.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		for _, e := range l.Items {
			if e.Reason == "SuccessfulRescale" && strings.HasPrefix(e.Message, "New size: 0;") {
				msg = e.Message
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d events", len(l.Items)), nil
	})
	return msg
}
