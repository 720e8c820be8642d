//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// adapterSecurePort is where hack/cluster.sh runs the adapter (ADAPTER_PORT).
const adapterSecurePort = 6444

// adapterPush posts series to the adapter's push endpoint in the Prometheus
// text format.
func adapterPush(ctx context.Context, t *testing.T, body string) {
	t.Helper()
	if err := cluster.Push(ctx, body); err != nil {
		t.Fatal(err)
	}
}

// adapterRawGet GETs an absolute API path through kube-apiserver (and so the
// aggregator) with client's credentials; on an error status the body is the
// Status the server sent.
// waitDiscovery waits until the adapter's discovery of gv (an API group
// version path) lists every name in want.
func waitDiscovery(t *testing.T, gv string, want []string, every time.Duration) {
	t.Helper()
	Eventually(t, 30*time.Second, every, gv+" to list "+strings.Join(want, ", "), func(ctx context.Context) (bool, string, error) {
		raw, err := adapterRawGet(ctx, cluster.Client, gv, nil)
		if err != nil {
			return false, "", err
		}
		var rl metav1.APIResourceList
		if err := json.Unmarshal(raw, &rl); err != nil {
			return false, string(raw), err
		}
		have := map[string]bool{}
		for _, r := range rl.APIResources {
			have[r.Name] = true
		}
		var missing []string
		for _, w := range want {
			if !have[w] {
				missing = append(missing, w)
			}
		}
		return len(missing) == 0, fmt.Sprintf("%d resources, missing %v", len(rl.APIResources), missing), nil
	})
}

func adapterRawGet(ctx context.Context, client kubernetes.Interface, path string, params map[string]string) ([]byte, error) {
	req := client.CoreV1().RESTClient().Get().AbsPath(path)
	for k, v := range params {
		req = req.Param(k, v)
	}
	return req.DoRaw(ctx)
}

func adapterStatusCode(err error) int {
	var se *apierrors.StatusError
	if errors.As(err, &se) {
		return int(se.ErrStatus.Code)
	}
	return 0
}

type adapterMetricItem struct {
	DescribedObject struct{ Kind, Name, Namespace string } `json:"describedObject"`
	MetricLabels    map[string]string                      `json:"metricLabels"`
	Value           resource.Quantity                      `json:"value"`
}

type adapterMetricList struct {
	Items []adapterMetricItem `json:"items"`
}

// adapterGetMetrics polls path until it answers 200 and check accepts the items.
func adapterGetMetrics(t *testing.T, path string, params map[string]string, what string, check func([]adapterMetricItem) bool) []adapterMetricItem {
	t.Helper()
	var items []adapterMetricItem
	Eventually(t, 30*time.Second, 500*time.Millisecond, what, func(ctx context.Context) (bool, string, error) {
		body, err := adapterRawGet(ctx, cluster.Client, path, params)
		if err != nil {
			return false, "", err
		}
		var l adapterMetricList
		if err := json.Unmarshal(body, &l); err != nil {
			return false, string(body), err
		}
		items = l.Items
		return check(items), string(body), nil
	})
	return items
}

