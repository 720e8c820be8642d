//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
)

// needAutoscaler skips nothing silently: without the stack the test fails.
func needAutoscaler(t *testing.T) {
	t.Helper()
	if cluster.PushURL == "" {
		t.Fatal("the local cluster runs no metricscale adapter; restart it with hack/cluster.sh down && hack/cluster.sh up")
	}
	if _, err := autoscalerPid(); err != nil {
		t.Fatalf("the local cluster runs no metricscale autoscaler (%v); restart it with hack/cluster.sh down && hack/cluster.sh up", err)
	}
}

func autoscalerPid() (int, error) {
	data, err := os.ReadFile(filepath.Join(cluster.Dir, "run", "metricscale-autoscaler.pid"))
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(string(data), "\n")
	return strconv.Atoi(strings.TrimSpace(first))
}

// queueSpec is an External AverageValue metric on queue_messages_ready for
// one queue.
func queueSpec(queue string, perPod string) autoscalingv2.MetricSpec {
	avg := resource.MustParse(perPod)
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "queue_messages_ready", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"queue": queue}}},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &avg},
	}}
}

func pushDepth(t *testing.T, queue string, depth int) {
	t.Helper()
	if err := cluster.Push(context.Background(), fmt.Sprintf("queue_messages_ready{queue=%q} %d\n", queue, depth)); err != nil {
		t.Fatal(err)
	}
}

func scaleDownBehavior(windowSeconds int32, pods int32, periodSeconds int32) *autoscalingv2.HorizontalPodAutoscalerBehavior {
	return &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{
		StabilizationWindowSeconds: &windowSeconds,
		Policies:                   []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: pods, PeriodSeconds: periodSeconds}},
	}}
}

// noScaleDownWindow is a behavior without the default 5-minute scale-down
// stabilization, so a test sees a lower value take effect at once.
func noScaleDownWindow() *autoscalingv2.HorizontalPodAutoscalerBehavior {
	return &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0)}}
}

// withoutScaleDownWindow sets noScaleDownWindow on ma.
func withoutScaleDownWindow(ma *v1alpha1.MetricAutoscaler) *v1alpha1.MetricAutoscaler {
	ma.Spec.Behavior = noScaleDownWindow()
	return ma
}

func createMA(t *testing.T, ma *v1alpha1.MetricAutoscaler) {
	t.Helper()
	ma.APIVersion, ma.Kind = v1alpha1.GroupVersion.String(), "MetricAutoscaler"
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ma)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Dynamic.Resource(v1alpha1.GroupVersionResource).Namespace(ma.Namespace).Create(context.Background(), &unstructured.Unstructured{Object: u}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating MetricAutoscaler %s/%s: %v", ma.Namespace, ma.Name, err)
	}
}

// waitMAStatus waits until the MetricAutoscaler's status is the one of the
// decision that scaled its target to desired: the autoscaler writes the status
// after the scale, so a read right after the scale can get the one before (a
// warm CI run did, the unit tests compiling beside the suite).
func waitMAStatus(t *testing.T, ns, name string, desired int32) {
	t.Helper()
	Eventually(t, 30*time.Second, 100*time.Millisecond, fmt.Sprintf("%s/%s status.desiredReplicas %d", ns, name, desired), func(ctx context.Context) (bool, string, error) {
		m, err := getMA(ctx, ns, name)
		if err != nil {
			return false, "", err
		}
		return m.Status.DesiredReplicas == desired, fmt.Sprintf("status.desiredReplicas %d", m.Status.DesiredReplicas), nil
	})
}

func getMA(ctx context.Context, ns, name string) (*v1alpha1.MetricAutoscaler, error) {
	u, err := cluster.Dynamic.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	ma := &v1alpha1.MetricAutoscaler{}
	return ma, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ma)
}

func newMA(ns, name string, minR, maxR int32, syncPeriod time.Duration, metrics ...autoscalingv2.MetricSpec) *v1alpha1.MetricAutoscaler {
	return &v1alpha1.MetricAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.MetricAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name},
			MinReplicas:    &minR, MaxReplicas: maxR, Metrics: metrics,
			SyncPeriod: &metav1.Duration{Duration: syncPeriod},
		},
	}
}

func replicasOf(ctx context.Context, ns, name string) (int32, error) {
	d, err := cluster.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	return *d.Spec.Replicas, nil
}

