//go:build e2e && keda && kedabench

package e2e

// make bench-keda (hack/README.md): N KEDA ScaledObjects against N
// MetricAutoscalers, each on its own Redis list, one side after the other
// on the same cluster. Not in make test nor .ci/run: it takes minutes and
// needs KEDA's build (make e2e-keda's).

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/yaml"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	localcluster "github.com/metricscale/metricscale/hack/cluster"
)

const (
	// Each list starts with kbBaseline items (1 replica at kbPerPod a pod) and
	// every round pushes kbBurst more: +2 replicas a round, well past the
	// HPA's 10 % tolerance, within its default scale-up policies.
	kbBaseline = 5
	kbBurst    = 20
	kbPerPod   = 10
	kbMin      = 1
	kbMax      = 20
	// The metric the benchmark adds to the cluster's redis provider (a live
	// reload of the adapter's config): every list kedabench-ours-*, one
	// series each, labelled key=<list>.
	kbMetric     = "redis_kedabench_length"
	kbOursPrefix = "kedabench-ours-"
	kbKEDAPrefix = "kedabench-keda-"
	// Pushes of a round land at random times over kbSpread: any phase of a
	// 15 s sync period.
	kbSpread = 15 * time.Second
	// The aggregated API both sides serve; KEDA takes it for its side.
	externalAPIService = "v1beta1.external.metrics.k8s.io"
	kedaServiceName    = "keda-metrics-apiserver"
)

// kbSide is one autoscaler under measurement: the processes it needs, how
// it counts decisions, how its objects are made and sped up.
type kbSide struct {
	name     string
	ns       string
	prefix   string   // its lists' prefix
	procs    []string // hack/cluster components whose CPU and RSS count
	decided  func(t *testing.T) (all, ok int)
	create   func(ctx context.Context, i int) error
	ready    func(ctx context.Context) (int, error) // objects with a metric read and ScalingActive
	defaults string
	fast     string
	goFast   func(t *testing.T)
}

// kbResult is one side at one setting.
type kbResult struct {
	side, setting        string
	reactions            []time.Duration
	missed, offTarget    int
	window               time.Duration
	cpu                  float64
	cpuBy                map[string]float64
	decisions, ok        int
	redisCmds            int64
	redisBy              map[string]int64
	apiAll, apiOwn       float64
	idleAPIPerSecond     float64
	rssKiB, rssDeltaKiB  int64
	measuredMemory       bool
	apiBy                map[string]float64
	reachedRounds, total int
	// steady is the side's CPU and decisions over a window without
	// bursts, its objects all active: what its periodic work costs.
	steady *kbSteady
}

type kbSteady struct {
	window    time.Duration
	cpu       float64
	decisions int
}

// kbSteadyWindow is how long the steady state is measured.
const kbSteadyWindow = 30 * time.Second

// TestKEDABenchmark is issue 29's benchmark: N ScaledObjects (KEDA v2.21.0,
// its metrics server holding v1beta1.external.metrics.k8s.io as it is
// normally installed, kube-controller-manager's HPA controller alone in
// kube-controller-manager-hpa) and N MetricAutoscalers (metricscale's
// autoscaler and adapter, the adapter holding the APIService and reading
// the lists through its redis provider), each object on its own Redis
// list, the same targets and min/max, one side after the other. Per side
// and setting (the defaults, then the fastest documented settings): the
// reaction from the LPUSH of a burst to the scale write on the Deployment,
// CPU seconds per 1,000 decisions and RSS per object of the side's
// processes, Redis commands per second and kube-apiserver requests per
// decision. It prints a table.
func TestKEDABenchmark(t *testing.T) {
	needAutoscaler(t)
	n := envInt("METRICSCALE_BENCH_N", 100)
	rounds := envInt("METRICSCALE_BENCH_ROUNDS", 3)
	budget := time.Duration(envInt("METRICSCALE_BENCH_SIDE_MINUTES", 12)) * time.Minute
	ctx := context.Background()

	var out strings.Builder
	lc := localWithKEDA(t, &out, "make bench-keda starts one (hack/cluster.sh down first)")
	if _, err := componentPid(kcmHPA); err != nil {
		t.Fatalf("no %s: the benchmark needs hack/cluster.sh up --separate-hpa-controller (make bench-keda starts it; hack/cluster.sh down first): %v", kcmHPA, err)
	}
	if cluster.HPASyncPeriod != 15*time.Second {
		t.Fatalf("the cluster's HPA sync period is %s; the defaults measured are 15s (hack/cluster.sh down first)", cluster.HPASyncPeriod)
	}
	// make bench-keda always sets it (empty: KEDA's defaults); a running cluster must match.
	if v, ok := os.LookupEnv("METRICSCALE_BENCH_KEDA_API_QPS"); ok {
		if want, _ := strconv.Atoi(v); want != cluster.KEDAAPIQPS {
			t.Fatalf("the cluster's KEDA runs with --keda-api-qps %d (0: KEDA's defaults), not KEDA_API_QPS=%q (hack/cluster.sh down first)", cluster.KEDAAPIQPS, v)
		}
	}
	if cluster.PrometheusURL == "" {
		t.Fatal("the local cluster runs without Prometheus, so its adapter runs without a config and no redis provider")
	}
	redisBackend, err := cluster.runningBackend("redis")
	if err != nil {
		t.Fatal(err)
	}
	renv := redisBackend.Env(cluster.Dir)
	adminPassword, err := os.ReadFile(renv["METRICSCALE_REDIS_ADMIN_PASSWORD_FILE"])
	if err != nil {
		t.Fatal(err)
	}
	own := &commandCounter{}
	rdb := goredis.NewClient(&goredis.Options{Addr: renv["METRICSCALE_REDIS_ADDR"], Password: strings.TrimSpace(string(adminPassword)),
		PoolSize: 32, MinIdleConns: 32, DisableIdentity: true}) // connections opened up front: their HELLOs fall outside the windows
	rdb.AddHook(own)
	t.Cleanup(func() { _ = rdb.Close() })

	// Prometheus scrapes metricscale's processes every 5 s and KEDA's not at
	// all: stopped while the benchmark runs, so that neither side pays for it.
	if err := lc.StopPrometheus(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lc.StartPrometheus(context.Background()); err != nil {
			t.Logf("starting Prometheus again: %v", err)
		}
	})
	addBenchMetric(t)

	started := time.Now()
	b := &kedaBench{n: n, rounds: rounds, rdb: rdb, own: own, budget: budget}
	var results []kbResult
	// What was measured is printed also when a later part fails.
	defer func() { printKEDABenchmark(n, rounds, results, time.Since(started)) }()

	// METRICSCALE_BENCH_SIDES=ours (or keda) runs one side: at N = 1,000
	// KEDA's side did not get every object active within its wait here.
	sides := os.Getenv("METRICSCALE_BENCH_SIDES")
	if sides == "" {
		sides = "keda,ours"
	}
	if sides != "keda,ours" && sides != "keda" && sides != "ours" {
		t.Fatalf("METRICSCALE_BENCH_SIDES=%q: want keda,ours, keda or ours", sides)
	}
	if strings.Contains(sides, "keda") {
		// KEDA, as it is normally installed: its metrics server holds the APIService.
		keda := b.kedaSide(t, renv["METRICSCALE_REDIS_ADDR"], string(adminPassword))
		restore := b.apiServiceTo(t, localcluster.KEDANamespace, kedaServiceName, localcluster.KEDAMetricsServerPort)
		results = append(results, b.run(t, keda)...)
		b.clearKEDASide(t, keda.ns)
		restore()
	}
	if strings.Contains(sides, "ours") {
		ours := b.oursSide(t)
		results = append(results, b.run(t, ours)...)
	}
}