// TestAdapter drives the adapter through the real aggregator: discovery,
// Pods, Object and External metrics, authentication and authorization,
// errors, staleness, and kube-controller-manager's HPA scaling on a pushed
// queue depth.
func TestAdapter(t *testing.T) {
	if cluster.PushURL == "" || cluster.PushToken == "" {
		t.Fatal("the metricscale adapter does not run in the local cluster (hack/cluster.sh env printed no METRICSCALE_PUSH_URL)")
	}
	ns := cluster.CreateNamespace(t, "adapter")
	const deploy = "web"
	cluster.CreateDeployment(t, KwokDeployment(ns, deploy, 3, "100m", ""))
	cluster.WaitDeploymentReady(t, ns, deploy, 3, 90*time.Second)
	pods, err := cluster.Pods(context.Background(), ns, map[string]string{"app": deploy})
	if err != nil {
		t.Fatal(err)
	}

	// Per-pod series (path a and b), an object series for the Deployment, and
	// queue series, pushed as the application would.
	var body strings.Builder
	want := map[string]string{}
	for i, p := range pods {
		fmt.Fprintf(&body, "e2e_inflight{namespace=%q,pod=%q,path=\"a\"} %d\n", ns, p.Name, 10*(i+1))
		fmt.Fprintf(&body, "e2e_inflight{namespace=%q,pod=%q,path=\"b\"} 1000\n", ns, p.Name)
		want[p.Name] = fmt.Sprint(10 * (i + 1))
	}
	// a metric name of this run only, so discovery cannot pass on an earlier run's series
	discoveryMetric := "e2e_discovery_" + strings.ReplaceAll(ns, "-", "_")
	fmt.Fprintf(&body, "%s{namespace=%q,service=\"web\"} 1\n", discoveryMetric, ns)
	fmt.Fprintf(&body, "e2e_requests{namespace=%q,deployment=%q} 42.5\n", ns, deploy)
	fmt.Fprintf(&body, "e2e_queue_depth{namespace=%q,queue=\"orders\"} 12\n", ns)
	fmt.Fprintf(&body, "e2e_queue_depth{namespace=%q,queue=\"billing\"} 5\n", ns)
	adapterPush(context.Background(), t, body.String())

	t.Run("discovery lists the pushed metrics", func(t *testing.T) {
		for _, gv := range []string{"/apis/custom.metrics.k8s.io/v1beta2", "/apis/custom.metrics.k8s.io/v1beta1", "/apis/external.metrics.k8s.io/v1beta1"} {
			wantNames := []string{"pods/e2e_inflight", "deployments.apps/e2e_requests", "namespaces/e2e_queue_depth", "services/" + discoveryMetric}
			if strings.Contains(gv, "external") {
				wantNames = []string{"e2e_inflight", "e2e_requests", "e2e_queue_depth", discoveryMetric}
			}
			waitDiscovery(t, gv, wantNames, time.Second)
		}
	})

	t.Run("pods metric of the deployment's pods with a metric selector", func(t *testing.T) {
		got := map[string]string{}
		adapterGetMetrics(t, "/apis/custom.metrics.k8s.io/v1beta2/namespaces/"+ns+"/pods/*/e2e_inflight",
			map[string]string{"labelSelector": "app=" + deploy, "metricLabelSelector": "path=a"},
			"the pods metric for the 3 pods", func(items []adapterMetricItem) bool {
				clear(got)
				for _, it := range items {
					got[it.DescribedObject.Name] = it.Value.String()
				}
				return len(got) == len(want)
			})
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("pods metric = %v, want %v", got, want)
		}
	})

	t.Run("object metric", func(t *testing.T) {
		items := adapterGetMetrics(t, "/apis/custom.metrics.k8s.io/v1beta2/namespaces/"+ns+"/deployments.apps/"+deploy+"/e2e_requests", nil,
			"the deployment's metric", func(items []adapterMetricItem) bool { return len(items) == 1 })
		if v := items[0].Value.MilliValue(); v != 42500 || items[0].DescribedObject.Kind != "Deployment" {
			t.Errorf("object metric = %+v, want Deployment %s = 42.5", items[0], deploy)
		}
	})

	t.Run("external metric with a label selector", func(t *testing.T) {
		items := adapterGetMetrics(t, "/apis/external.metrics.k8s.io/v1beta1/namespaces/"+ns+"/e2e_queue_depth",
			map[string]string{"labelSelector": "queue=orders"}, "the orders queue", func(items []adapterMetricItem) bool { return len(items) > 0 })
		if len(items) != 1 || items[0].Value.Value() != 12 || items[0].MetricLabels["queue"] != "orders" {
			t.Errorf("external metric = %+v, want one series queue=orders = 12", items)
		}
		items = adapterGetMetrics(t, "/apis/external.metrics.k8s.io/v1beta1/namespaces/"+ns+"/e2e_queue_depth", nil,
			"both queues", func(items []adapterMetricItem) bool { return len(items) > 0 })
		var vals []string
		for _, it := range items {
			vals = append(vals, it.Value.String())
		}
		sort.Strings(vals)
		if fmt.Sprint(vals) != "[12 5]" {
			t.Errorf("external metric without selector = %v, want the two series unsummed", vals)
		}
	})

	t.Run("an unknown metric is a 404", func(t *testing.T) {
		body, err := adapterRawGet(context.Background(), cluster.Client, "/apis/external.metrics.k8s.io/v1beta1/namespaces/"+ns+"/e2e_no_such_metric", nil)
		if adapterStatusCode(err) != http.StatusNotFound || !strings.Contains(string(body), "e2e_no_such_metric") {
			t.Errorf("err = %v (code %d) %s, want a 404 naming the metric", err, adapterStatusCode(err), body)
		}
		body, err = adapterRawGet(context.Background(), cluster.Client, "/apis/custom.metrics.k8s.io/v1beta2/namespaces/"+ns+"/deployments.apps/nope/e2e_requests", nil)
		if adapterStatusCode(err) != http.StatusNotFound || !strings.Contains(string(body), ns+"/nope") {
			t.Errorf("err = %v (code %d) %s, want a 404 naming the object", err, adapterStatusCode(err), body)
		}
	})

	t.Run("a stale value is not served", func(t *testing.T) {
		old := time.Now().Add(-30 * time.Minute).UTC().Format(time.RFC3339)
		if err := cluster.PushAs(context.Background(), "application/json",
			fmt.Sprintf(`{"series":[{"name":"e2e_stale","labels":{"namespace":%q},"value":7,"timestamp":%q}]}`, ns, old)); err != nil {
			t.Fatal(err)
		}
		body, err := adapterRawGet(context.Background(), cluster.Client, "/apis/external.metrics.k8s.io/v1beta1/namespaces/"+ns+"/e2e_stale", nil)
		if adapterStatusCode(err) != http.StatusNotFound || !strings.Contains(string(body), "stale") {
			t.Errorf("err = %v (code %d) %s, want a 404 saying the value is stale", err, adapterStatusCode(err), body)
		}
	})

	t.Run("anonymous and unauthorized clients are denied", func(t *testing.T) {
		const path = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/e2e_queue_depth"
		anonCfg := rest.AnonymousClientConfig(cluster.Config)
		anon, err := kubernetes.NewForConfig(anonCfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := adapterRawGet(context.Background(), anon, path, nil); adapterStatusCode(err) != 401 && adapterStatusCode(err) != 403 {
			t.Errorf("anonymous through kube-apiserver: err = %v, want 401 or 403", err)
		}

		// a ServiceAccount without RBAC for the metrics APIs
		ctx := context.Background()
		if _, err := cluster.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := cluster.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "nobody",
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		saCfg := rest.AnonymousClientConfig(cluster.Config)
		saCfg.BearerToken = tr.Status.Token
		sa, err := kubernetes.NewForConfig(saCfg)
		if err != nil {
			t.Fatal(err)
		}
		_, err = adapterRawGet(ctx, sa, path, nil)
		if adapterStatusCode(err) != http.StatusForbidden {
			t.Errorf("unauthorized ServiceAccount: err = %v, want 403", err)
		}

		// straight at the adapter, past kube-apiserver: no credentials, no answer
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the adapter's self-generated certificate
		for _, p := range []string{path, "/apis/custom.metrics.k8s.io/v1beta2", "/metrics"} {
			resp, err := hc.Get(fmt.Sprintf("https://127.0.0.1:%d%s", adapterSecurePort, p))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("anonymous GET %s at the adapter: %d, want 401", p, resp.StatusCode)
			}
		}
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d%s", adapterSecurePort, path), nil)
		req.Header.Set("Authorization", "Bearer "+tr.Status.Token)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("unauthorized ServiceAccount at the adapter: %d, want 403", resp.StatusCode)
		}
		// and the push endpoint refuses a push without its token
		r, _ := http.NewRequest(http.MethodPost, cluster.PushURL, bytes.NewReader([]byte("e2e_x 1\n")))
		r.Header.Set("Content-Type", "text/plain")
		r.Header.Set("Authorization", "Bearer "+tr.Status.Token)
		if resp, err := http.DefaultClient.Do(r); err != nil || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("push with a ServiceAccount token: %v %v, want 401", resp, err)
		} else {
			resp.Body.Close()
		}
	})

	t.Run("native HPA scales on a pushed external queue metric", func(t *testing.T) {
		if !cluster.HPAController {
			t.Fatal("kube-controller-manager runs without its HPA controller (hack/cluster.sh up --no-hpa-controller): the HPA check cannot run")
		}
		const worker = "worker"
		cluster.CreateDeployment(t, KwokDeployment(ns, worker, 1, "100m", ""))
		cluster.WaitDeploymentReady(t, ns, worker, 1, 90*time.Second)

		// The producer keeps pushing the current depth, as a real exporter would.
		var mu sync.Mutex
		depth := 50
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				d := depth
				mu.Unlock()
				if err := cluster.PushAs(ctx, "text/plain", fmt.Sprintf("e2e_jobs_waiting{namespace=%q,queue=\"jobs\"} %d\n", ns, d)); err != nil && ctx.Err() == nil {
					t.Logf("push: %v", err)
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(3 * time.Second):
				}
			}
		}()
		defer wg.Wait()
		defer stop()

		hpa := &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: worker},
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: worker},
				MinReplicas:    ptr.To[int32](1),
				MaxReplicas:    8,
				Metrics: []autoscalingv2.MetricSpec{{
					Type: autoscalingv2.ExternalMetricSourceType,
					External: &autoscalingv2.ExternalMetricSource{
						Metric: autoscalingv2.MetricIdentifier{Name: "e2e_jobs_waiting",
							Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"queue": "jobs"}}},
						Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("10"))},
					},
				}},
				Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
					ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](10)},
				},
			},
		}
		cluster.CreateHPA(t, hpa)
		timeout := time.Minute + 8*cluster.HPASyncPeriod

		// 50 jobs at 10 per pod: 5 replicas
		start := time.Now()
		cluster.WaitForReplicas(t, ns, worker, worker, 5, timeout)
		t.Logf("scaled up to 5 in %v: %s", time.Since(start).Round(time.Second), cluster.HPAState(context.Background(), ns, worker))

		// 5 jobs: back to 1
		mu.Lock()
		depth = 5
		mu.Unlock()
		start = time.Now()
		cluster.WaitForReplicas(t, ns, worker, worker, 1, timeout)
		t.Logf("scaled down to 1 in %v: %s", time.Since(start).Round(time.Second), cluster.HPAState(context.Background(), ns, worker))
	})
}