func waitReplicas(t *testing.T, ns, name string, want int32, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, 100*time.Millisecond, fmt.Sprintf("Deployment %s/%s at %d replicas", ns, name, want), func(ctx context.Context) (bool, string, error) {
		got, err := replicasOf(ctx, ns, name)
		if err != nil {
			return false, "", err
		}
		state := fmt.Sprintf("spec.replicas=%d", got)
		if ma, err := getMA(ctx, ns, name); err == nil {
			state += fmt.Sprintf("; autoscaler: desired %d, targets %s, conditions %s", ma.Status.DesiredReplicas, ma.Status.Targets, conditionsOf(ma.Status.Conditions))
		}
		return got == want, state, nil
	})
}

func conditionsOf(conds []autoscalingv2.HorizontalPodAutoscalerCondition) string {
	parts := make([]string, 0, len(conds))
	for _, c := range conds {
		parts = append(parts, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	return strings.Join(parts, " ")
}

// timeline records a Deployment's spec.replicas each time it changes.
type timeline struct {
	values []int32
	times  []time.Time
}

func (tl *timeline) observe(v int32, at time.Time) {
	if n := len(tl.values); n == 0 || tl.values[n-1] != v {
		tl.values, tl.times = append(tl.values, v), append(tl.times, at)
	}
}

// TestAutoscalerParity drives kube-controller-manager's HPA and a
// MetricAutoscaler with the same spec and sync period from one queue that
// fills and drains; their replica timelines must be the same step for step.
func TestAutoscalerParity(t *testing.T) {
	needAutoscaler(t)
	if !cluster.HPAController {
		t.Fatal("parity needs kube-controller-manager's HPA controller; the cluster runs with --no-hpa-controller")
	}
	ns := cluster.CreateNamespace(t, "parity")
	queue := "parity-" + ns
	period := cluster.HPASyncPeriod
	pushDepth(t, queue, 30)
	cluster.CreateDeployment(t, KwokDeployment(ns, "native", 1, "100m", "10m"))
	cluster.CreateDeployment(t, KwokDeployment(ns, "ours", 1, "100m", "10m"))

	// At most one pod less per 15s on the way down, no down-window: the
	// policy, not the clock, shapes the timeline.
	behavior := scaleDownBehavior(0, 1, 15)
	minR := int32(1)
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "native", Namespace: ns},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "native"},
			MinReplicas:    &minR, MaxReplicas: 10, Metrics: []autoscalingv2.MetricSpec{queueSpec(queue, "30")}, Behavior: behavior,
		},
	}
	cluster.CreateHPA(t, hpa)
	ma := newMA(ns, "ours", 1, 10, period, queueSpec(queue, "30"))
	ma.Spec.Behavior = behavior.DeepCopy()
	createMA(t, ma)

	// Both have reconciled the starting depth (1 replica) before it moves:
	// ours acts on create, kube-controller-manager at its next sync.
	Eventually(t, 4*period+30*time.Second, 200*time.Millisecond, "both autoscalers' first status", func(ctx context.Context) (bool, string, error) {
		h, err := cluster.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "native", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		m, err := getMA(ctx, ns, "ours")
		if err != nil {
			return false, "", err
		}
		return len(h.Status.CurrentMetrics) > 0 && len(m.Status.CurrentMetrics) > 0,
			fmt.Sprintf("HPA %s; MetricAutoscaler %s", conditionsOf(h.Status.Conditions), conditionsOf(m.Status.Conditions)), nil
	})

	var native, ours timeline
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			now := time.Now()
			if v, err := replicasOf(context.Background(), ns, "native"); err == nil {
				native.observe(v, now)
			}
			if v, err := replicasOf(context.Background(), ns, "ours"); err == nil {
				ours.observe(v, now)
			}
		}
	}()

	time.Sleep(time.Second) // a first sample of both at 1
	// A queue filling and draining; each level is held for several periods.
	hold := max(6*period, 30*time.Second)
	for _, level := range []struct {
		depth int
		hold  time.Duration
	}{
		{150, hold},                       // 5 replicas
		{300, hold},                       // 10
		{60, 9*15*time.Second + 2*period}, // down one pod per 15s to 2
		{0, 15*time.Second + 3*period},    // 1
	} {
		pushDepth(t, queue, level.depth)
		t.Logf("queue depth %d for %s", level.depth, level.hold)
		time.Sleep(level.hold)
	}
	close(stop)
	<-done
	t.Logf("kube-controller-manager: %v", native.values)
	t.Logf("metricscale:             %v", ours.values)
	want := []int32{1, 5, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1}
	if !slices.Equal(native.values, ours.values) {
		t.Errorf("timelines differ:\n  kube-controller-manager %v\n  metricscale             %v", native.values, ours.values)
	}
	if !slices.Equal(ours.values, want) {
		t.Errorf("metricscale timeline %v, want %v", ours.values, want)
	}
}

