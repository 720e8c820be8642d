// Command demo is `make demo`: a queue fills and drains on the local
// cluster while metricscale scales its workers. It brings the stack up
// (package hack/cluster: hack/cluster.sh up --no-prometheus --no-backends, or
// --backends NAME), deploys a worker Deployment and a MetricAutoscaler
// on the External metric queue_messages_ready, runs a queue model that
// pushes the queue's depth to the adapter every second and drains it at
// ready replicas × a per-pod rate, then prints a summary and writes a
// timeline plot. Everything it started is stopped at the end, also on
// Ctrl-C, unless --keep.
//
// With --backend NAME (make demo BACKEND=NAME) the queue is the real broker
// of hack/backends (NAME.go) instead: the demo publishes the arriving jobs to
// it, the workers consume from it, the autoscaler targets the metric the
// adapter serves from it, and the depth shown is the adapter's answer.
//
// With --real-node (make demo NODE=real; the backend is redis unless --backend
// names another that pods reach) the workers are real: pods of the worker image
// (hack/worker, make images) on the local cluster's real node (hack/cluster.sh
// up --real-node), consuming from the broker one job per 1/drainRate s; the demo
// only publishes the arriving jobs.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/plot"
	"github.com/metricscale/metricscale/hack/backends"
	"github.com/metricscale/metricscale/hack/cluster"
)

const (
	namespace = "metricscale-demo"
	name      = "workers"
	perPod    = 30 // queue_messages_ready per worker the autoscaler aims at
	drainRate = 10 // jobs a ready worker finishes per second
)

// phase is a stretch of the traffic pattern: arrivals per second move
// linearly from From to To.
type phase struct {
	Name     string
	Seconds  int
	From, To float64
}

var (
	pattern = []phase{
		{"quiet", 20, 4, 4},
		{"ramp", 40, 4, 60},
		{"spike", 30, 150, 150},
		{"quiet", 60, 4, 4},
	}
	fastPattern = []phase{
		{"quiet", 5, 4, 4},
		{"ramp", 10, 4, 60},
		{"spike", 15, 150, 150},
		{"quiet", 30, 4, 4},
	}
)

// Summary is what the demo reports at the end.
type Summary struct {
	PeakDepth       int     `json:"peakDepth"`
	PeakReplicas    int32   `json:"peakReplicas"`
	FinalDepth      int     `json:"finalDepth"`
	FinalReplicas   int32   `json:"finalReplicas"`
	DrainSeconds    int     `json:"drainSeconds"` // from the end of the spike until the queue was empty
	ReplicaSeconds  float64 `json:"replicaSeconds"`
	Plot            string  `json:"plot"`
	PNG             string  `json:"png,omitempty"`
	DurationSeconds int     `json:"durationSeconds"`
}

