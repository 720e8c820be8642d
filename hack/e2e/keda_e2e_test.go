//go:build e2e && keda

// Under the keda tag only (make e2e-keda): KEDA's cold build takes about an
// hour on the 2-core machines, more than .ci/run's budget allows.

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metricscale/metricscale/hack/backends"
	localcluster "github.com/metricscale/metricscale/hack/cluster"
)

func init() { extraUpArgs = "--keda" }

// The provider of hack/keda-adapter-config.yaml (hack/cluster.sh up --keda).
const kedaProvider = "keda"

var (
	scaledObjectsGVR = schema.GroupVersionResource{Group: "keda.sh", Version: "v1alpha1", Resource: "scaledobjects"}
	triggerAuthsGVR  = schema.GroupVersionResource{Group: "keda.sh", Version: "v1alpha1", Resource: "triggerauthentications"}
)

// kedaValue reads one of KEDA's metrics through the aggregator, so through metricscale.
func kedaValue(ctx context.Context, ns, metric, selector string) (int64, int, string) {
	body, err := adapterRawGet(ctx, cluster.Client, "/apis/external.metrics.k8s.io/v1beta1/namespaces/"+ns+"/"+metric,
		map[string]string{"labelSelector": selector})
	if err != nil {
		var st metav1.Status
		_ = json.Unmarshal(body, &st)
		return 0, adapterStatusCode(err), st.Message
	}
	var l adapterMetricList
	if err := json.Unmarshal(body, &l); err != nil || len(l.Items) != 1 {
		return 0, http.StatusOK, fmt.Sprintf("not one item: %.300s", body)
	}
	return l.Items[0].Value.Value(), http.StatusOK, ""
}

// localWithKEDA opens the local cluster (its commands writing to out) and fails the
// test, saying how, when it runs no KEDA.
func localWithKEDA(t *testing.T, out io.Writer, how string) *localcluster.Cluster {
	t.Helper()
	lc, err := cluster.local(out)
	if err != nil {
		t.Fatal(err)
	}
	env, err := lc.EnvMap()
	if err != nil {
		t.Fatal(err)
	}
	if env["METRICSCALE_KEDA_METRICS_SERVER_URL"] == "" {
		t.Fatal("the local cluster runs no KEDA; " + how)
	}
	return lc
}