// TestAutoscalerReaction measures the time from a push to the scale write
// with syncPeriod 1s.
func TestAutoscalerReaction(t *testing.T) {
	needAutoscaler(t)
	ns := cluster.CreateNamespace(t, "reaction")
	queue := "reaction-" + ns
	pushDepth(t, queue, 10)
	cluster.CreateDeployment(t, KwokDeployment(ns, "workers", 1, "100m", "10m"))
	ma := newMA(ns, "workers", 1, 10, time.Second, queueSpec(queue, "10"))
	// Both directions' policies span 15s, as the scale-up defaults do: the
	// HPA algorithm forgets scale-down events after the scale-down
	// policy's period, and a shorter one would let the scale-up limit
	// count additions without the removals that undid them (upstream does
	// the same), blocking every third flip here.
	ma.Spec.Behavior = scaleDownBehavior(0, 10, 15)
	createMA(t, ma)
	waitReplicas(t, ns, "workers", 1, 30*time.Second)

	var took []time.Duration
	for i := range 20 {
		depth, want := 30, int32(3)
		if i%2 == 1 {
			depth, want = 10, 1
		}
		start := time.Now()
		pushDepth(t, queue, depth)
		for {
			got, err := replicasOf(context.Background(), ns, "workers")
			if err == nil && got == want {
				break
			}
			if time.Since(start) > 30*time.Second {
				t.Fatalf("trial %d: no scale to %d within 30s of the push (now %d, %v)", i, want, got, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		took = append(took, time.Since(start))
		t.Logf("trial %2d: depth %d → %d replicas in %s", i, depth, want, took[i].Round(time.Millisecond))
		// Let the next trial start between two reconciles, at a random phase.
		time.Sleep(time.Duration(300+97*i%700) * time.Millisecond)
	}
	slices.Sort(took)
	p50, p95 := took[len(took)/2], took[len(took)*95/100]
	t.Logf("push → scale write over %d trials: p50 %s, p95 %s, min %s, max %s",
		len(took), p50.Round(time.Millisecond), p95.Round(time.Millisecond),
		took[0].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
	// A push waits at most one syncPeriod (1s) for the next reconcile, half
	// of one on average; the rest is the metric read and the scale write.
	// The bounds leave room for a shared, loaded machine, not for a missed
	// reconcile on most trials.
	const wantP50, wantP95 = 1500 * time.Millisecond, 3 * time.Second
	if p50 > wantP50 {
		t.Errorf("median push → scale %s, want at most %s with syncPeriod 1s", p50, wantP50)
	}
	if p95 > wantP95 {
		t.Errorf("p95 push → scale %s, want at most %s with syncPeriod 1s", p95, wantP95)
	}
}

// TestAutoscalerRestart kills the controller inside a scale-down
// stabilization window: once restarted it keeps to the history saved in the
// status, neither scaling down before the window ends nor waiting a whole
// window again from the restart.
func TestAutoscalerRestart(t *testing.T) {
	needAutoscaler(t)
	ns := cluster.CreateNamespace(t, "restart")
	queue := "restart-" + ns
	const window = 45 * time.Second
	pushDepth(t, queue, 60)
	cluster.CreateDeployment(t, KwokDeployment(ns, "workers", 6, "100m", "10m"))
	ma := newMA(ns, "workers", 1, 10, time.Second, queueSpec(queue, "10"))
	ma.Spec.Behavior = scaleDownBehavior(int32(window/time.Second), 10, 15)
	createMA(t, ma)
	// A few reconciles at 6, so that 6 is what the history remembers.
	Eventually(t, 30*time.Second, 200*time.Millisecond, "the autoscaler's first status", func(ctx context.Context) (bool, string, error) {
		m, err := getMA(ctx, ns, "workers")
		if err != nil {
			return false, "", err
		}
		return m.Status.DesiredReplicas == 6 && m.Status.History != nil, fmt.Sprintf("status %+v", m.Status), nil
	})
	time.Sleep(3 * time.Second)

	dropped := time.Now()
	pushDepth(t, queue, 10) // the proposal is now 1
	time.Sleep(10 * time.Second)
	pid, err := autoscalerPid()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killing the autoscaler (pid %d) %s into the %s window", pid, time.Since(dropped).Round(time.Second), window)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { restartAutoscaler(t) })
	time.Sleep(3 * time.Second)
	restartAutoscaler(t)

	var scaledDown time.Time
	for time.Since(dropped) < window+30*time.Second {
		got, err := replicasOf(context.Background(), ns, "workers")
		if err == nil && got < 6 {
			scaledDown = time.Now()
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if scaledDown.IsZero() {
		t.Fatalf("no scale-down within %s of the drop", window+30*time.Second)
	}
	after := scaledDown.Sub(dropped)
	t.Logf("scaled down %s after the drop (window %s)", after.Round(100*time.Millisecond), window)
	if after < window-2*time.Second {
		t.Errorf("scaled down %s after the drop, before the %s window ended", after, window)
	}
	if after > window+12*time.Second {
		t.Errorf("scaled down %s after the drop: the restart forgot the history and waited a window again", after)
	}
}

func restartAutoscaler(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := cluster.RestartAutoscaler(ctx, ""); err != nil {
		t.Fatal(err)
	}
}

// TestAutoscalerFailover runs a second replica beside the cluster's one:
// it reconciles nothing while standing by, and takes over within the lease
// duration once the leader is killed.
func TestAutoscalerFailover(t *testing.T) {
	needAutoscaler(t)
	ns := cluster.CreateNamespace(t, "failover")
	queue := "failover-" + ns
	pushDepth(t, queue, 10)
	cluster.CreateDeployment(t, KwokDeployment(ns, "workers", 1, "100m", "10m"))
	createMA(t, newMA(ns, "workers", 1, 10, time.Second, queueSpec(queue, "10")))
	waitReplicas(t, ns, "workers", 1, 30*time.Second)

	const standbyAddr = "127.0.0.1:6447"
	standby := exec.Command(filepath.Join(cluster.Dir, "bin", "metricscale-autoscaler"),
		"--kubeconfig="+filepath.Join(cluster.Dir, "kubeconfigs", "metricscale-autoscaler.kubeconfig"),
		"--bind-address="+standbyAddr, "--leader-elect=true", "--leader-elect-namespace=metricscale",
		"--leader-elect-identity=e2e-standby", "-v=2")
	logFile, err := os.Create(filepath.Join(t.TempDir(), "standby.log"))
	if err != nil {
		t.Fatal(err)
	}
	standby.Stdout, standby.Stderr = logFile, logFile
	if err := standby.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = standby.Process.Kill()
		_ = standby.Wait()
		restartAutoscaler(t)
	})
	// The standby is ready (caches warm) but reconciles nothing.
	Eventually(t, 30*time.Second, 200*time.Millisecond, "the standby's readiness", func(ctx context.Context) (bool, string, error) {
		body, err := autoscalerGet(ctx, standbyAddr, "/readyz")
		return err == nil, body, nil
	})
	pushDepth(t, queue, 30)
	waitReplicas(t, ns, "workers", 3, 30*time.Second)
	if n := reconciles(t, standbyAddr); n != 0 {
		t.Errorf("the standby reconciled %d times while the leader ran", n)
	}

	pid, err := autoscalerPid()
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	pushDepth(t, queue, 50)
	waitReplicas(t, ns, "workers", 5, 15*time.Second+20*time.Second)
	took := time.Since(killed)
	t.Logf("the standby scaled %s after the leader was killed (lease duration 15s)", took.Round(100*time.Millisecond))
	if took > 15*time.Second+5*time.Second {
		t.Errorf("takeover took %s, more than the lease duration and a sync", took)
	}
	if n := reconciles(t, standbyAddr); n == 0 {
		t.Error("the standby never reconciled after taking over")
	}
	// Every rescale is one event: no write was made twice.
	events, err := cluster.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=SuccessfulRescale"})
	if err != nil {
		t.Fatal(err)
	}
	var count int32
	for _, e := range events.Items {
		count += e.Count
	}
	if count != 2 {
		t.Errorf("%d SuccessfulRescale events, want 2 (1→3, 3→5)", count)
	}
}

func httpGet(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(body), fmt.Errorf("GET %s: %d", url, resp.StatusCode)
	}
	return string(body), nil
}

// reconciles sums a controller's MetricAutoscaler reconciles from /metrics.
func reconciles(t *testing.T, addr string) int {
	t.Helper()
	body, err := autoscalerGet(context.Background(), addr, "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "metricscale_autoscaler_reconciliations_total{") && strings.Contains(line, `kind="MetricAutoscaler"`) {
			f := strings.Fields(line)
			n, _ := strconv.ParseFloat(f[len(f)-1], 64)
			total += int(n)
		}
	}
	return total
}

// TestAutoscalerSafety: dryRun and paused write no scale, and a failing
// metric blocks a scale-down, with an event and a condition saying why.
func TestAutoscalerSafety(t *testing.T) {
	needAutoscaler(t)
	ns := cluster.CreateNamespace(t, "safety")
	queue := "safety-" + ns
	pushDepth(t, queue, 100)

	cluster.CreateDeployment(t, KwokDeployment(ns, "dry", 1, "100m", "10m"))
	dry := newMA(ns, "dry", 1, 10, time.Second, queueSpec(queue, "10"))
	dry.Spec.DryRun = true
	createMA(t, dry)
	cluster.CreateDeployment(t, KwokDeployment(ns, "paused", 1, "100m", "10m"))
	paused := newMA(ns, "paused", 1, 10, time.Second, queueSpec(queue, "10"))
	paused.Spec.Paused = true
	createMA(t, paused)
	cluster.CreateDeployment(t, KwokDeployment(ns, "guarded", 4, "100m", "10m"))
	guarded := newMA(ns, "guarded", 1, 10, time.Second, queueSpec(queue+"-low", "10"), queueSpec(queue+"-never-pushed", "10"))
	guarded.Spec.Behavior = scaleDownBehavior(0, 10, 1)
	createMA(t, guarded)
	pushDepth(t, queue+"-low", 1) // alone, this metric would scale 4 → 1

	Eventually(t, 30*time.Second, 200*time.Millisecond, "the dry-run autoscaler to report 4 desired replicas", func(ctx context.Context) (bool, string, error) {
		m, err := getMA(ctx, ns, "dry")
		if err != nil {
			return false, "", err
		}
		return m.Status.DesiredReplicas == 4 && conditionsOf(m.Status.Conditions) != "", conditionsOf(m.Status.Conditions), nil
	})
	Eventually(t, 30*time.Second, 200*time.Millisecond, "the guarded autoscaler to report the failing metric", func(ctx context.Context) (bool, string, error) {
		m, err := getMA(ctx, ns, "guarded")
		if err != nil {
			return false, "", err
		}
		c := conditionsOf(m.Status.Conditions)
		return strings.Contains(c, "ScalingActive=False/FailedGetExternalMetric"), c, nil
	})
	time.Sleep(5 * time.Second) // five more reconciles of each

	for name, want := range map[string]int32{"dry": 1, "paused": 1, "guarded": 4} {
		if got, err := replicasOf(context.Background(), ns, name); err != nil || got != want {
			t.Errorf("Deployment %s: %d replicas (%v), want %d", name, got, err, want)
		}
	}
	if m, err := getMA(context.Background(), ns, "paused"); err != nil || m.Status.DesiredReplicas != 0 || len(m.Status.Conditions) != 0 {
		t.Errorf("the paused autoscaler wrote a status: %+v (%v)", m.Status, err)
	}
	events, err := cluster.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range events.Items {
		if e.InvolvedObject.Kind != "MetricAutoscaler" {
			continue
		}
		seen[e.InvolvedObject.Name+"/"+e.Reason] = true
		if e.InvolvedObject.Name == "paused" {
			t.Errorf("event on the paused autoscaler: %s %s", e.Reason, e.Message)
		}
	}
	for _, want := range []string{"dry/DryRunRescale", "guarded/FailedGetExternalMetric", "guarded/FailedComputeMetricsReplicas"} {
		if !seen[want] {
			t.Errorf("no %s event; events: %v", want, seen)
		}
	}
	if seen["dry/SuccessfulRescale"] || seen["guarded/SuccessfulRescale"] {
		t.Errorf("a rescale happened: %v", seen)
	}
}
