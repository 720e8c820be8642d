//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// queueValue reads b's metric through the aggregator: the sum of its items (one per
// series the selector picks) and the raw answer.
func queueValue(ctx context.Context, ns string, b queueBackend) (int64, int, []byte, error) {
	body, err := adapterRawGet(ctx, cluster.Client, "/apis/external.metrics.k8s.io/v1beta1/namespaces/"+ns+"/"+b.metric,
		map[string]string{"labelSelector": labels.Set(b.selector).String()})
	if err != nil {
		return 0, adapterStatusCode(err), body, err
	}
	var l adapterMetricList
	if err := json.Unmarshal(body, &l); err != nil {
		return 0, http.StatusOK, body, err
	}
	var sum int64
	for _, it := range l.Items {
		sum += it.Value.MilliValue()
	}
	return sum / 1000, http.StatusOK, body, nil
}

// metricSpec is an External metric on b's e2e queue, perPod messages per
// replica.
func (b queueBackend) metricSpec(perPod string) autoscalingv2.MetricSpec {
	avg := resource.MustParse(perPod)
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: b.metric, Selector: &metav1.LabelSelector{MatchLabels: b.selector}},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &avg},
	}}
}

// TestQueueBackends: for each broker, through the aggregator, the External metric equals
// the depth the broker's own tools report; a MetricAutoscaler scales a Deployment on it;
// the broker stopped answers a 503 naming its provider within the provider's timeout and
// the autoscaler keeps its replicas with a failing condition; started again, the same
// adapter answers and the autoscaler scales back down.
func TestQueueBackends(t *testing.T) {
	needAutoscaler(t)
	running, err := cluster.runningBackends()
	if err != nil {
		t.Fatalf("reading the cluster's backends: %v", err)
	}
	var names []string
	for _, b := range queueBackends() {
		names = append(names, b.name)
	}
	sort.Strings(names)
	for _, n := range names {
		if !slices.Contains(running, n) {
			t.Fatalf("the cluster runs backends %v, not %s (hack/cluster.sh up --no-backends?); restart it with hack/cluster.sh down && hack/cluster.sh up", running, n)
		}
	}
	for _, b := range queueBackends() {
		t.Run(b.name, func(t *testing.T) { testQueueBackend(t, b) })
	}
}

func testQueueBackend(t *testing.T, b queueBackend) {
	ctx := context.Background()
	start := time.Now()
	ns := cluster.CreateNamespace(t, "q-"+b.name)
	const perPod, depth = 10, 30
	b.drain(ctx, t)
	b.publish(ctx, t, depth)
	if got := b.count(ctx, t); got != depth {
		t.Fatalf("after publishing %d, %s itself reports %d", depth, b.name, got)
	}

	Eventually(t, 30*time.Second, 300*time.Millisecond, fmt.Sprintf("%s to equal %d", b.metric, depth), func(ctx context.Context) (bool, string, error) {
		v, code, body, err := queueValue(ctx, ns, b)
		if err != nil {
			return false, fmt.Sprintf("%d %.300s", code, body), nil
		}
		return v == depth, fmt.Sprintf("value %d", v), nil
	})
	t.Logf("%s = %d through the aggregator, as %s reports, %s after the publish", b.metric, depth, b.name, time.Since(start).Round(100*time.Millisecond))

	spec := b.metricSpec(fmt.Sprint(perPod))
	cluster.CreateDeployment(t, KwokDeployment(ns, "worker", 1, "100m", "10m"))
	cluster.WaitDeploymentReady(t, ns, "worker", 1, 60*time.Second)
	const syncPeriod = 2 * time.Second
	ma := newMA(ns, "worker", 1, 6, syncPeriod, spec)
	ma.Spec.Behavior = noScaleDownWindow()
	createMA(t, ma)
	want := int32(depth / perPod)
	waitReplicas(t, ns, "worker", want, 30*time.Second)
	t.Logf("MetricAutoscaler scaled the worker to %d on %s", want, b.metric)

	parent := t
	parent.Cleanup(func() {
		if err := cluster.StartBackend(context.Background(), b.name); err != nil {
			parent.Error(err)
		}
	})
	if err := cluster.StopBackend(ctx, b.name); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	var took time.Duration
	Eventually(t, 15*time.Second, 200*time.Millisecond, fmt.Sprintf("a 503 naming provider %s", b.name), func(ctx context.Context) (bool, string, error) {
		t0 := time.Now()
		v, code, body, err := queueValue(ctx, ns, b)
		took = time.Since(t0)
		if err == nil {
			return false, fmt.Sprintf("200 value %d", v), nil
		}
		var st metav1.Status
		_ = json.Unmarshal(body, &st)
		return code == http.StatusServiceUnavailable && strings.Contains(st.Message, fmt.Sprintf("provider %q", b.name)),
			fmt.Sprintf("%d %.300s", code, body), nil
	})
	t.Logf("503 naming the provider %s after the stop; that request took %s (provider timeout 2s)", time.Since(stopped).Round(10*time.Millisecond), took.Round(time.Millisecond))
	if took > 2500*time.Millisecond {
		t.Errorf("the 503 took %s, more than the provider's 2s timeout", took)
	}
	raw, err := adapterRawGet(ctx, cluster.Client, "/apis/external.metrics.k8s.io/v1beta1", nil)
	if err != nil || !strings.Contains(string(raw), `"`+b.metric+`"`) {
		t.Errorf("external discovery during the outage: %v %.300s; want it to list %s", err, raw, b.metric)
	}
	var cond string
	for deadline := time.Now().Add(5 * syncPeriod); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if r, err := replicasOf(ctx, ns, "worker"); err == nil && r != want {
			t.Fatalf("the worker scaled to %d while %s was down", r, b.name)
		}
		if m, err := getMA(ctx, ns, "worker"); err == nil {
			cond = conditionsOf(m.Status.Conditions)
		}
	}
	if !strings.Contains(cond, "ScalingActive=False/FailedGetExternalMetric") {
		t.Errorf("MetricAutoscaler conditions during the outage: %q; want ScalingActive=False/FailedGetExternalMetric", cond)
	}
	t.Logf("during %s of outage the worker kept %d replicas; conditions %s", 5*syncPeriod, want, cond)

	adapterPid := pidFile(t, "metricscale-adapter")
	restarted := time.Now()
	if err := cluster.StartBackend(ctx, b.name); err != nil {
		t.Fatal(err)
	}
	b.drain(ctx, t)
	if got := b.count(ctx, t); got != 0 {
		t.Fatalf("after draining, %s itself reports %d", b.name, got)
	}
	Eventually(t, 30*time.Second, 300*time.Millisecond, fmt.Sprintf("%s to answer 0 again", b.metric), func(ctx context.Context) (bool, string, error) {
		v, code, body, err := queueValue(ctx, ns, b)
		if err != nil {
			return false, fmt.Sprintf("%d %.300s", code, body), nil
		}
		return v == 0, fmt.Sprintf("value %d", v), nil
	})
	waitReplicas(t, ns, "worker", 1, 30*time.Second)
	t.Logf("after the restart: %s answers again and the worker is back to 1 replica, %s later", b.metric, time.Since(restarted).Round(100*time.Millisecond))
	if pid := pidFile(t, "metricscale-adapter"); pid != adapterPid {
		t.Errorf("the adapter's pid changed from %d to %d: it was restarted", adapterPid, pid)
	}
	t.Logf("%s e2e took %s", b.name, time.Since(start).Round(time.Second))
}