func main() {
	keep := flag.Bool("keep", false, "leave the stack and the demo running for kubectl exploration")
	fast := flag.Bool("fast", false, "a shortened traffic pattern (for tests)")
	out := flag.String("out", "_output", "folder for the timeline plot")
	summaryFile := flag.String("summary-json", "", "also write the summary as JSON to this file")
	backendName := flag.String("backend", "", "run the queue in this broker of the local cluster ("+strings.Join(backendNames(), ", ")+"); default: push the depth of a modelled queue")
	realNode := flag.Bool("real-node", false, "real worker pods on the local cluster's real node (hack/cluster.sh up --real-node), consuming from the broker (--backend, default "+backends.PodBackend()+")")
	workerImage := flag.String("worker-image", "_output/images/worker-v0.1.0.tar", "with --real-node: the worker image's archive (make images)")
	workerRef := flag.String("worker-ref", "ghcr.io/metricscale/worker:v0.1.0", "with --real-node: the worker image's name in that archive")
	flag.Parse()
	var real *realWorkers
	if *realNode {
		real = &realWorkers{archive: *workerImage, ref: *workerRef}
		if *backendName == "" {
			*backendName = backends.PodBackend()
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code := 0
	if *backendName != "" {
		// Before anything starts: a typo should not cost a cluster start.
		if _, err := lookupBackend(*backendName); err != nil {
			fmt.Fprintf(os.Stderr, "demo: %v\n", err)
			os.Exit(2)
		}
	}
	if err := run(ctx, *keep, *fast, *out, *summaryFile, *backendName, real); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		code = 1
	}
	os.Exit(code)
}

func run(ctx context.Context, keep, fast bool, outDir, summaryFile, backendName string, real *realWorkers) (err error) {
	root, err := cluster.FindRepoRoot()
	if err != nil {
		return err
	}
	local, err := cluster.Open(root, "", io.Discard, io.Discard)
	if err != nil {
		return err
	}
	startedCluster := false
	if local.Status(ctx) != nil {
		// Only what this demo uses: the adapter's push endpoint (its memory provider), or
		// with --backend that one broker, whose adapter config needs Prometheus.
		args := []string{"up", "--hpa-sync-period", "5s", "--no-prometheus", "--no-backends"}
		if backendName != "" {
			args = []string{"up", "--hpa-sync-period", "5s", "--backends", backendName}
		}
		if real != nil {
			args = append(args, "--real-node")
		}
		fmt.Printf("==> bringing up the local stack (hack/cluster.sh %s; the first run builds Kubernetes, ~10-25 min)\n", strings.Join(args, " "))
		up, _, err := cluster.Command(root, args, os.Stdout, os.Stderr)
		if err != nil {
			return err
		}
		if err := up.Up(ctx); err != nil {
			return fmt.Errorf("hack/cluster.sh up: %w", err)
		}
		local = up
		startedCluster = true
	}
	env, err := local.EnvMap()
	if err != nil {
		return fmt.Errorf("hack/cluster.sh env: %w", err)
	}
	if env["METRICSCALE_PUSH_URL"] == "" {
		return errors.New("the local cluster runs without the metricscale adapter (started with --kubernetes-only?); restart it: hack/cluster.sh down && make demo")
	}
	// The metric: the pushed one, or the one the adapter serves from the broker.
	be := backend{metric: "queue_messages_ready", selector: map[string]string{"queue": "demo"}}
	if backendName != "" {
		if be, err = lookupBackend(backendName); err != nil {
			return err
		}
		if !slices.Contains(strings.Fields(env["METRICSCALE_BACKENDS"]), backendName) {
			return fmt.Errorf("the local cluster does not run the %s backend (it runs: %q; started with --no-backends?); restart it: hack/cluster.sh down && make demo BACKEND=%s", backendName, env["METRICSCALE_BACKENDS"], backendName)
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", env["KUBECONFIG"])
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}

	cleanup := func() {
		if keep {
			fmt.Printf("\n--keep: the demo runs on. Explore it with:\n  eval \"$(hack/cluster.sh env)\"\n  kubectl -n %s get mas,deploy,pods\n  kubectl -n %s describe mas %s\nStop everything with: hack/cluster.sh down\n", namespace, namespace, name)
			return
		}
		fmt.Println("==> cleaning up")
		// A fresh context: the run's may be cancelled by Ctrl-C.
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = kube.CoreV1().Namespaces().Delete(cctx, namespace, metav1.DeleteOptions{})
		if real != nil && real.restore != nil && !startedCluster {
			real.restore(cctx)
		}
		if startedCluster {
			if err := local.Down(cctx); err != nil {
				fmt.Fprintf(os.Stderr, "demo: hack/cluster.sh down: %v\n", err)
			}
		}
	}
	defer cleanup()

	var pod *corev1.PodSpec // default: the modelled workers on the kwok nodes
	if real != nil {
		if env, err = real.prepare(ctx, local, kube, backendName); err != nil {
			return err
		}
	}

	var q queue
	if backendName != "" {
		fmt.Printf("==> emptying the %s queue (%s{%s})\n", backendName, be.metric, selectorString(be.selector))
		if q, err = be.open(ctx, env); err != nil {
			return err
		}
		defer q.Close()
		// Leftovers of an earlier run must not start the autoscaler off high:
		// wait until the adapter, past its cache, reads the emptied queue.
		if err := waitEmpty(ctx, kube, be); err != nil {
			return err
		}
	}
	fmt.Printf("==> deploying %s/%s and its MetricAutoscaler (%s, %d per worker)\n", namespace, name, be.metric, perPod)
	if real != nil {
		fmt.Printf("    real workers on node %s: %s, %s per job\n", real.node, real.ref, time.Second/drainRate)
		var secret *corev1.Secret
		var vars []corev1.EnvVar
		if secret, vars, err = backendSecret(env, backendName); err != nil {
			return err
		}
		spec := real.podSpec(backendName, vars)
		pod = &spec
		defer func() {
			// a failed run shows why the pods did not work
			if err != nil {
				describeWorkers(context.Background(), kube)
			}
		}()
		if err := deploy(ctx, kube, dyn, be, pod, secret); err != nil {
			return err
		}
	} else if err := deploy(ctx, kube, dyn, be, nil, nil); err != nil {
		return err
	}
	phases := pattern
	if fast {
		phases = fastPattern
	}
	tl, sum, err := model(ctx, kube, dyn, env, phases, be, q, real != nil)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	sum.Plot, err = filepath.Abs(filepath.Join(outDir, "demo-timeline.svg"))
	if err != nil {
		return err
	}
	if err := writePlot(tl, sum.Plot, be.metric); err != nil {
		return err
	}
	if png := strings.TrimSuffix(sum.Plot, ".svg") + ".png"; toPNG(sum.Plot, png) == nil {
		sum.PNG = png
	}
	fmt.Printf("\n==> summary\n  peak queue depth      %d\n  peak replicas         %d\n  time to drain         %ds after the spike\n  replica-seconds used  %.0f\n  timeline plot         %s\n",
		sum.PeakDepth, sum.PeakReplicas, sum.DrainSeconds, sum.ReplicaSeconds, sum.Plot)
	if sum.PNG != "" {
		fmt.Printf("                        %s\n", sum.PNG)
	}
	if summaryFile != "" {
		data, _ := json.MarshalIndent(sum, "", "  ")
		if err := os.WriteFile(summaryFile, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// deploy creates the namespace, the workers' Deployment and its MetricAutoscaler; with
// pod, the Deployment runs it (real workers) instead of the kwok placeholder, and secret
// (the broker's passwords) is created first.
func deploy(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface, be backend, pod *corev1.PodSpec, secret *corev1.Secret) error {
	// Start from a clean namespace.
	if err := kube.CoreV1().Namespaces().Delete(ctx, namespace, metav1.DeleteOptions{}); err == nil {
		for {
			if _, err := kube.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", namespace, err)
	}
	if secret != nil {
		if _, err := kube.CoreV1().Secrets(namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Secret %s/%s: %w", namespace, secret.Name, err)
		}
	}
	one := int32(1)
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					// The local cluster's fake kwok nodes run these pods.
					NodeSelector: map[string]string{"type": "kwok"},
					Tolerations:  []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpEqual, Value: "fake", Effect: corev1.TaintEffectNoSchedule}},
					Containers:   []corev1.Container{{Name: "worker", Image: "metricscale/demo-worker"}},
				},
			},
		},
	}
	if pod != nil {
		d.Spec.Template.Spec = *pod
	}
	if _, err := kube.AppsV1().Deployments(namespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Deployment %s/%s: %w", namespace, name, err)
	}
	avg := resource.MustParse(fmt.Sprint(perPod))
	window, downPods, period := int32(20), int32(2), int32(10)
	ma := &v1alpha1.MetricAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "MetricAutoscaler"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: v1alpha1.MetricAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name},
			MinReplicas:    &one, MaxReplicas: 20, SyncPeriod: &metav1.Duration{Duration: time.Second},
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: be.metric, Selector: &metav1.LabelSelector{MatchLabels: be.selector}},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &avg},
			}}},
			// Scale down after 20s of lower recommendations, 2 workers per 10s:
			// the plot shows the stabilization as a plateau after the spike.
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{
				StabilizationWindowSeconds: &window,
				Policies:                   []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: downPods, PeriodSeconds: period}},
			}},
		},
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ma)
	if err != nil {
		return err
	}
	if _, err := dyn.Resource(v1alpha1.GroupVersionResource).Namespace(namespace).Create(ctx, &unstructured.Unstructured{Object: u}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating MetricAutoscaler %s/%s: %w", namespace, name, err)
	}
	return nil
}

