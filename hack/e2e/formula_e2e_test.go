//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
)

// TestFormulaScalesOnTwoQueues: a MetricAutoscaler whose spec.formula is
// jobs + 2 × orders, jobs a Redis list and orders a RabbitMQ queue (the
// development backends' e2e queues, read through the adapter and the
// aggregator), at 10 per replica. The Deployment follows the composite:
// 20 jobs and 15 orders → 50 → 5 replicas; the list drained → 30 → 3. The
// status carries each input's value and the composite, the inputs propose
// nothing. RabbitMQ stopped, the formula fails: the Deployment keeps its
// size with ScalingActive False/FailedEvaluateFormula, although the list
// alone would scale it down; started again and drained, it goes to 1.
func TestFormulaScalesOnTwoQueues(t *testing.T) {
	needAutoscaler(t)
	ctx := context.Background()
	running, err := cluster.runningBackends()
	if err != nil {
		t.Fatal(err)
	}
	jobs, orders := queueBackendOf(t, "redis"), queueBackendOf(t, "rabbitmq")
	for _, b := range []queueBackend{jobs, orders} {
		if !slices.Contains(running, b.name) {
			t.Fatalf("the cluster runs backends %v, not %s; restart it with hack/cluster.sh down && hack/cluster.sh up", running, b.name)
		}
		b.drain(ctx, t)
	}
	t.Cleanup(func() {
		for _, b := range []queueBackend{jobs, orders} {
			b.drain(context.Background(), t)
		}
	})

	ns := cluster.CreateNamespace(t, "formula")
	cluster.CreateDeployment(t, KwokDeployment(ns, "worker", 1, "100m", "10m"))
	cluster.WaitDeploymentReady(t, ns, "worker", 1, 60*time.Second)
	const syncPeriod = 2 * time.Second
	ma := newMA(ns, "worker", 1, 20, syncPeriod, jobs.metricSpec("10"), orders.metricSpec("10"))
	ma.Spec.Behavior = noScaleDownWindow()
	perPod := resource.MustParse("10")
	ma.Spec.Formula = &v1alpha1.Formula{
		Name:       "backlog",
		Inputs:     []v1alpha1.FormulaInput{{Name: "jobs", Metric: 0}, {Name: "orders", Metric: 1}},
		Expression: "jobs + 2 * orders",
		Target:     autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &perPod},
	}
	createMA(t, ma)

	start := time.Now()
	jobs.publish(ctx, t, 20)
	orders.publish(ctx, t, 15)
	waitReplicas(t, ns, "worker", 5, 60*time.Second)
	t.Logf("20 jobs and 15 orders: 5 replicas, %s after the publish", time.Since(start).Round(100*time.Millisecond))
	waitMAStatus(t, ns, "worker", 5)
	m, err := getMA(ctx, ns, "worker")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Status.MetricProposals; !slices.Equal(got, []int32{-1, -1, 5}) {
		t.Errorf("status.metricProposals %v, want [-1 -1 5]: the inputs propose nothing, the formula 5", got)
	}
	cur := m.Status.CurrentMetrics
	if len(cur) != 3 || cur[0].External == nil || cur[0].External.Current.Value == nil || cur[0].External.Current.Value.Value() != 20 ||
		cur[1].External == nil || cur[1].External.Current.Value == nil || cur[1].External.Current.Value.Value() != 15 ||
		cur[2].External == nil || cur[2].External.Metric.Name != "backlog" {
		t.Errorf("status.currentMetrics %+v, want jobs 20, orders 15 and the composite backlog", cur)
	}

	start = time.Now()
	jobs.drain(ctx, t)
	waitReplicas(t, ns, "worker", 3, 60*time.Second)
	t.Logf("the list drained, 15 orders: 3 replicas, %s later", time.Since(start).Round(100*time.Millisecond))

	t.Cleanup(func() {
		if err := cluster.StartBackend(context.Background(), orders.name); err != nil {
			t.Error(err)
		}
	})
	if err := cluster.StopBackend(ctx, orders.name); err != nil {
		t.Fatal(err)
	}
	var cond string
	Eventually(t, 30*time.Second, 500*time.Millisecond, "ScalingActive False/FailedEvaluateFormula", func(ctx context.Context) (bool, string, error) {
		if r, err := replicasOf(ctx, ns, "worker"); err == nil && r != 3 {
			return false, "", fmt.Errorf("the worker scaled to %d while an input of the formula failed", r)
		}
		m, err := getMA(ctx, ns, "worker")
		if err != nil {
			return false, "", err
		}
		c := findCond(m.Status.Conditions, "ScalingActive")
		if c == nil {
			return false, "no ScalingActive", nil
		}
		cond = c.Reason + ": " + c.Message
		return c.Status == "False" && c.Reason == "FailedEvaluateFormula" && strings.Contains(c.Message, "input orders (spec.metrics[1])"), cond, nil
	})
	for deadline := time.Now().Add(5 * syncPeriod); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if r, err := replicasOf(ctx, ns, "worker"); err == nil && r != 3 {
			t.Fatalf("the worker scaled to %d while an input of the formula failed", r)
		}
	}
	t.Logf("RabbitMQ down: 3 replicas held for %s; %.200s", 5*syncPeriod, cond)

	if err := cluster.StartBackend(ctx, orders.name); err != nil {
		t.Fatal(err)
	}
	orders.drain(ctx, t)
	start = time.Now()
	waitReplicas(t, ns, "worker", 1, 60*time.Second)
	t.Logf("RabbitMQ back and drained: 1 replica, %s later", time.Since(start).Round(100*time.Millisecond))
}
