//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The names hack/adapter-config.yaml gives the exporter's series (its prometheus provider
// serves prom_*; everything else stays with the memory provider and the push endpoint).
const (
	promQueueMetric        = "prom_queue_messages_ready"         // external, namespaced; custom on namespaces
	promClusterQueueMetric = "prom_cluster_queue_messages_ready" // external, not namespaced
	promCPUMetric          = "prom_container_cpu_usage"          // custom, pods
	promAppRequestsMetric  = "prom_app_requests"                 // custom, deployments.apps and namespaces
)

// promQueueSpec is an External AverageValue metric on the Prometheus-backed queue depth.
func promQueueSpec(queue, perPod string) autoscalingv2.MetricSpec {
	avg := resource.MustParse(perPod)
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: promQueueMetric, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"queue": queue}}},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &avg},
	}}
}

// promExternal reads an external metric through the aggregator: the items' values by
// their queue label, or the error (with the Status body) the aggregator answered.
func promExternal(ctx context.Context, ns, metric, selector string) (map[string]string, []byte, error) {
	var params map[string]string
	if selector != "" {
		params = map[string]string{"labelSelector": selector}
	}
	body, err := adapterRawGet(ctx, cluster.Client, "/apis/external.metrics.k8s.io/v1beta1/namespaces/"+ns+"/"+metric, params)
	if err != nil {
		return nil, body, err
	}
	var l adapterMetricList
	if err := json.Unmarshal(body, &l); err != nil {
		return nil, body, err
	}
	got := map[string]string{}
	for _, it := range l.Items {
		got[it.MetricLabels["queue"]] = it.Value.String()
	}
	return got, body, nil
}

