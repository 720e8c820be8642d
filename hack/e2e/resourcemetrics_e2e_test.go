//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

var metricsAPIServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

const (
	metricsAPIService = "v1beta1.metrics.k8s.io"
	// adapterResourceWindow is resourceRules.window of the prom provider in
	// hack/adapter-config.yaml. metrics-server reports its scrape interval
	// (10s here), so the window tells which of the two answered.
	adapterResourceWindow = 20 * time.Second
)

// TestResourceMetrics hands metrics.k8s.io from metrics-server to the
// adapter (its prom provider's resourceRules over the exporter's cAdvisor
// series), checks kubectl top pods/nodes print what Prometheus holds and
// kube-controller-manager's CPU Utilization HPA scales on it, and hands the
// APIService back.
func TestResourceMetrics(t *testing.T) {
	c := cluster
	c.RequirePrometheus(t)
	if c.PushURL == "" {
		t.Skip("the metricscale adapter does not run in this cluster")
	}
	c.handMetricsAPIToAdapter(t)

	ns := c.CreateNamespace(t, "resmetrics")
	d := KwokDeployment(ns, "web", 2, "100m", "300m")
	d.Spec.Template.Annotations[UsageMemoryAnnotation] = "48Mi"
	c.CreateDeployment(t, d)
	c.WaitDeploymentReady(t, ns, "web", 2, time.Minute)
	podNames := map[string]bool{}
	pods, err := c.Pods(context.Background(), ns, map[string]string{"app": "web"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		podNames[p.Name] = true
	}

	t.Run("PodMetrics from the adapter", func(t *testing.T) {
		Eventually(t, 45*time.Second, time.Second, "PodMetrics of both pods from the adapter", func(ctx context.Context) (bool, string, error) {
			l, err := c.Metrics.MetricsV1beta1().PodMetricses(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
			if err != nil {
				return false, "", err
			}
			var state []string
			ok := len(l.Items) == len(podNames)
			for _, pm := range l.Items {
				var cpu, mem resource.Quantity
				for _, ct := range pm.Containers {
					cpu.Add(ct.Usage[corev1.ResourceCPU])
					mem.Add(ct.Usage[corev1.ResourceMemory])
				}
				state = append(state, fmt.Sprintf("%s cpu=%s mem=%s window=%s", pm.Name, cpu.String(), mem.String(), pm.Window.Duration))
				ok = ok && podNames[pm.Name] && pm.Window.Duration == adapterResourceWindow &&
					nearly(float64(cpu.MilliValue()), 300, 3) && mem.Value() == 48<<20
			}
			return ok, strings.Join(state, "; "), nil
		})
	})

	t.Run("kubectl top pods", func(t *testing.T) {
		var last string
		defer func() { t.Logf("kubectl top pods -n %s:\n%s", ns, last) }()
		Eventually(t, 30*time.Second, time.Second, "kubectl top pods to print 300m and 48Mi for each pod", func(ctx context.Context) (bool, string, error) {
			out, err := c.Kubectl(ctx, "top", "pods", "-n", ns, "--no-headers")
			if err != nil {
				return false, "", err
			}
			last = out
			rows := topRows(out)
			ok := len(rows) == len(podNames)
			for name, v := range rows {
				ok = ok && podNames[name] && len(v) >= 2 && nearly(quantityMilli(v[0]), 300, 3) && v[1] == "48Mi"
			}
			return ok, out, nil
		})
	})

	t.Run("kubectl top nodes", func(t *testing.T) {
		nodes, err := c.Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{
			LabelSelector: labels.SelectorFromSet(map[string]string{KwokNodeLabelKey: KwokNodeLabelValue}).String()})
		if err != nil || len(nodes.Items) == 0 {
			t.Fatalf("kwok nodes: %v (%d)", err, len(nodes.Items))
		}
		// the node's figures are its root cgroup series, as Prometheus
		// computes them with the rule's own node queries
		var last string
		defer func() { t.Logf("kubectl top nodes vs Prometheus:\n%s", last) }()
		Eventually(t, 45*time.Second, 2*time.Second, "kubectl top nodes to print what Prometheus holds", func(ctx context.Context) (bool, string, error) {
			out, err := c.Kubectl(ctx, "top", "nodes", "--no-headers")
			if err != nil {
				return false, "", err
			}
			rows := topRows(out)
			state := out
			ok := true
			for _, n := range nodes.Items {
				cpu, err := c.QueryPrometheus(ctx, fmt.Sprintf(`sum(rate(container_cpu_usage_seconds_total{node=%q,id="/"}[20s]))`, n.Name))
				if err != nil {
					return false, state, err
				}
				mem, err := c.QueryPrometheus(ctx, fmt.Sprintf(`sum(container_memory_working_set_bytes{node=%q,id="/"})`, n.Name))
				if err != nil {
					return false, state, err
				}
				v := rows[n.Name]
				if len(cpu) != 1 || len(mem) != 1 || len(v) < 3 {
					return false, state + fmt.Sprintf("\nnode %s: prometheus cpu %v mem %v", n.Name, cpu, mem), nil
				}
				wantCPU, wantMiB := cpu[0].Value*1000, mem[0].Value/(1<<20)
				state += fmt.Sprintf("\nnode %s: prometheus %.0fm %.1fMi", n.Name, wantCPU, wantMiB)
				gotMiB := quantityMilli(v[2]) / 1000 / (1 << 20)
				ok = ok && nearly(quantityMilli(v[0]), wantCPU, max(3, wantCPU*0.02)) && nearly(gotMiB, wantMiB, 1)
			}
			// our two pods run on kwok nodes: the nodes' CPU includes their 600m
			total := 0.0
			for _, n := range nodes.Items {
				if v := rows[n.Name]; len(v) > 0 {
					total += quantityMilli(v[0])
				}
			}
			last = state
			return ok && total >= 590, state, nil
		})
	})

	t.Run("kube-controller-manager's CPU Utilization HPA", func(t *testing.T) {
		if !c.HPAController {
			t.Skip("kube-controller-manager runs without its HPA controller (hack/cluster.sh up --no-hpa-controller)")
		}
		// 300m used of 100m requested: 300% against a 50% target → the maximum
		c.CreateHPA(t, CPUUtilizationHPA(ns, "web", "web", 2, 4, 50, 0))
		c.WaitForReplicas(t, ns, "web", "web", 4, 90*time.Second)
		hpa, err := c.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(context.Background(), "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var util *int32
		for _, m := range hpa.Status.CurrentMetrics {
			if m.Resource != nil && m.Resource.Name == corev1.ResourceCPU {
				util = m.Resource.Current.AverageUtilization
			}
		}
		if util == nil || !nearly(float64(*util), 300, 5) {
			t.Errorf("HPA current CPU utilization = %v, want about 300%% (%s)", util, c.HPAState(context.Background(), ns, "web"))
		}
	})
}

// handMetricsAPIToAdapter points v1beta1.metrics.k8s.io at the adapter's
// Service (the one serving external.metrics.k8s.io) until the test ends,
// then points it back at metrics-server and waits until it is Available.
func (c *Cluster) handMetricsAPIToAdapter(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	apis := c.Dynamic.Resource(metricsAPIServiceGVR)
	service := func(name string) map[string]any {
		t.Helper()
		u, err := apis.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("APIService %s: %v", name, err)
		}
		s, ok, err := unstructured.NestedMap(u.Object, "spec", "service")
		if !ok || err != nil {
			t.Fatalf("APIService %s has no spec.service: %v", name, err)
		}
		return s
	}
	original := service(metricsAPIService)
	adapter := service("v1beta1.external.metrics.k8s.io")
	if fmt.Sprint(original) == fmt.Sprint(adapter) {
		t.Fatalf("%s already points at the adapter (%v): a previous run did not hand it back", metricsAPIService, original)
	}
	point := func(ctx context.Context, svc map[string]any) error {
		patch, err := json.Marshal(map[string]any{"spec": map[string]any{"service": svc}})
		if err != nil {
			return err
		}
		_, err = apis.Patch(ctx, metricsAPIService, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		err := Poll(ctx, 30*time.Second, time.Second, func(ctx context.Context) (bool, string, error) {
			return point(ctx, original) == nil, "", nil
		})
		if err != nil {
			t.Errorf("handing %s back to metrics-server: %v", metricsAPIService, err)
			return
		}
		if err := c.waitAPIServiceAvailable(ctx, original); err != nil {
			t.Errorf("%s after handing it back to metrics-server: %v", metricsAPIService, err)
			return
		}
		t.Logf("%s handed back to metrics-server (%v)", metricsAPIService, original)
	})
	if err := point(ctx, adapter); err != nil {
		t.Fatalf("pointing %s at the adapter: %v", metricsAPIService, err)
	}
	if err := c.waitAPIServiceAvailable(ctx, adapter); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s handed to the adapter (%v)", metricsAPIService, adapter)
}

// waitAPIServiceAvailable waits until the metrics APIService points at svc
// and is Available.
func (c *Cluster) waitAPIServiceAvailable(ctx context.Context, svc map[string]any) error {
	return Poll(ctx, 60*time.Second, time.Second, func(ctx context.Context) (bool, string, error) {
		u, err := c.Dynamic.Resource(metricsAPIServiceGVR).Get(ctx, metricsAPIService, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		got, _, _ := unstructured.NestedMap(u.Object, "spec", "service")
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		state := fmt.Sprintf("service %v, conditions %v", got, conds)
		if fmt.Sprint(got) != fmt.Sprint(svc) {
			return false, state, nil
		}
		for _, cond := range conds {
			m, _ := cond.(map[string]any)
			if m["type"] == "Available" {
				return m["status"] == "True", state, nil
			}
		}
		return false, state, nil
	})
}

// topRows parses kubectl top's --no-headers output: name → the other
// columns.
func topRows(out string) map[string][]string {
	rows := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 {
			rows[f[0]] = f[1:]
		}
	}
	return rows
}

// milli parses a quantity ("300m", "2", "48Mi") into thousandths; NaN if it
// does not parse.
func quantityMilli(s string) float64 {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return math.NaN()
	}
	return float64(q.MilliValue())
}

func nearly(got, want, tolerance float64) bool { return math.Abs(got-want) <= tolerance }
