//go:build e2e && benchcontroller

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// TestControllerBenchmark puts N MetricAutoscalers and N equivalent HPAs
// (each over its own one-pod Deployment, syncPeriod 15s, an External
// queue metric) in one cluster, and reads both controllers' CPU time and
// RSS from /proc and their reconcile counts from /metrics. It prints a
// table; hack/bench-controller.sh runs it.
func TestControllerBenchmark(t *testing.T) {
	needAutoscaler(t)
	if !cluster.HPAController {
		t.Fatal("the benchmark compares with kube-controller-manager's HPA controller; the cluster runs without it")
	}
	n := envInt("METRICSCALE_BENCH_N", 1000)
	window := time.Duration(envInt("METRICSCALE_BENCH_SECONDS", 120)) * time.Second
	ns := cluster.CreateNamespace(t, "bench")
	queue := "bench-" + ns
	pushDepth(t, queue, 10) // AverageValue 30 per pod: every target stays at 1

	ours, err := autoscalerPid()
	if err != nil {
		t.Fatal(err)
	}
	kcm, err := pidFile("kube-controller-manager")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	create(t, n, func(i int) error {
		_, err := cluster.Client.AppsV1().Deployments(ns).Create(ctx, KwokDeployment(ns, fmt.Sprintf("ma-%d", i), 1, "10m", "1m"), metav1.CreateOptions{})
		if err != nil {
			return err
		}
		_, err = cluster.Client.AppsV1().Deployments(ns).Create(ctx, KwokDeployment(ns, fmt.Sprintf("hpa-%d", i), 1, "10m", "1m"), metav1.CreateOptions{})
		return err
	})
	t.Logf("%d Deployments created; waiting for their pods", 2*n)
	Eventually(t, 10*time.Minute, 2*time.Second, "all pods running", func(ctx context.Context) (bool, string, error) {
		pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, "", err
		}
		ready := 0
		for i := range pods.Items {
			if podReady(&pods.Items[i]) {
				ready++
			}
		}
		return ready >= 2*n, fmt.Sprintf("%d/%d ready", ready, 2*n), nil
	})
	time.Sleep(10 * time.Second)
	baseRSS := rssKiB(t, ours)

	minR := int32(1)
	create(t, n, func(i int) error {
		hpa := &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("hpa-%d", i), Namespace: ns},
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: fmt.Sprintf("hpa-%d", i)},
				MinReplicas:    &minR, MaxReplicas: 10, Metrics: []autoscalingv2.MetricSpec{queueSpec(queue, "30")},
			},
		}
		if _, err := cluster.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
			return err
		}
		createMA(t, newMA(ns, fmt.Sprintf("ma-%d", i), 1, 10, 15*time.Second, queueSpec(queue, "30")))
		return nil
	})
	t.Logf("%d MetricAutoscalers and %d HPAs created; letting both settle for 45s", n, n)
	time.Sleep(45 * time.Second)

	kcmMetrics := kcmMetricsURL()
	oursBefore, kcmBefore := cpuSeconds(t, ours), cpuSeconds(t, kcm)
	oursRec0 := reconciles(t, "127.0.0.1:6446")
	kcmRec0 := scrape(t, kcmMetrics, "horizontal_pod_autoscaler_controller_reconciliations_total")
	time.Sleep(window)
	oursCPU, kcmCPU := cpuSeconds(t, ours)-oursBefore, cpuSeconds(t, kcm)-kcmBefore
	oursRec := reconciles(t, "127.0.0.1:6446") - oursRec0
	kcmRec := scrape(t, kcmMetrics, "horizontal_pod_autoscaler_controller_reconciliations_total") - kcmRec0
	rss := rssKiB(t, ours)
	kcmRSS := rssKiB(t, kcm)

	if oursRec == 0 || kcmRec == 0 {
		t.Fatalf("no reconciles measured: metricscale %d, kube-controller-manager %d", oursRec, kcmRec)
	}
	fmt.Printf("\n%d autoscalers each, syncPeriod 15s, measured over %s\n", n, window)
	fmt.Printf("%-26s %12s %12s %16s %12s\n", "controller", "reconciles", "CPU s", "CPU µs/reconcile", "RSS MiB")
	fmt.Printf("%-26s %12d %12.2f %16.0f %12.1f\n", "metricscale-autoscaler", oursRec, oursCPU, oursCPU/float64(oursRec)*1e6, float64(rss)/1024)
	fmt.Printf("%-26s %12d %12.2f %16.0f %12.1f\n", "kube-controller-manager", kcmRec, kcmCPU, kcmCPU/float64(kcmRec)*1e6, float64(kcmRSS)/1024)
	fmt.Printf("metricscale RSS above its base of %.1f MiB: %.2f KiB per autoscaler\n\n", float64(baseRSS)/1024, float64(rss-baseRSS)/float64(n))
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// create runs each(0..n-1) with a few requests in flight.
func create(t *testing.T, n int, each func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := each(i); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func pidFile(component string) (int, error) {
	data, err := os.ReadFile(filepath.Join(cluster.Dir, "run", component+".pid"))
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(string(data), "\n")
	return strconv.Atoi(strings.TrimSpace(first))
}

// cpuSeconds is a process's user+system CPU time from /proc/PID/stat.
func cpuSeconds(t *testing.T, pid int) float64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command name, which is in parentheses.
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // USER_HZ
}

func rssKiB(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			v, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			return v
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

func kcmMetricsURL() string { return "https://127.0.0.1:10257/metrics" }

// scrape sums a counter from kube-controller-manager's /metrics, read
// with the admin credentials.
func scrape(t *testing.T, url, name string) int {
	t.Helper()
	cfg := rest.CopyConfig(cluster.Config)
	cfg.TLSClientConfig.Insecure, cfg.TLSClientConfig.CAData, cfg.TLSClientConfig.CAFile = true, nil, ""
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: transport, Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	total := 0
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			total += int(v)
		}
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	return total
}