// TestKEDACoexistence: KEDA next to metricscale, as keda#470 asks. metricscale holds
// v1beta1.external.metrics.k8s.io; KEDA's metrics server runs unregistered and the adapter's
// provider keda forwards KEDA's metric names to it. A ScaledObject on one Redis list scales
// its Deployment through kube-controller-manager's HPA, while a MetricAutoscaler on another
// list scales through metricscale's own redis provider. KEDA's metrics server stopped: its
// metric is a 503 naming the provider, the HPA keeps its replicas, and the MetricAutoscaler
// still scales; started again, both scale once more.
func TestKEDACoexistence(t *testing.T) {
	needAutoscaler(t)
	if cluster.PrometheusURL == "" {
		t.Fatal("the local cluster runs without Prometheus, so its adapter runs without a config and no provider keda; restart it with hack/cluster.sh down && hack/cluster.sh up --keda")
	}
	if !cluster.HPAController {
		t.Fatal("kube-controller-manager runs without its HPA controller (hack/cluster.sh up --no-hpa-controller): KEDA's HPA cannot scale")
	}
	var out bytes.Buffer
	lc := localWithKEDA(t, &out, "restart it with hack/cluster.sh down && hack/cluster.sh up --keda")
	redis, err := cluster.runningBackend("redis")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	testStart := time.Now()

	t.Run("metricscale holds external.metrics.k8s.io, KEDA no APIService", func(t *testing.T) {
		got, err := cluster.Kubectl(ctx, "get", "apiservices", "-o",
			`jsonpath={range .items[*]}{.metadata.name}={.spec.service.namespace}/{.spec.service.name}{"\n"}{end}`)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(got, "v1beta1.external.metrics.k8s.io=metricscale/metricscale-adapter\n") {
			t.Errorf("v1beta1.external.metrics.k8s.io does not point at metricscale:\n%s", got)
		}
		if strings.Contains(got, "=keda/") {
			t.Errorf("an APIService points at KEDA:\n%s", got)
		}
	})

	// KEDA authenticates metricscale's ServiceAccount and authorizes it: the remote's RBAC.
	rbac := filepath.Join(cluster.RepoRoot, "manifests", "federation", "remote-rbac.yaml")
	if out, err := cluster.Kubectl(ctx, "apply", "-f", rbac); err != nil {
		t.Fatalf("applying %s: %v\n%s", rbac, err, out)
	}
	t.Cleanup(func() { _, _ = cluster.Kubectl(context.Background(), "delete", "--ignore-not-found", "-f", rbac) })

	ns := cluster.CreateNamespace(t, "keda")
	// KEDA's list is the test's own; the MetricAutoscaler's is the one the cluster's redis
	// provider serves (redis_e2e_jobs_length, key=e2e-jobs).
	kedaList := "keda-jobs-" + ns
	kedaEnv := redis.Env(cluster.Dir)
	kedaEnv["METRICSCALE_REDIS_QUEUE"] = kedaList
	ours := newQueueBackend(redis)
	kedaQueue := func(t *testing.T, fn func(backends.Queue) error) {
		t.Helper()
		q, err := redis.OpenQueue(ctx, kedaEnv)
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		if err := fn(q); err != nil {
			t.Fatal(err)
		}
	}
	kedaQueue(t, func(q backends.Queue) error { return q.Drain(ctx) })
	ours.drain(ctx, t)
	t.Cleanup(func() {
		kedaQueue(t, func(q backends.Queue) error { return q.Drain(context.Background()) })
		ours.drain(context.Background(), t)
	})

	// KEDA reads the list as Redis' default user (its scaler runs a Lua script, which the
	// adapter's read-only user may not).
	adminPassword, err := os.ReadFile(kedaEnv["METRICSCALE_REDIS_ADMIN_PASSWORD_FILE"])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "redis-auth"},
		StringData: map[string]string{"password": strings.TrimSpace(string(adminPassword))},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createUnstructured(t, triggerAuthsGVR, ns, map[string]any{
		"apiVersion": "keda.sh/v1alpha1", "kind": "TriggerAuthentication",
		"metadata": map[string]any{"name": "redis-auth"},
		"spec": map[string]any{"secretTargetRef": []any{
			map[string]any{"parameter": "password", "name": "redis-auth", "key": "password"},
		}},
	})

	const perPod = 10
	cluster.CreateDeployment(t, KwokDeployment(ns, "keda-worker", 1, "100m", "10m"))
	cluster.CreateDeployment(t, KwokDeployment(ns, "ma-worker", 1, "100m", "10m"))
	cluster.WaitDeploymentReady(t, ns, "keda-worker", 1, 60*time.Second)
	cluster.WaitDeploymentReady(t, ns, "ma-worker", 1, 60*time.Second)

	createUnstructured(t, scaledObjectsGVR, ns, map[string]any{
		"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
		"metadata": map[string]any{"name": "keda-worker"},
		"spec": map[string]any{
			"scaleTargetRef":  map[string]any{"name": "keda-worker"},
			"minReplicaCount": int64(1), "maxReplicaCount": int64(8),
			"pollingInterval": int64(5),
			"advanced": map[string]any{"horizontalPodAutoscalerConfig": map[string]any{"behavior": map[string]any{
				"scaleDown": map[string]any{"stabilizationWindowSeconds": int64(0)},
			}}},
			"triggers": []any{map[string]any{
				"type": "redis",
				"metadata": map[string]any{
					"address": kedaEnv["METRICSCALE_REDIS_ADDR"], "listName": kedaList, "listLength": fmt.Sprint(perPod),
				},
				"authenticationRef": map[string]any{"name": "redis-auth"},
			}},
		},
	})
	avg := resource.MustParse(fmt.Sprint(perPod))
	const maSync = 2 * time.Second
	ma := newMA(ns, "ma-worker", 1, 8, maSync, autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType,
		External: &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: ours.metric, Selector: &metav1.LabelSelector{MatchLabels: ours.selector}},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &avg},
		}})
	ma.Spec.Behavior = noScaleDownWindow()
	createMA(t, ma)

	// The HPA KEDA made for the ScaledObject names its metric and selector.
	const kedaHPA = "keda-hpa-keda-worker"
	var metric, selector string
	Eventually(t, 60*time.Second, 500*time.Millisecond, "KEDA's HPA "+kedaHPA, func(ctx context.Context) (bool, string, error) {
		h, err := cluster.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, kedaHPA, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		if len(h.Spec.Metrics) != 1 || h.Spec.Metrics[0].External == nil {
			return false, fmt.Sprintf("metrics %+v", h.Spec.Metrics), nil
		}
		m := h.Spec.Metrics[0].External.Metric
		metric = m.Name
		if m.Selector != nil {
			s, err := metav1.LabelSelectorAsSelector(m.Selector)
			if err != nil {
				return false, "", err
			}
			selector = s.String()
		}
		return true, "", nil
	})
	t.Logf("KEDA's HPA %s reads External metric %s {%s}", kedaHPA, metric, selector)
	if !strings.HasPrefix(metric, "s0-redis-") {
		t.Fatalf("KEDA's metric is %q; hack/keda-adapter-config.yaml routes s[0-9]*-* to provider %s", metric, kedaProvider)
	}

	period := cluster.HPASyncPeriod
	if !t.Run("both scale: KEDA through kube-controller-manager, metricscale through its autoscaler", func(t *testing.T) {
		published := time.Now()
		kedaQueue(t, func(q backends.Queue) error { return q.Publish(ctx, 50) })
		ours.publish(ctx, t, 30)
		Eventually(t, 30*time.Second, 300*time.Millisecond, metric+" = 50 through metricscale", func(ctx context.Context) (bool, string, error) {
			v, code, msg := kedaValue(ctx, ns, metric, selector)
			return code == http.StatusOK && v == 50, fmt.Sprintf("%d %d %s", code, v, msg), nil
		})
		t.Logf("%s = 50 through the aggregator and metricscale, %s after the LPUSH", metric, time.Since(published).Round(100*time.Millisecond))
		waitReplicas(t, ns, "ma-worker", 3, 30*time.Second)
		t.Logf("MetricAutoscaler: ma-worker 1 → 3 (30 jobs) %s after the LPUSH", time.Since(published).Round(100*time.Millisecond))
		cluster.WaitForReplicas(t, ns, "keda-worker", kedaHPA, 5, 45*time.Second+4*period)
		t.Logf("KEDA's ScaledObject: keda-worker 1 → 5 (50 jobs) %s after the LPUSH", time.Since(published).Round(100*time.Millisecond))
	}) {
		t.FailNow()
	}

	var restarted time.Time
	if !t.Run("KEDA's metrics server restarted: a 503 naming the provider meanwhile, metricscale unaffected", func(t *testing.T) {
		err := lc.RestartKEDAMetricsServer(ctx, func(ctx context.Context) error {
			stopped := time.Now()
			// 0 jobs: were any value still served, the HPA would scale keda-worker to 1.
			kedaQueue(t, func(q backends.Queue) error { return q.Drain(ctx) })
			ours.publish(ctx, t, 30)
			var msg string
			if err := Poll(ctx, 15*time.Second, 200*time.Millisecond, func(ctx context.Context) (bool, string, error) {
				var code int
				_, code, msg = kedaValue(ctx, ns, metric, selector)
				return code == http.StatusServiceUnavailable && strings.Contains(msg, fmt.Sprintf("%q", kedaProvider)), fmt.Sprintf("%d %s", code, msg), nil
			}); err != nil {
				return fmt.Errorf("no 503 naming provider %s while KEDA's metrics server was stopped: %w", kedaProvider, err)
			}
			t.Logf("stopped: 503 %s", msg)
			// metricscale's own provider does not depend on KEDA.
			if err := Poll(ctx, 30*time.Second, 100*time.Millisecond, func(ctx context.Context) (bool, string, error) {
				r, err := replicasOf(ctx, ns, "ma-worker")
				return err == nil && r == 6, fmt.Sprintf("ma-worker at %d %v", r, err), nil
			}); err != nil {
				return fmt.Errorf("the MetricAutoscaler did not scale ma-worker to 6 while KEDA's metrics server was stopped: %w", err)
			}
			t.Logf("MetricAutoscaler: ma-worker 3 → 6 (60 jobs) %s after KEDA's metrics server stopped", time.Since(stopped).Round(100*time.Millisecond))
			hold := max(3*period, 15*time.Second)
			var cond string
			for deadline := time.Now().Add(hold); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
				if r, err := replicasOf(ctx, ns, "keda-worker"); err == nil && r != 5 {
					return fmt.Errorf("keda-worker scaled to %d while KEDA's metrics server was stopped", r)
				}
				if h, err := cluster.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, kedaHPA, metav1.GetOptions{}); err == nil {
					cond = conditionsOf(h.Status.Conditions)
				}
			}
			if !strings.Contains(cond, "ScalingActive=False/FailedGetExternalMetric") {
				return fmt.Errorf("KEDA's HPA conditions %q after %s without its metrics server; want ScalingActive=False/FailedGetExternalMetric", cond, hold)
			}
			t.Logf("after %s without KEDA's metrics server: keda-worker kept 5 replicas; HPA %s", hold, cond)
			return nil
		})
		restarted = time.Now()
		if err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
	}) {
		t.FailNow()
	}

	t.Run("both scale again after the restart", func(t *testing.T) {
		kedaQueue(t, func(q backends.Queue) error { return q.Publish(ctx, 70) })
		ours.drain(ctx, t)
		Eventually(t, 30*time.Second, 200*time.Millisecond, metric+" = 70 again", func(ctx context.Context) (bool, string, error) {
			v, code, msg := kedaValue(ctx, ns, metric, selector)
			return code == http.StatusOK && v == 70, fmt.Sprintf("%d %d %s", code, v, msg), nil
		})
		t.Logf("%s answers again %s after KEDA's metrics server was ready", metric, time.Since(restarted).Round(100*time.Millisecond))
		waitReplicas(t, ns, "ma-worker", 1, 30*time.Second)
		t.Logf("MetricAutoscaler: ma-worker 6 → 1 (list emptied) %s after the restart", time.Since(restarted).Round(100*time.Millisecond))
		cluster.WaitForReplicas(t, ns, "keda-worker", kedaHPA, 7, 45*time.Second+4*period)
		t.Logf("KEDA's ScaledObject: keda-worker 5 → 7 (70 jobs) %s after the restart", time.Since(restarted).Round(100*time.Millisecond))
	})
	t.Logf("TestKEDACoexistence took %s", time.Since(testStart).Round(time.Second))
}

// createUnstructured creates an object of a CRD in ns; the namespace's deletion removes it.
func createUnstructured(t *testing.T, gvr schema.GroupVersionResource, ns string, obj map[string]any) {
	t.Helper()
	u := &unstructured.Unstructured{Object: obj}
	if _, err := cluster.Dynamic.Resource(gvr).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating %s %s/%s: %v", gvr.Resource, ns, u.GetName(), err)
	}
}