// sample is one second of the timeline.
type sample struct {
	at               time.Duration
	depth            int
	ready, desired   int32
	arrivals, served int
}

// model runs the queue: each second jobs arrive on the pattern, ready
// workers drain drainRate each, and the depth is pushed to the adapter.
// With a broker's queue q, the arrivals are published to it, the workers
// consume from it, and the depth is what the adapter reads from it. With
// realWorkers, pods consume: the demo only publishes, and what they served is
// what left the queue.
func model(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface, env map[string]string, phases []phase, be backend, q queue, realWorkers bool) ([]sample, Summary, error) {
	var (
		carry       float64 // the fraction of a job that has not arrived yet (a broker takes whole ones)
		readErr     string
		tl          []sample
		sum         Summary
		depth       float64
		spikeEnd    = spikeEndOf(phases)
		drainedAt   = -1
		lastDesired = int32(1)
	)
	total := 0
	for _, p := range phases {
		total += p.Seconds
	}
	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	fmt.Printf("%6s  %-6s %7s  %-13s  %s\n", "TIME", "PHASE", "DEPTH", "READY/DESIRED", "AUTOSCALER")
	for sec := 0; ; sec++ {
		ph, into := phaseAt(phases, sec)
		arrivals := 0.0
		if ph != nil {
			arrivals = ph.From + (ph.To-ph.From)*float64(into)/float64(max(1, ph.Seconds-1))
		} else if (depth < 1 && lastDesired <= 1) || sec > total+150 {
			// The pattern is over, the queue empty and the workers back at
			// their minimum (or it took too long).
			break
		}
		d, err := kube.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, sum, fmt.Errorf("reading Deployment %s/%s: %w", namespace, name, err)
		}
		ready := d.Status.ReadyReplicas
		var served float64
		if q == nil {
			served = min(depth+arrivals, float64(ready)*drainRate)
			depth = max(0, depth+arrivals-served)
			if err := push(ctx, env, int(depth)); err != nil {
				return nil, sum, err
			}
		} else {
			carry += arrivals
			n := int(carry)
			carry -= float64(n)
			if err := q.Publish(ctx, n); err != nil {
				return nil, sum, err
			}
			if !realWorkers {
				got, err := q.Consume(ctx, int(ready)*drainRate)
				if err != nil {
					return nil, sum, err
				}
				served = float64(got)
			}
			// What the autoscaler sees; on a failed read the last answer stays.
			readErr = ""
			if v, err := externalDepth(ctx, kube, be); err != nil {
				readErr = " (" + err.Error() + ")"
			} else {
				if realWorkers {
					served = max(0, depth+float64(n)-float64(v))
				}
				depth = float64(v)
			}
		}
		reason := autoscalerReason(ctx, dyn) + readErr
		s := sample{at: time.Since(start), depth: int(depth), ready: ready, desired: *d.Spec.Replicas, arrivals: int(arrivals), served: int(served)}
		lastDesired = s.desired
		tl = append(tl, s)
		sum.PeakDepth = max(sum.PeakDepth, s.depth)
		sum.PeakReplicas = max(sum.PeakReplicas, s.desired)
		sum.ReplicaSeconds += float64(ready)
		if sec >= spikeEnd && drainedAt < 0 && depth < 1 {
			drainedAt = sec
		}
		phaseName := "drain"
		if depth < 1 {
			phaseName = "calm"
		}
		if ph != nil {
			phaseName = ph.Name
		}
		fmt.Printf("%5ds  %-6s %7d  %5d/%-7d  %s\n", sec, phaseName, s.depth, ready, s.desired, reason)
		select {
		case <-ctx.Done():
			return nil, sum, ctx.Err()
		case <-tick.C:
		}
	}
	// A last look: after the queue emptied the workers scale back down.
	sum.FinalDepth = int(depth)
	if d, err := kube.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{}); err == nil {
		sum.FinalReplicas = *d.Spec.Replicas
	}
	if drainedAt >= 0 {
		sum.DrainSeconds = drainedAt - spikeEnd
	}
	sum.DurationSeconds = int(time.Since(start).Seconds())
	return tl, sum, nil
}