// TestPrometheus runs the adapter's prometheus provider against the cluster's real
// Prometheus, through kube-apiserver's aggregator: discovery, External, Pods, Namespace and
// Object metrics from the exporter's series, a MetricAutoscaler and kube-controller-manager's
// HPA scaling on a Prometheus-backed queue, then a Prometheus outage (503 naming the
// provider, no scale-down) and its recovery without restarting the adapter.
func TestPrometheus(t *testing.T) {
	cluster.RequirePrometheus(t)
	needAutoscaler(t)
	if !cluster.HPAController {
		t.Fatal("kube-controller-manager runs without its HPA controller (hack/cluster.sh up --no-hpa-controller): the HPA check cannot run")
	}
	ctx := context.Background()
	testStart := time.Now()
	ns := cluster.CreateNamespace(t, "prom")
	globalQueue := "global-" + ns
	const jobsQueue = "jobs"

	// The series first: a metric name Prometheus has not had before is discovered at the
	// provider's next relist (relistInterval 10s).
	if err := cluster.SetExporterSeries(ctx, fmt.Sprintf(`queue_messages_ready{namespace=%[1]q,queue="orders"} 12
queue_messages_ready{namespace=%[1]q,queue="billing"} 5
queue_messages_ready{namespace=%[1]q,queue=%[2]q} 50
queue_messages_ready{queue=%[3]q} 7
app_requests{namespace=%[1]q,deployment="web"} 42.5
`, ns, jobsQueue, globalQueue)); err != nil {
		t.Fatal(err)
	}
	// A pushed metric: the memory provider still serves every name that is not prom_*.
	pushedMetric := "e2e_prom_pushed_" + strings.ReplaceAll(ns, "-", "_")
	adapterPush(ctx, t, fmt.Sprintf("%s{namespace=%q} 3\n", pushedMetric, ns))

	// web: 2 pods using 200m each (the exporter's cAdvisor counters grow at that rate).
	cluster.CreateDeployment(t, KwokDeployment(ns, "web", 2, "100m", "200m"))
	cluster.CreateDeployment(t, KwokDeployment(ns, "hpa-worker", 1, "100m", "10m"))
	cluster.CreateDeployment(t, KwokDeployment(ns, "ma-worker", 1, "100m", "10m"))
	for _, d := range []struct {
		name string
		n    int32
	}{{"web", 2}, {"hpa-worker", 1}, {"ma-worker", 1}} {
		cluster.WaitDeploymentReady(t, ns, d.name, d.n, 60*time.Second)
	}

	// Both autoscalers now, so that they scale while the API checks run. 50 jobs at 10 per
	// pod: 5 replicas. No scale-down window: a wrong value would show at once.
	period := cluster.HPASyncPeriod
	noWindow := noScaleDownWindow()
	cluster.CreateHPA(t, &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hpa-worker"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "hpa-worker"},
			MinReplicas:    ptr.To[int32](1), MaxReplicas: 8,
			Metrics:  []autoscalingv2.MetricSpec{promQueueSpec(jobsQueue, "10")},
			Behavior: noWindow.DeepCopy(),
		},
	})
	ma := newMA(ns, "ma-worker", 1, 8, period, promQueueSpec(jobsQueue, "10"))
	ma.Spec.Behavior = noWindow.DeepCopy()
	createMA(t, ma)
	autoscalersCreated := time.Now()

	t.Run("discovery lists the prometheus and the pushed metrics", func(t *testing.T) {
		for gv, want := range map[string][]string{
			"/apis/custom.metrics.k8s.io/v1beta2": {"pods/" + promCPUMetric, "namespaces/" + promQueueMetric,
				"deployments.apps/" + promAppRequestsMetric, "namespaces/" + promAppRequestsMetric, "namespaces/" + pushedMetric},
			"/apis/external.metrics.k8s.io/v1beta1": {promQueueMetric, promClusterQueueMetric, pushedMetric},
		} {
			waitDiscovery(t, gv, want, 500*time.Millisecond)
		}
	})

	t.Run("external metrics equal the exporter's values", func(t *testing.T) {
		for _, c := range []struct {
			what, ns, metric, selector string
			want                       map[string]string
		}{
			{"namespaced, with a selector", ns, promQueueMetric, "queue=orders", map[string]string{"orders": "12"}},
			{"namespaced, with a set selector", ns, promQueueMetric, "queue in (orders,billing)", map[string]string{"orders": "12", "billing": "5"}},
			{"namespaced, without a selector", ns, promQueueMetric, "", map[string]string{"orders": "12", "billing": "5", jobsQueue: "50"}},
			{"not namespaced, with a selector", ns, promClusterQueueMetric, "queue=" + globalQueue, map[string]string{globalQueue: "7"}},
			{"not namespaced, from another namespace", "default", promClusterQueueMetric, "queue=" + globalQueue, map[string]string{globalQueue: "7"}},
		} {
			var last string
			err := Poll(ctx, 30*time.Second, 500*time.Millisecond, func(ctx context.Context) (bool, string, error) {
				got, body, err := promExternal(ctx, c.ns, c.metric, c.selector)
				if err != nil {
					return false, string(body), err
				}
				last = fmt.Sprint(got)
				return last == fmt.Sprint(c.want), last, nil
			})
			if err != nil {
				t.Errorf("%s: %s?labelSelector=%s in %s: %v; want %v", c.what, c.metric, c.selector, c.ns, err, c.want)
			}
		}
		// Without a selector, the cluster-wide metric holds the global queue (and those of
		// other runs), never a namespaced one.
		got, body, err := promExternal(ctx, ns, promClusterQueueMetric, "")
		if err != nil || got[globalQueue] != "7" || got["orders"] != "" {
			t.Errorf("%s without a selector: %v %v %s; want %s=7 and no namespaced queue", promClusterQueueMetric, got, err, body, globalQueue)
		}
		// A namespaced metric does not see another namespace's queues.
		got, body, err = promExternal(ctx, "default", promQueueMetric, "queue="+jobsQueue)
		if err == nil && len(got) > 0 {
			t.Errorf("%s in default: %v, want nothing of namespace %s (%s)", promQueueMetric, got, ns, body)
		}
	})

	t.Run("namespace and object metrics", func(t *testing.T) {
		items := adapterGetMetrics(t, "/apis/custom.metrics.k8s.io/v1beta2/namespaces/"+ns+"/metrics/"+promQueueMetric, nil,
			"the namespace's queue total", func(items []adapterMetricItem) bool { return len(items) == 1 })
		if v := items[0].Value.MilliValue(); v != 67000 || items[0].DescribedObject.Kind != "Namespace" {
			t.Errorf("namespace metric = %+v, want Namespace %s = 67 (12+5+50)", items[0], ns)
		}
		items = adapterGetMetrics(t, "/apis/custom.metrics.k8s.io/v1beta2/namespaces/"+ns+"/deployments.apps/web/"+promAppRequestsMetric, nil,
			"the deployment's metric", func(items []adapterMetricItem) bool { return len(items) == 1 })
		if v := items[0].Value.MilliValue(); v != 42500 || items[0].DescribedObject.Kind != "Deployment" {
			t.Errorf("object metric = %+v, want Deployment web = 42.5", items[0])
		}
		// The pushed one, through the catch-all route to the memory provider.
		items = adapterGetMetrics(t, "/apis/external.metrics.k8s.io/v1beta1/namespaces/"+ns+"/"+pushedMetric, nil,
			"the pushed metric", func(items []adapterMetricItem) bool { return len(items) == 1 })
		if items[0].Value.Value() != 3 {
			t.Errorf("pushed metric = %+v, want 3", items[0])
		}
	})

	if !t.Run("both autoscalers scale up on the Prometheus-backed queue", func(t *testing.T) {
		timeout := 45*time.Second + 4*period
		waitReplicas(t, ns, "ma-worker", 5, timeout)
		t.Logf("MetricAutoscaler: 1 → 5 replicas %s after it was created", time.Since(autoscalersCreated).Round(100*time.Millisecond))
		cluster.WaitForReplicas(t, ns, "hpa-worker", "hpa-worker", 5, timeout)
		t.Logf("kube-controller-manager's HPA: 1 → 5 replicas by %s after it was created", time.Since(autoscalersCreated).Round(100*time.Millisecond))
	}) {
		t.FailNow()
	}

	t.Run("pods metric: the CPU rate of the annotation", func(t *testing.T) {
		// rate(...[20s]) of a new pod reads low until its counter is 20s old.
		var got map[string]int64
		Eventually(t, 60*time.Second, time.Second, "the pods' CPU rate to be 200m ±10%", func(ctx context.Context) (bool, string, error) {
			body, err := adapterRawGet(ctx, cluster.Client, "/apis/custom.metrics.k8s.io/v1beta2/namespaces/"+ns+"/pods/*/"+promCPUMetric,
				map[string]string{"labelSelector": "app=web"})
			if err != nil {
				return false, string(body), err
			}
			var l adapterMetricList
			if err := json.Unmarshal(body, &l); err != nil {
				return false, string(body), err
			}
			got = map[string]int64{}
			ok := len(l.Items) == 2
			for _, it := range l.Items {
				m := it.Value.MilliValue()
				got[it.DescribedObject.Name] = m
				ok = ok && it.DescribedObject.Kind == "Pod" && m >= 180 && m <= 220
			}
			return ok, fmt.Sprintf("millicores by pod %v", got), nil
		})
		t.Logf("CPU rate by pod (millicores): %v", got)
	})

	t.Run("an unknown metric is a 404 naming it", func(t *testing.T) {
		for _, path := range []string{
			"/apis/external.metrics.k8s.io/v1beta1/namespaces/" + ns + "/prom_no_such_metric",
			"/apis/custom.metrics.k8s.io/v1beta2/namespaces/" + ns + "/pods/*/prom_no_such_metric",
		} {
			body, err := adapterRawGet(ctx, cluster.Client, path, nil)
			if adapterStatusCode(err) != http.StatusNotFound || !strings.Contains(string(body), "prom_no_such_metric") {
				t.Errorf("GET %s: %v (code %d) %s; want a 404 naming the metric", path, err, adapterStatusCode(err), body)
			}
		}
	})

	parent := t
	if !t.Run("Prometheus stopped: 503 naming the provider, no scale-down", func(t *testing.T) {
		// On the parent: the outage lasts into the next subtest, which ends it.
		parent.Cleanup(func() {
			if err := cluster.StartPrometheus(context.Background()); err != nil {
				parent.Error(err)
			}
		})
		if err := cluster.StopPrometheus(ctx); err != nil {
			t.Fatal(err)
		}
		stopped := time.Now()
		// Were the metric still served, 0 jobs would scale both to 1 at their next sync.
		if err := cluster.SetExporterSeries(ctx, fmt.Sprintf("queue_messages_ready{namespace=%q,queue=%q} 0\n", ns, jobsQueue)); err != nil {
			t.Fatal(err)
		}
		var answered time.Duration
		Eventually(t, 10*time.Second, 100*time.Millisecond, "a 503 naming provider prom", func(ctx context.Context) (bool, string, error) {
			start := time.Now()
			got, body, err := promExternal(ctx, ns, promQueueMetric, "queue="+jobsQueue)
			answered = time.Since(start)
			if err == nil {
				return false, fmt.Sprintf("200 %v", got), nil
			}
			var st metav1.Status
			_ = json.Unmarshal(body, &st)
			return adapterStatusCode(err) == http.StatusServiceUnavailable && strings.Contains(st.Message, `provider "prom"`),
				fmt.Sprintf("%d %s", adapterStatusCode(err), body), nil
		})
		t.Logf("503 naming the provider %s after the stop; that request took %s (provider timeout 2s)",
			time.Since(stopped).Round(10*time.Millisecond), answered.Round(time.Millisecond))
		if answered > 2500*time.Millisecond {
			t.Errorf("the 503 took %s, more than the provider's 2s timeout", answered)
		}

		// Discovery still answers, from the last relist.
		raw, err := adapterRawGet(ctx, cluster.Client, "/apis/external.metrics.k8s.io/v1beta1", nil)
		if err != nil || !strings.Contains(string(raw), `"`+promQueueMetric+`"`) {
			t.Errorf("external discovery during the outage: %v %.300s; want it to still list %s", err, raw, promQueueMetric)
		}

		// Three sync periods (at least 15s): the replicas stay, both say why.
		hold := max(3*period, 15*time.Second)
		var maCond, hpaCond string
		for deadline := time.Now().Add(hold); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
			for _, d := range []string{"ma-worker", "hpa-worker"} {
				if r, err := replicasOf(ctx, ns, d); err == nil && r != 5 {
					t.Fatalf("%s scaled to %d while Prometheus was down (%s after the stop)", d, r, time.Since(stopped).Round(100*time.Millisecond))
				}
			}
			if m, err := getMA(ctx, ns, "ma-worker"); err == nil {
				maCond = conditionsOf(m.Status.Conditions)
			}
			if h, err := cluster.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "hpa-worker", metav1.GetOptions{}); err == nil {
				hpaCond = conditionsOf(h.Status.Conditions)
			}
		}
		t.Logf("after %s of outage: both at 5 replicas; MetricAutoscaler %s; HPA %s", hold, maCond, hpaCond)
		if !strings.Contains(maCond, "ScalingActive=False/FailedGetExternalMetric") {
			t.Errorf("MetricAutoscaler conditions %q; want ScalingActive=False/FailedGetExternalMetric", maCond)
		}
		if !strings.Contains(hpaCond, "ScalingActive=False/FailedGetExternalMetric") {
			t.Errorf("HPA conditions %q; want ScalingActive=False/FailedGetExternalMetric", hpaCond)
		}
	}) {
		t.FailNow()
	}

	t.Run("Prometheus restarted: answers again, same adapter", func(t *testing.T) {
		adapterPid := pidFile(t, "metricscale-adapter")
		restart := time.Now()
		if err := cluster.StartPrometheus(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("Prometheus started and scraping again in %s", time.Since(restart).Round(100*time.Millisecond))
		// The value set during the outage: 0 jobs.
		Eventually(t, 30*time.Second, 200*time.Millisecond, "the external metric to answer 0 again", func(ctx context.Context) (bool, string, error) {
			got, body, err := promExternal(ctx, ns, promQueueMetric, "queue="+jobsQueue)
			if err != nil {
				return false, string(body), err
			}
			return got[jobsQueue] == "0", fmt.Sprint(got), nil
		})
		t.Logf("the external metric answers the current value %s after the restart", time.Since(restart).Round(100*time.Millisecond))
		waitReplicas(t, ns, "ma-worker", 1, 30*time.Second+3*period)
		cluster.WaitForReplicas(t, ns, "hpa-worker", "hpa-worker", 1, 30*time.Second+3*period)
		t.Logf("both scaled down to 1 by %s after the restart", time.Since(restart).Round(100*time.Millisecond))
		if pid := pidFile(t, "metricscale-adapter"); pid != adapterPid {
			t.Errorf("the adapter's pid changed from %d to %d: it was restarted", adapterPid, pid)
		}
	})
	t.Logf("TestPrometheus took %s", time.Since(testStart).Round(time.Second))
}

// pidFile reads the pid hack/cluster.sh recorded for a component (run/<name>.pid).
func pidFile(t *testing.T, component string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(cluster.Dir, "run", component+".pid"))
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscan(string(data), &pid); err != nil {
		t.Fatalf("pid file of %s: %q: %v", component, data, err)
	}
	return pid
}