type kedaBench struct {
	n, rounds int
	rdb       *goredis.Client
	own       *commandCounter
	budget    time.Duration
}

func (b *kedaBench) list(s *kbSide, i int) string { return s.prefix + strconv.Itoa(i) }
func kbTarget(i int) string                       { return "w-" + strconv.Itoa(i) }

// kedaSide makes the namespace, Secret and TriggerAuthentication KEDA's
// Redis scaler reads with (the default user: its scaler runs a Lua script,
// which the adapter's read-only user may not).
func (b *kedaBench) kedaSide(t *testing.T, addr, password string) *kbSide {
	ctx := context.Background()
	ns := cluster.CreateNamespace(t, "kb-keda")
	if _, err := cluster.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "redis-auth"},
		StringData: map[string]string{"password": strings.TrimSpace(password)},
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
	s := &kbSide{
		name: "KEDA v2.21.0", ns: ns, prefix: kbKEDAPrefix,
		procs:    []string{"keda-operator", "keda-metrics-server", kcmHPA},
		defaults: "defaults: HPA sync 15s, pollingInterval 30s",
		fast:     "fast: HPA sync 1s, pollingInterval 1",
	}
	if q := cluster.KEDAAPIQPS; q > 0 {
		// Not KEDA's defaults: every row of the side says so.
		s.defaults += "; --keda-api-qps " + strconv.Itoa(q)
		s.fast += "; --keda-api-qps " + strconv.Itoa(q)
	}
	s.decided = func(t *testing.T) (int, int) {
		body, err := adminGet(kcmHPAAddr + "/metrics")
		if err != nil {
			t.Fatalf("%s /metrics: %v", kcmHPA, err)
		}
		return sumSeries(body, kcmCounter, ""), sumSeries(body, kcmCounter, `error="none"`)
	}
	s.create = func(ctx context.Context, i int) error {
		so := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
			"metadata": map[string]any{"name": kbTarget(i)},
			"spec": map[string]any{
				"scaleTargetRef":  map[string]any{"name": kbTarget(i)},
				"minReplicaCount": int64(kbMin), "maxReplicaCount": int64(kbMax),
				"triggers": []any{map[string]any{
					"type": "redis",
					"metadata": map[string]any{
						"address": addr, "listName": b.list(s, i), "listLength": strconv.Itoa(kbPerPod),
					},
					"authenticationRef": map[string]any{"name": "redis-auth"},
				}},
			},
		}}
		_, err := cluster.Dynamic.Resource(scaledObjectsGVR).Namespace(ns).Create(ctx, so, metav1.CreateOptions{})
		return err
	}
	s.ready = func(ctx context.Context) (int, error) {
		// From the watch cache (ResourceVersion "0"): at N = 1,000 a quorum
		// LIST timed out under KEDA's operator's load.
		l, err := cluster.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return 0, err
		}
		ready := 0
		for i := range l.Items {
			if scalingActive(l.Items[i].Status.Conditions) && len(l.Items[i].Status.CurrentMetrics) > 0 {
				ready++
			}
		}
		return ready, nil
	}
	s.goFast = func(t *testing.T) {
		// pollingInterval 1 (KEDA's own loop: activation) and the HPA
		// controller's sync period 1s (kube-controller-manager's flag).
		patch := []byte(`{"spec":{"pollingInterval":1}}`)
		create(t, b.n, func(i int) error {
			_, err := cluster.Dynamic.Resource(scaledObjectsGVR).Namespace(ns).Patch(context.Background(), kbTarget(i), types.MergePatchType, patch, metav1.PatchOptions{})
			return err
		})
		pid, err := componentPid(kcmHPA)
		if err != nil {
			t.Fatal(err)
		}
		args := cmdline(t, pid)
		stopPid(t, pid)
		startComponent(t, kcmHPA, withFlags(args, map[string]string{"--horizontal-pod-autoscaler-sync-period": "1s"}))
		t.Cleanup(func() {
			if pid, err := componentPid(kcmHPA); err == nil {
				stopPid(t, pid)
				startComponent(t, kcmHPA, args)
			}
		})
		// The new process takes its lease, then reconciles every HPA.
		Eventually(t, 2*time.Minute, time.Second, kcmHPA+" at 1s reconciling every HPA", func(context.Context) (bool, string, error) {
			body, err := adminGet(kcmHPAAddr + "/metrics")
			if err != nil {
				return false, err.Error(), nil
			}
			c := sumSeries(body, kcmCounter, "")
			return c >= b.n, fmt.Sprintf("%d reconciles", c), nil
		})
	}
	return s
}