// waitEmpty waits until the adapter reads the emptied queue as 0.
func waitEmpty(ctx context.Context, kube kubernetes.Interface, be backend) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := externalDepth(ctx, kube, be)
		if err == nil && v == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return err
			}
			return fmt.Errorf("the adapter still reads %s = %d 30s after the queue was emptied", be.metric, v)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func phaseAt(phases []phase, sec int) (*phase, int) {
	for i := range phases {
		if sec < phases[i].Seconds {
			return &phases[i], sec
		}
		sec -= phases[i].Seconds
	}
	return nil, 0
}

// spikeEndOf is the second at which the last non-quiet phase ends.
func spikeEndOf(phases []phase) int {
	end, at := 0, 0
	for _, p := range phases {
		at += p.Seconds
		if p.Name != "quiet" {
			end = at
		}
	}
	return end
}

func push(ctx context.Context, env map[string]string, depth int) error {
	body := fmt.Sprintf("# TYPE queue_messages_ready gauge\nqueue_messages_ready{queue=\"demo\"} %d\n", depth)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, env["METRICSCALE_PUSH_URL"], strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+env["METRICSCALE_PUSH_TOKEN"])
	req.Header.Set("Content-Type", "text/plain; version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("pushing the queue depth: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("pushing the queue depth: %d %s", resp.StatusCode, msg)
	}
	return nil
}

