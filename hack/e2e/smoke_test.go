//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestSmoke checks the local cluster end to end: pods on the fake node become Ready,
// metrics.k8s.io answers through metrics-server, and kube-controller-manager's HPA
// controller scales a Deployment up and back down on CPU utilization.
func TestSmoke(t *testing.T) {
	const (
		deploy     = "web"
		cpuRequest = "100m"
	)
	ns := cluster.CreateNamespace(t, "smoke")
	podLabels := map[string]string{"app": deploy}
	cluster.CreateDeployment(t, KwokDeployment(ns, deploy, 3, cpuRequest, "50m"))

	if !t.Run("pods become ready on the fake node", func(t *testing.T) {
		cluster.WaitDeploymentReady(t, ns, deploy, 3, 90*time.Second)
		pods, err := cluster.Pods(context.Background(), ns, podLabels)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods {
			if !strings.HasPrefix(p.Spec.NodeName, "kwok-node-") {
				t.Errorf("pod %s runs on node %q, want a kwok node", p.Name, p.Spec.NodeName)
			}
		}
	}) {
		return
	}

	if !t.Run("kubectl top pods answers through metrics-server", func(t *testing.T) {
		// metrics-server needs two scrapes (10 s apart) of a pod for its CPU rate.
		Eventually(t, 2*time.Minute, 2*time.Second, "kubectl top pods to list the 3 pods",
			func(ctx context.Context) (bool, string, error) {
				out, err := cluster.Kubectl(ctx, "top", "pods", "--namespace", ns, "--no-headers")
				if err != nil {
					return false, "", err
				}
				lines := strings.Split(strings.TrimSpace(out), "\n")
				if len(lines) != 3 {
					return false, out, nil
				}
				for _, l := range lines {
					if f := strings.Fields(l); len(f) < 3 || !strings.HasSuffix(f[1], "m") {
						return false, out, nil
					}
				}
				t.Logf("kubectl top pods:\n%s", out)
				return true, out, nil
			})
		// The same through the typed client, with the usage the pods report.
		list, err := cluster.Metrics.MetricsV1beta1().PodMetricses(ns).List(context.Background(),
			metav1.ListOptions{LabelSelector: labels.SelectorFromSet(podLabels).String()})
		if err != nil {
			t.Fatalf("list PodMetrics: %v", err)
		}
		if len(list.Items) != 3 {
			t.Fatalf("got PodMetrics for %d pods, want 3", len(list.Items))
		}
		for _, pm := range list.Items {
			cpu := pm.Containers[0].Usage.Cpu().MilliValue()
			if cpu < 30 || cpu > 70 {
				t.Errorf("pod %s uses %dm CPU according to metrics.k8s.io, want about 50m", pm.Name, cpu)
			}
		}
	}) {
		return
	}

	t.Run("native HPA scales on CPU utilization", func(t *testing.T) {
		if !cluster.HPAController {
			t.Skip("kube-controller-manager runs without its HPA controller (hack/cluster.sh up --no-hpa-controller)")
		}
		// A reaction needs up to two metrics-server scrapes (10 s each), a few HPA syncs
		// and the scale-down stabilization window.
		timeout := 2*time.Minute + 6*cluster.HPASyncPeriod
		cluster.CreateHPA(t, CPUUtilizationHPA(ns, deploy, deploy, 2, 6, 50, 10))

		// 50m of 100m requested is the 50% target: the HPA holds 3 replicas.
		Eventually(t, timeout, time.Second, "the HPA to read the pods' CPU utilization",
			func(ctx context.Context) (bool, string, error) {
				state := cluster.HPAState(ctx, ns, deploy)
				return strings.Contains(state, "cpu=") && strings.Contains(state, "ScalingActive=True"), state, nil
			})
		t.Logf("HPA before the load: %s", cluster.HPAState(context.Background(), ns, deploy))
		d, err := cluster.Client.AppsV1().Deployments(ns).Get(context.Background(), deploy, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := *d.Spec.Replicas; got != 3 {
			t.Errorf("at the target utilization the HPA changed the replicas to %d, want 3", got)
		}

		start := time.Now()
		cluster.SetCPUUsage(t, ns, podLabels, "200m") // 200%: wants 12, capped at 6
		cluster.WaitForReplicas(t, ns, deploy, deploy, 6, timeout)
		t.Logf("scaled up to 6 in %v", time.Since(start).Round(time.Second))
		cluster.WaitDeploymentReady(t, ns, deploy, 6, time.Minute)

		start = time.Now()
		cluster.SetCPUUsage(t, ns, podLabels, "10m") // 10%: wants 2 (minReplicas)
		cluster.WaitForReplicas(t, ns, deploy, deploy, 2, timeout)
		t.Logf("scaled down to 2 in %v", time.Since(start).Round(time.Second))
		cluster.WaitDeploymentReady(t, ns, deploy, 2, time.Minute)
		t.Logf("HPA at the end: %s", cluster.HPAState(context.Background(), ns, deploy))
	})
}