// oursSide: MetricAutoscalers at their defaults (syncPeriod 15s, the
// adapter's change feed polling the lists every 1s).
func (b *kedaBench) oursSide(t *testing.T) *kbSide {
	ns := cluster.CreateNamespace(t, "kb-ours")
	s := &kbSide{
		name: "metricscale", ns: ns, prefix: kbOursPrefix,
		procs:    []string{"metricscale-autoscaler", "metricscale-adapter"},
		defaults: "defaults: syncPeriod 15s, feed " + benchFeed(),
		fast:     "fast: syncPeriod 1s, feed " + benchFeed(),
	}
	s.decided = func(t *testing.T) (int, int) {
		body, err := adminGet(oursAddr + "/metrics")
		if err != nil {
			t.Fatalf("metricscale-autoscaler /metrics: %v", err)
		}
		return sumSeries(body, oursCounter, `kind="MetricAutoscaler"`), sumSeries(body, oursCounter, `error="none",kind="MetricAutoscaler"`)
	}
	avg := resource.MustParse(strconv.Itoa(kbPerPod))
	s.create = func(ctx context.Context, i int) error {
		ma := newMA(ns, kbTarget(i), kbMin, kbMax, 0, autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: kbMetric, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"key": b.list(s, i)}}},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &avg},
		}})
		ma.Spec.SyncPeriod = nil // the default
		ma.APIVersion, ma.Kind = v1alpha1.GroupVersion.String(), "MetricAutoscaler"
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ma)
		if err != nil {
			return err
		}
		_, err = cluster.Dynamic.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: u}, metav1.CreateOptions{})
		return err
	}
	s.ready = func(ctx context.Context) (int, error) {
		l, err := cluster.Dynamic.Resource(v1alpha1.GroupVersionResource).Namespace(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return 0, err
		}
		ready := 0
		for i := range l.Items {
			var ma v1alpha1.MetricAutoscaler
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(l.Items[i].Object, &ma); err != nil {
				return 0, err
			}
			if scalingActive(ma.Status.Conditions) && len(ma.Status.CurrentMetrics) > 0 {
				ready++
			}
		}
		return ready, nil
	}
	s.goFast = func(t *testing.T) {
		patch := []byte(`{"spec":{"syncPeriod":"1s"}}`)
		create(t, b.n, func(i int) error {
			_, err := cluster.Dynamic.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Patch(context.Background(), kbTarget(i), types.MergePatchType, patch, metav1.PatchOptions{})
			return err
		})
		time.Sleep(5 * time.Second)
	}
	return s
}