// autoscalerReason is the MetricAutoscaler's last word: its targets and
// the conditions that explain its last decision.
func autoscalerReason(ctx context.Context, dyn dynamic.Interface) string {
	u, err := dyn.Resource(v1alpha1.GroupVersionResource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "?"
	}
	ma := &v1alpha1.MetricAutoscaler{}
	if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ma) != nil {
		return "?"
	}
	parts := []string{ma.Status.Targets}
	for _, c := range ma.Status.Conditions {
		switch {
		case c.Type == autoscalingv2.AbleToScale, c.Type == autoscalingv2.ScalingLimited && c.Status == corev1.ConditionTrue,
			c.Type == autoscalingv2.ScalingActive && c.Status == corev1.ConditionFalse:
			parts = append(parts, string(c.Type)+"="+c.Reason)
		}
	}
	return strings.Join(parts, " ")
}

func writePlot(tl []sample, file, metric string) error {
	depth := plot.Series{Name: "queue depth"}
	target := plot.Series{Name: "target (30 × ready)", Dashed: true, Step: true}
	ready := plot.Series{Name: "ready", Step: true}
	desired := plot.Series{Name: "desired", Step: true, Dashed: true}
	for _, s := range tl {
		depth.Points = append(depth.Points, plot.Point{At: s.at, Value: float64(s.depth)})
		target.Points = append(target.Points, plot.Point{At: s.at, Value: float64(perPod * s.ready)})
		ready.Points = append(ready.Points, plot.Point{At: s.at, Value: float64(s.ready)})
		desired.Points = append(desired.Points, plot.Point{At: s.at, Value: float64(s.desired)})
	}
	c := plot.Chart{Title: "make demo — " + metric + " scaled by metricscale", Panels: []plot.Panel{
		{Title: "Queue depth (messages)", Series: []plot.Series{depth, target}},
		{Title: "Workers (replicas)", Series: []plot.Series{ready, desired}},
	}}
	var buf bytes.Buffer
	if err := c.WriteSVG(&buf); err != nil {
		return err
	}
	return os.WriteFile(file, buf.Bytes(), 0o644)
}

// toPNG converts with whichever converter the machine has.
func toPNG(svg, png string) error {
	for _, conv := range [][]string{{"rsvg-convert", svg, "-o", png}, {"convert", svg, png}} {
		if _, err := exec.LookPath(conv[0]); err != nil {
			continue
		}
		if err := exec.Command(conv[0], conv[1:]...).Run(); err == nil {
			if st, err := os.Stat(png); err == nil && st.Size() > 0 {
				return nil
			}
		}
	}
	return errors.New("no SVG converter")
}