func scalingActive(conds []autoscalingv2.HorizontalPodAutoscalerCondition) bool {
	for _, c := range conds {
		if c.Type == autoscalingv2.ScalingActive {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// run measures one side: its lists and Deployments, an idle window, its N
// objects, then the rounds at its defaults and at its fastest settings.
func (b *kedaBench) run(t *testing.T, s *kbSide) []kbResult {
	ctx := context.Background()
	began := time.Now()
	t.Logf("%s: preparing %d lists and Deployments in %s", s.name, b.n, s.ns)
	keys := make([]string, b.n)
	for i := range keys {
		keys[i] = b.list(s, i)
	}
	if err := b.rdb.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
	baseline := make([]any, kbBaseline)
	for i := range baseline {
		baseline[i] = "base"
	}
	pipe := b.rdb.Pipeline()
	for _, k := range keys {
		pipe.RPush(ctx, k, baseline...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.rdb.Del(context.Background(), keys...).Err() })
	create(t, b.n, func(i int) error {
		_, err := cluster.Client.AppsV1().Deployments(s.ns).Create(ctx, KwokDeployment(s.ns, kbTarget(i), kbMin, "10m", "1m"), metav1.CreateOptions{})
		return err
	})
	scales := watchScales(t, s.ns)
	// Their pods bound (kwok leaves them Pending): the idle window below
	// then measures no scheduling.
	Eventually(t, 5*time.Minute, 2*time.Second, s.name+": the Deployments' pods scheduled", func(ctx context.Context) (bool, string, error) {
		pods, err := cluster.Client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		bound := 0
		for i := range pods.Items {
			if pods.Items[i].Spec.NodeName != "" {
				bound++
			}
		}
		return bound >= b.n, fmt.Sprintf("%d/%d pods bound", bound, b.n), nil
	})

	// Idle: the side's processes without its objects.
	pids := b.pids(t, s)
	time.Sleep(5 * time.Second)
	idle0, idleAt := apiserverRequests(t), time.Now()
	time.Sleep(20 * time.Second)
	idle := (sumValues(apiserverRequests(t)) - sumValues(idle0)) / time.Since(idleAt).Seconds()
	rss0 := b.rss(t, pids)

	start := time.Now()
	create(t, b.n, func(i int) error { return s.create(ctx, i) })
	t.Logf("%s: %d objects created in %s", s.name, b.n, time.Since(start).Round(time.Second))
	// KEDA's operator, throttled by its client's default QPS, made about one
	// HPA a second at N = 1,000 here: allow 1.5 s an object.
	Eventually(t, 5*time.Minute+time.Duration(b.n)*1500*time.Millisecond, 2*time.Second, s.name+": every object has read its metric", func(ctx context.Context) (bool, string, error) {
		r, err := s.ready(ctx)
		return r >= b.n, fmt.Sprintf("%d/%d with a metric and ScalingActive", r, b.n), err
	})
	t.Logf("%s: all %d objects active %s after their creation", s.name, b.n, time.Since(start).Round(time.Second))

	steady := b.steady(t, s, pids)

	level := int32(kbMin)
	// A round's limit after its pushes: a few periods, and more for more objects.
	extra := time.Duration(b.n) * 50 * time.Millisecond
	res := b.measure(t, s, s.defaults, scales, &level, 60*time.Second+extra, pids)
	res.steady = steady
	res.idleAPIPerSecond = idle
	res.rssKiB = b.rss(t, pids)
	res.rssDeltaKiB = res.rssKiB - rss0
	b.saveHeapProfiles(t, s)
	res.measuredMemory = true
	t.Logf("%s, %s: %d reactions, p50 %s, %d missed; %d decisions", s.name, s.defaults, len(res.reactions), round(percentileOr0(res.reactions, 50)), res.missed, res.decisions)
	results := []kbResult{res}
	if time.Since(began) > b.budget/2 {
		t.Logf("%s: %s of its %s budget used; the fast settings are not measured", s.name, time.Since(began).Round(time.Second), b.budget)
		return results
	}
	s.goFast(t)
	fast := b.measure(t, s, s.fast, scales, &level, 30*time.Second+extra, b.pids(t, s))
	fast.idleAPIPerSecond = idle
	return append(results, fast)
}

func (b *kedaBench) pids(t *testing.T, s *kbSide) map[string]int {
	out := map[string]int{}
	for _, c := range s.procs {
		pid, err := componentPid(c)
		if err != nil {
			t.Fatalf("%s: no pid of %s: %v", s.name, c, err)
		}
		out[c] = pid
	}
	return out
}

func (b *kedaBench) rss(t *testing.T, pids map[string]int) int64 {
	var sum int64
	for _, pid := range pids {
		sum += rssKiB(t, pid)
	}
	return sum
}

// steady measures the side's CPU and decisions over kbSteadyWindow
// without a burst, after 15 s for its objects' first writes to settle:
// each object is decided at its sync period, and nothing changes.
func (b *kedaBench) steady(t *testing.T, s *kbSide, pids map[string]int) *kbSteady {
	time.Sleep(15 * time.Second)
	cpu0 := map[string]float64{}
	for c, pid := range pids {
		cpu0[c] = cpuSeconds(t, pid)
	}
	all0, _ := s.decided(t)
	at0 := time.Now()
	profiles := b.saveProfiles(t, s, "steady", kbSteadyWindow)
	time.Sleep(kbSteadyWindow)
	profiles.Wait()
	out := &kbSteady{window: time.Since(at0)}
	for c, pid := range pids {
		out.cpu += cpuSeconds(t, pid) - cpu0[c]
	}
	all1, _ := s.decided(t)
	out.decisions = all1 - all0
	t.Logf("%s, steady (no bursts, %s): %.2f CPU s, %d decisions", s.name, out.window.Round(time.Second), out.cpu, out.decisions)
	return out
}

// measure runs b.rounds rounds: each list gets a burst at a random time
// within kbSpread, and the round waits (at most kbSpread+limit) until every
// Deployment has been scaled up.
func (b *kedaBench) measure(t *testing.T, s *kbSide, setting string, scales *scaleLog, level *int32, limit time.Duration, pids map[string]int) kbResult {
	ctx := context.Background()
	res := kbResult{side: s.name, setting: setting, cpuBy: map[string]float64{}}
	cpu0 := map[string]float64{}
	for c, pid := range pids {
		cpu0[c] = cpuSeconds(t, pid)
	}
	all0, ok0 := s.decided(t)
	own0 := b.own.n.Load()
	total0, by0 := b.redisStats(t)
	api0 := apiserverRequests(t)
	at0 := time.Now()

	burst := make([]any, kbBurst)
	for i := range burst {
		burst[i] = "job"
	}
	profiles := b.saveProfiles(t, s, setting, kbSpread+10*time.Second)
	defer profiles.Wait()
	for r := range b.rounds {
		before := *level
		want := before + int32(kbBurst/kbPerPod)
		pushed := make([]time.Time, b.n)
		var wg sync.WaitGroup
		var failed atomic.Int64
		roundStart := time.Now()
		for i := range b.n {
			off := rand.N(kbSpread)
			wg.Go(func() {
				time.Sleep(off)
				pushed[i] = time.Now()
				if err := b.rdb.LPush(ctx, b.list(s, i), burst...).Err(); err != nil {
					failed.Add(1)
				}
			})
		}
		wg.Wait()
		if f := failed.Load(); f > 0 {
			t.Fatalf("%s: %d LPUSHes failed", s.name, f)
		}
		deadline := roundStart.Add(kbSpread + limit)
		var reacted int
		for {
			reacted = 0
			for i := range b.n {
				if _, _, ok := scales.after(kbTarget(i), pushed[i], before); ok {
					reacted++
				}
			}
			if reacted == b.n || time.Now().After(deadline) {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		for i := range b.n {
			at, replicas, ok := scales.after(kbTarget(i), pushed[i], before)
			if !ok {
				res.missed++
				continue
			}
			res.reactions = append(res.reactions, at.Sub(pushed[i]))
			if replicas != want {
				res.offTarget++
			}
		}
		t.Logf("%s, %s, round %d/%d: %d→%d replicas, %d of %d Deployments scaled within %s",
			s.name, setting, r+1, b.rounds, before, want, reacted, b.n, time.Since(roundStart).Round(time.Second))
		*level = want
		res.reachedRounds++
		// Settle: any late write of this round lands before the next one.
		time.Sleep(3 * time.Second)
	}
	res.total = b.n * b.rounds
	res.window = time.Since(at0)
	for c, pid := range pids {
		res.cpuBy[c] = cpuSeconds(t, pid) - cpu0[c]
		res.cpu += res.cpuBy[c]
	}
	all1, ok1 := s.decided(t)
	res.decisions, res.ok = all1-all0, ok1-ok0
	total1, by1 := b.redisStats(t)
	res.redisCmds = total1 - total0 - (b.own.n.Load() - own0)
	res.redisBy = map[string]int64{}
	for c, v := range by1 {
		if d := v - by0[c]; d > 0 && c != "lpush" && c != "info" {
			res.redisBy[c] = d
		}
	}
	api1 := apiserverRequests(t)
	res.apiBy = map[string]float64{}
	for k, v := range api1 {
		if d := v - api0[k]; d > 0 {
			res.apiBy[k] = d
			res.apiAll += d
			if ownRequest(k) {
				res.apiOwn += d
			}
		}
	}
	if res.decisions == 0 {
		t.Fatalf("%s (%s) made no decision in %s", s.name, setting, res.window)
	}
	if res.ok < res.decisions*99/100 {
		t.Errorf("%s (%s): only %d of its %d decisions succeeded", s.name, setting, res.ok, res.decisions)
	}
	return res
}

// saveProfiles, with METRICSCALE_BENCH_PROFILES=DIR, saves CPU profiles of
// our side's processes over window (a setting's first round: the bursts'
// spread and 10 s more; or the steady window) as
// DIR/NAME-nN-SETTING.cpu.pprof; KEDA's side serves none.
func (b *kedaBench) saveProfiles(t *testing.T, s *kbSide, setting string, window time.Duration) *sync.WaitGroup {
	var wg sync.WaitGroup
	dir := os.Getenv("METRICSCALE_BENCH_PROFILES")
	if dir == "" || s.prefix != kbOursPrefix {
		return &wg
	}
	name, _, _ := strings.Cut(setting, ":")
	seconds := int(window.Seconds())
	for proc, addr := range map[string]string{"metricscale-autoscaler": oursAddr, "metricscale-adapter": adapterAddr} {
		url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", addr, seconds)
		wg.Go(func() { saveProfile(t, url, filepath.Join(dir, fmt.Sprintf("%s-n%d-%s.cpu.pprof", proc, b.n, name))) })
	}
	return &wg
}

// saveHeapProfiles, with METRICSCALE_BENCH_PROFILES=DIR, saves heap profiles
// of our side's processes when their RSS is measured, as
// DIR/NAME-nN.heap.pprof.
func (b *kedaBench) saveHeapProfiles(t *testing.T, s *kbSide) {
	dir := os.Getenv("METRICSCALE_BENCH_PROFILES")
	if dir == "" || s.prefix != kbOursPrefix {
		return
	}
	for proc, addr := range map[string]string{"metricscale-autoscaler": oursAddr, "metricscale-adapter": adapterAddr} {
		saveProfile(t, addr+"/debug/pprof/heap", filepath.Join(dir, fmt.Sprintf("%s-n%d.heap.pprof", proc, b.n)))
	}
}

// redisStats is Redis' total_commands_processed and the calls per command
// (INFO commandstats).
func (b *kedaBench) redisStats(t *testing.T) (int64, map[string]int64) {
	info, err := b.rdb.Info(context.Background(), "stats", "commandstats").Result()
	if err != nil {
		t.Fatalf("redis INFO: %v", err)
	}
	var total int64
	by := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "total_commands_processed:"); ok {
			total, _ = strconv.ParseInt(v, 10, 64)
		}
		if rest, ok := strings.CutPrefix(line, "cmdstat_"); ok {
			name, stats, _ := strings.Cut(rest, ":")
			calls, _, _ := strings.Cut(strings.TrimPrefix(stats, "calls="), ",")
			by[name], _ = strconv.ParseInt(calls, 10, 64)
		}
	}
	return total, by
}

// commandCounter counts the benchmark's own Redis commands, which the
// sides' figures leave out.
type commandCounter struct{ n atomic.Int64 }

func (c *commandCounter) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (c *commandCounter) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *commandCounter) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

var labelPair = regexp.MustCompile(`(\w+)="([^"]*)"`)

// apiserverRequests is kube-apiserver's apiserver_request_total by
// "resource[/subresource] verb".
func apiserverRequests(t *testing.T) map[string]float64 {
	body, err := adminGet(fmt.Sprintf("https://127.0.0.1:%d/metrics", localcluster.APIServerPort))
	if err != nil {
		t.Fatalf("kube-apiserver /metrics: %v", err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		rest, ok := strings.CutPrefix(line, "apiserver_request_total{")
		if !ok {
			continue
		}
		labels, value, _ := strings.Cut(rest, "} ")
		l := map[string]string{}
		for _, m := range labelPair.FindAllStringSubmatch(labels, -1) {
			l[m[1]] = m[2]
		}
		key := l["resource"]
		if l["subresource"] != "" {
			key += "/" + l["subresource"]
		}
		v, _ := strconv.ParseFloat(strings.TrimSpace(value), 64)
		out[key+" "+l["verb"]] += v
	}
	return out
}

// ownRequest: the autoscaler's own objects and the scale subresource, as
// against what the scaling causes (ReplicaSets, pods, bindings, events) and
// the cluster's background (leases, nodes).
func ownRequest(key string) bool {
	res, _, _ := strings.Cut(key, " ")
	base, sub, _ := strings.Cut(res, "/")
	return sub == "scale" || base == "horizontalpodautoscalers" || base == "metricautoscalers" || base == "scaledobjects"
}

func sumValues(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

// scaleLog records every change of spec.replicas of the Deployments of a
// namespace, with the time its watch event arrived.
type scaleLog struct {
	mu     sync.Mutex
	last   map[string]int32
	events map[string][]scaleEvent
}

type scaleEvent struct {
	at       time.Time
	replicas int32
}

func watchScales(t *testing.T, ns string) *scaleLog {
	l := &scaleLog{last: map[string]int32{}, events: map[string][]scaleEvent{}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	list, err := cluster.Client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		l.last[list.Items[i].Name] = *list.Items[i].Spec.Replicas
	}
	rv := list.ResourceVersion
	go func() {
		for ctx.Err() == nil {
			w, err := cluster.Client.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				time.Sleep(time.Second)
				continue
			}
			for ev := range w.ResultChan() {
				now := time.Now()
				if ev.Type == watch.Error {
					if st, ok := ev.Object.(*metav1.Status); ok && st.Code == 410 {
						rv = "" // gone: start over from the current state
					}
					break
				}
				d, ok := ev.Object.(interface {
					GetResourceVersion() string
				})
				if !ok {
					continue
				}
				rv = d.GetResourceVersion()
				if ev.Type == watch.Added || ev.Type == watch.Modified {
					l.record(ev.Object, now)
				}
			}
			w.Stop()
		}
	}()
	return l
}

func (l *scaleLog) record(obj runtime.Object, at time.Time) {
	d, ok := obj.(*appsv1.Deployment)
	if !ok || d.Spec.Replicas == nil {
		return
	}
	name, r := d.Name, *d.Spec.Replicas
	l.mu.Lock()
	defer l.mu.Unlock()
	if prev, ok := l.last[name]; ok && prev == r {
		return
	}
	l.last[name] = r
	l.events[name] = append(l.events[name], scaleEvent{at: at, replicas: r})
}

// after is the first write after since that set spec.replicas above above.
func (l *scaleLog) after(name string, since time.Time, above int32) (time.Time, int32, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.events[name] {
		if !e.at.Before(since) && e.replicas > above {
			return e.at, e.replicas, true
		}
	}
	return time.Time{}, 0, false
}

// apiServiceTo points v1beta1.external.metrics.k8s.io at ns/svc:port (an
// ExternalName Service to localhost, as the cluster registers its aggregated
// APIs) and waits until it is Available; the returned func points it back.
func (b *kedaBench) apiServiceTo(t *testing.T, ns, svc string, port int) func() {
	ctx := context.Background()
	orig, err := cluster.Kubectl(ctx, "get", "apiservice", externalAPIService, "-o", "jsonpath={.spec.service.namespace} {.spec.service.name} {.spec.service.port}")
	if err != nil {
		t.Fatalf("reading APIService %s: %v: %s", externalAPIService, err, orig)
	}
	f := strings.Fields(orig)
	if len(f) != 3 {
		t.Fatalf("APIService %s has no service: %q", externalAPIService, orig)
	}
	if _, err := cluster.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: svc},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"},
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	point := func(ns, name, port string) error {
		patch := fmt.Sprintf(`{"spec":{"service":{"namespace":%q,"name":%q,"port":%s}}}`, ns, name, port)
		if out, err := cluster.Kubectl(ctx, "patch", "apiservice", externalAPIService, "--type=merge", "-p", patch); err != nil {
			return fmt.Errorf("pointing %s at %s/%s: %w: %s", externalAPIService, ns, name, err, out)
		}
		if out, err := cluster.Kubectl(ctx, "wait", "--for=condition=Available", "apiservice/"+externalAPIService, "--timeout=90s"); err != nil {
			return fmt.Errorf("%s at %s/%s not Available: %w: %s", externalAPIService, ns, name, err, out)
		}
		return nil
	}
	var once sync.Once
	restore := func() {
		once.Do(func() {
			if err := point(f[0], f[1], f[2]); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(restore)
	if err := point(ns, svc, strconv.Itoa(port)); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s points at %s/%s:%d", externalAPIService, ns, svc, port)
	return restore
}

// clearKEDASide deletes the side's ScaledObjects and waits until KEDA
// has removed their HPAs: the HPA controller then idles for the other side.
// Then it deletes the side's Deployments and their pods, so that the other
// side starts on the cluster the first one had: left, they filled
// metricscale's caches (its adapter's pods, its autoscaler's Deployments)
// with thousands of objects that were not its own, and its memory and GC
// with them.
func (b *kedaBench) clearKEDASide(t *testing.T, ns string) {
	start := time.Now()
	// Deleting 1,000 ScaledObjects (KEDA's finalizer on each) can outlast
	// the request's timeout on a busy machine: the server then resets the
	// stream, having deleted some. Asked again until one call succeeds:
	// on 2026-11-28 that took more than 5 minutes once.
	deleteAll := func(what string, del func(context.Context) error) {
		Eventually(t, 10*time.Minute, 2*time.Second, "KEDA's side's "+what+" deleted", func(ctx context.Context) (bool, string, error) {
			if err := del(ctx); err != nil {
				return false, err.Error(), nil
			}
			return true, "", nil
		})
	}
	deleteAll("ScaledObjects", func(ctx context.Context) error {
		return cluster.Dynamic.Resource(scaledObjectsGVR).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	})
	Eventually(t, 3*time.Minute, 2*time.Second, "KEDA's HPAs gone", func(ctx context.Context) (bool, string, error) {
		l, err := cluster.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		return len(l.Items) == 0, fmt.Sprintf("%d HPAs left", len(l.Items)), nil
	})
	apps := cluster.Client.AppsV1()
	deleteAll("Deployments", func(ctx context.Context) error {
		return apps.Deployments(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	})
	// The ReplicaSets first: while one is left, it makes its pods again.
	none := func(what string, list func(context.Context, metav1.ListOptions) (int, error)) func(context.Context) (bool, string, error) {
		return func(ctx context.Context) (bool, string, error) {
			n, err := list(ctx, metav1.ListOptions{Limit: 1})
			return n == 0, fmt.Sprintf("%s left", what), err
		}
	}
	Eventually(t, 5*time.Minute, 2*time.Second, "KEDA's side's ReplicaSets gone", none("ReplicaSets", func(ctx context.Context, o metav1.ListOptions) (int, error) {
		l, err := apps.ReplicaSets(ns).List(ctx, o)
		if err != nil {
			return 0, err
		}
		return len(l.Items), nil
	}))
	zero := int64(0)
	deleteAll("pods", func(ctx context.Context) error {
		return cluster.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	})
	Eventually(t, 5*time.Minute, 2*time.Second, "KEDA's side's pods gone", none("pods", func(ctx context.Context, o metav1.ListOptions) (int, error) {
		l, err := cluster.Client.CoreV1().Pods(ns).List(ctx, o)
		if err != nil {
			return 0, err
		}
		return len(l.Items), nil
	}))
	t.Logf("KEDA's side: ScaledObjects, HPAs, Deployments and pods deleted in %s", time.Since(start).Round(time.Second))
}

// benchFeed is the redis provider's feed the run uses: METRICSCALE_BENCH_FEED=keyspace,
// or polling every 1s.
func benchFeed() string {
	if os.Getenv("METRICSCALE_BENCH_FEED") == "keyspace" {
		return "keyspace"
	}
	return "poll 1s"
}

// addBenchMetric adds redis_kedabench_length (every list kedabench-ours-*)
// to the cluster's redis provider and leaves out every provider but redis
// and memory, restarting the adapter with that config; the original config
// and adapter are restored at the end. The providers left out do work of
// their own that KEDA's side does not pay for: keda and federated discover
// their remotes every 5 s (KEDA's metrics server among them), and prom
// relists Prometheus and serves metrics.k8s.io, for which the adapter
// watches every pod and node (nothing reads it here: no APIService names
// the adapter for it). A live reload cannot drop the metrics.k8s.io route,
// hence the restart.
func addBenchMetric(t *testing.T) {
	file := filepath.Join(cluster.Dir, "adapter", "config.yaml")
	original, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("the adapter's config: %v", err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(original, &cfg); err != nil {
		t.Fatal(err)
	}
	provs, _ := cfg["providers"].([]any)
	var kept []any
	keptNames := map[any]bool{}
	for _, p := range provs {
		pm, _ := p.(map[string]any)
		if pm["name"] == "redis" || pm["type"] == "memory" {
			kept = append(kept, p)
			keptNames[pm["name"]] = true
		}
	}
	var routes []any
	rs, _ := cfg["routes"].([]any)
	for _, r := range rs {
		if rm, _ := r.(map[string]any); keptNames[rm["provider"]] {
			routes = append(routes, r)
		}
	}
	cfg["providers"], cfg["routes"] = kept, routes
	found := false
	for _, p := range kept {
		pm, _ := p.(map[string]any)
		if pm["name"] != "redis" {
			continue
		}
		opts, _ := pm["options"].(map[string]any)
		if opts == nil {
			break
		}
		metrics, _ := opts["metrics"].([]any)
		opts["metrics"] = append(metrics, map[string]any{"name": kbMetric, "type": "listLength", "keyPattern": kbOursPrefix + "*"})
		if benchFeed() == "keyspace" {
			opts["feed"] = "keyspace"
		}
		found = true
	}
	if !found {
		t.Fatalf("no provider redis with options in %s (hack/backends/redis.yaml)", file)
	}
	changed, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	restart := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		return cluster.RestartAdapter(ctx)
	}
	t.Cleanup(func() {
		writeAtomically(t, file, original)
		if err := restart(); err != nil {
			t.Logf("the adapter with its original config: %v", err)
		}
	})
	writeAtomically(t, file, changed)
	if err := restart(); err != nil {
		t.Fatal(err)
	}
	waitConfigHash(t, adapterMetricsClient(t), changed)
	waitFeedConnected(t, true)
}

func printKEDABenchmark(n, rounds int, results []kbResult, took time.Duration) {
	fmt.Printf("\n%d objects a side, each on its own Redis list (%d items, then +%d a round: +2 replicas at %d a pod; min %d, max %d); %d rounds a setting, pushes spread over %s; run took %s\n",
		n, kbBaseline, kbBurst, kbPerPod, kbMin, kbMax, rounds, kbSpread, took.Round(time.Second))
	w := 44 // the setting's column: wider with --keda-api-qps
	for _, r := range results {
		w = max(w, len(r.setting))
	}
	fmt.Printf("%-14s %-*s %8s %8s %8s %8s %7s %9s %9s %9s %9s %9s %9s %9s\n", "side", w, "setting", "scaled", "p50 s", "p99 s", "max s",
		"missed", "dec/s", "CPU s/1k", "RSS MiB", "KiB/obj", "redis/s", "API/dec", "own/dec")
	for _, r := range results {
		lat := slices.Clone(r.reactions)
		p50, p99, mx := "-", "-", "-"
		if len(lat) > 0 {
			p50, p99, mx = secs(percentile(lat, 50)), secs(percentile(lat, 99)), secs(slices.Max(lat))
		}
		rss, perObj := "-", "-"
		if r.measuredMemory {
			rss, perObj = fmt.Sprintf("%.0f", float64(r.rssKiB)/1024), fmt.Sprintf("%.1f", float64(r.rssDeltaKiB)/float64(n))
		}
		net := r.apiAll - r.idleAPIPerSecond*r.window.Seconds()
		fmt.Printf("%-14s %-*s %8d %8s %8s %8s %7d %9.1f %9.3f %9s %9s %9.1f %9.2f %9.2f\n", r.side, w, r.setting,
			len(r.reactions), p50, p99, mx, r.missed, float64(r.decisions)/r.window.Seconds(), r.cpu/float64(r.decisions)*1000,
			rss, perObj, float64(r.redisCmds)/r.window.Seconds(), net/float64(r.decisions), r.apiOwn/float64(r.decisions))
	}
	if q := cluster.KEDAAPIQPS; q > 0 {
		fmt.Printf("KEDA ran with raised limits, not its defaults (hack/cluster.sh up --keda-api-qps %d): %s.\n", q, localcluster.KEDARaisedLimits(q))
	}
	fmt.Printf("scaled: bursts whose Deployment was scaled up (of %d a setting; missed: not within the round's limit). Reaction: from just before the LPUSH to the watch event of the Deployment's new spec.replicas.\n", n*rounds)
	fmt.Printf("dec/s: decisions a second (kube-controller-manager-hpa's reconciles of KEDA's HPAs; metricscale-autoscaler's MetricAutoscaler reconciles). CPU s/1k: CPU seconds of the side's processes per 1,000 decisions, over the rounds. RSS MiB: the side's processes after the default rounds; KiB/obj: their RSS growth from before the objects existed, per object.\n")
	fmt.Printf("redis/s: Redis commands a second over the rounds, the benchmark's own (LPUSH, INFO) left out. API/dec: kube-apiserver requests per decision, less the side's idle rate before its objects (scaling's pods and ReplicaSets included); own/dec: those on HPAs, ScaledObjects, MetricAutoscalers and /scale.\n\n")
	for _, r := range results {
		fmt.Printf("%s, %s (%s):\n", r.side, r.setting, r.window.Round(time.Second))
		fmt.Printf("  CPU s:")
		for _, c := range slices.Sorted(maps.Keys(r.cpuBy)) {
			fmt.Printf(" %s %.2f", c, r.cpuBy[c])
		}
		fmt.Printf("; decisions %d (%d without error); bursts not scaled to the expected size first: %d\n", r.decisions, r.ok, r.offTarget)
		if st := r.steady; st != nil && st.decisions > 0 {
			fmt.Printf("  steady, before the rounds (no bursts, %s): %.2f CPU s (%.0f ms a second), %d decisions (%.1f/s): CPU s/1k %.3f\n",
				st.window.Round(time.Second), st.cpu, 1000*st.cpu/st.window.Seconds(), st.decisions, float64(st.decisions)/st.window.Seconds(), 1000*st.cpu/float64(st.decisions))
		}
		fmt.Printf("  redis calls:")
		for _, c := range topKeys(r.redisBy, 8) {
			fmt.Printf(" %s %d", c, r.redisBy[c])
		}
		fmt.Printf("\n  apiserver requests (idle rate %.1f/s):", r.idleAPIPerSecond)
		api := map[string]int64{}
		for k, v := range r.apiBy {
			api[k] = int64(v)
		}
		for _, k := range topKeys(api, 12) {
			fmt.Printf(" [%s] %d", k, api[k])
		}
		fmt.Printf("\n")
		fmt.Printf("  reactions (s): %s\n", reactionSummary(r.reactions))
	}
	fmt.Println()
}

func percentileOr0(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return percentile(d, p)
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f", d.Seconds()) }

func topKeys(m map[string]int64, k int) []string {
	keys := slices.Collect(maps.Keys(m))
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	if len(keys) > k {
		keys = keys[:k]
	}
	return keys
}

// reactionSummary is the deciles of the reactions.
func reactionSummary(lat []time.Duration) string {
	if len(lat) == 0 {
		return "none"
	}
	var parts []string
	for _, p := range []int{0, 10, 25, 50, 75, 90, 99, 100} {
		v := slices.Min(lat)
		if p > 0 {
			v = percentile(lat, p)
		}
		parts = append(parts, fmt.Sprintf("p%d %s", p, secs(v)))
	}
	return strings.Join(parts, ", ")
}
