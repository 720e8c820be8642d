//go:build e2e

// Package e2e holds metricscale's end-to-end tests. They run against the local cluster
// of hack/cluster.sh (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
// kwok's fake nodes, metrics-server and, once it exists, the metricscale adapter):
//
//	make e2e    # go test -count=1 -tags e2e -timeout 45m -v ./hack/e2e/...
//
// TestMain brings the cluster up when it is not running (and takes it down again at the
// end); a cluster that is already up is reused and left running. Environment:
//
//	METRICSCALE_CLUSTER_DIR        state folder of the cluster (as for hack/cluster.sh)
//	METRICSCALE_E2E_UP_ARGS        arguments for `hack/cluster.sh up` (default "--hpa-sync-period 5s --real-node")
//	METRICSCALE_E2E_KEEP_CLUSTER=1 leave a cluster that the tests started running
//	METRICSCALE_E2E_KEEP_NAMESPACES=1 keep the test namespaces of failed tests
//
// This file is the reusable part: the Cluster handle, builders for workloads that run on
// the fake nodes, CPU usage control and polling helpers with useful failure messages.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
	"k8s.io/utils/ptr"

	localcluster "github.com/metricscale/metricscale/hack/cluster"
)

const (
	// KwokNodeLabel and KwokNodeTaint select and tolerate the fake nodes of hack/cluster.sh.
	KwokNodeLabelKey   = "type"
	KwokNodeLabelValue = "kwok"
	KwokTaintKey       = "kwok.x-k8s.io/node"
	KwokTaintValue     = "fake"
	// UsageCPUAnnotation sets the CPU usage kwok reports for a pod (for example "150m").
	UsageCPUAnnotation = "kwok.x-k8s.io/usage-cpu"
	// UsageMemoryAnnotation sets the memory usage kwok reports for a pod (for example "64Mi").
	UsageMemoryAnnotation = "kwok.x-k8s.io/usage-memory"

	// --real-node: TestRealNode and the tests of the installed chart run pods on it.
	defaultUpArgs = "--hpa-sync-period 5s --real-node"
)

// extraUpArgs are added to defaultUpArgs by the files of a build tag: --keda
// under the keda tag (make e2e-keda).
var extraUpArgs string

// Cluster is a handle on the running local cluster.
type Cluster struct {
	RepoRoot   string // root of the metricscale checkout
	Script     string // hack/cluster.sh
	Dir        string // the cluster's state folder
	Kubeconfig string // admin kubeconfig
	KubectlBin string // kubectl built by hack/cluster.sh

	// HPAController tells whether kube-controller-manager runs its HPA controller,
	// and HPASyncPeriod how often it syncs.
	HPAController bool
	HPASyncPeriod time.Duration

	// PodStages is false when kwok runs node stages only (hack/cluster.sh up
	// --no-pod-stages): pods then stay Pending unless a test writes their status.
	PodStages bool

	// RealNode is the real (kubelet) node's name, hack/cluster's RealNodeName; empty
	// when the cluster runs without it (up without --real-node).
	RealNode string

	// KEDAAPIQPS is hack/cluster.sh up --keda-api-qps: KEDA runs with raised client rate
	// limits and reconciles; 0 at KEDA's defaults (or without KEDA).
	KEDAAPIQPS int

	// PushURL and PushToken reach the metricscale adapter's push endpoint; empty
	// when the adapter does not run.
	PushURL   string
	PushToken string

	// PrometheusURL reaches the cluster's Prometheus (http://127.0.0.1:9090) and
	// ExporterURL the exporter it scrapes every second (hack/exporter); both empty when
	// the cluster runs without them (hack/cluster.sh up --no-prometheus). See
	// prometheus_helpers.go.
	PrometheusURL string
	ExporterURL   string

	Config  *rest.Config
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
	Metrics metricsclient.Interface

	startedByUs bool
}

// Push posts series in the Prometheus text format to the adapter's push
// endpoint.
func (c *Cluster) Push(ctx context.Context, body string) error {
	return c.PushAs(ctx, "text/plain; version=0.0.4", body)
}

// PushAs posts body with the given Content-Type to the push endpoint.
func (c *Cluster) PushAs(ctx context.Context, contentType, body string) error {
	if c.PushURL == "" {
		return errors.New("push: the adapter does not run in this cluster")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.PushURL, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.PushToken)
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("push: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("push: %d %s", resp.StatusCode, msg)
	}
	return nil
}

// SetupCluster returns a handle on the local cluster, starting it (package hack/cluster,
// what `hack/cluster.sh up` runs) when it is not running.
func SetupCluster(ctx context.Context) (*Cluster, error) {
	root, err := localcluster.FindRepoRoot()
	if err != nil {
		return nil, err
	}
	c := &Cluster{RepoRoot: root, Script: filepath.Join(root, "hack", "cluster.sh")}

	var status bytes.Buffer
	local, err := localcluster.Open(root, "", &status, &status)
	if err != nil {
		return nil, err
	}
	err = local.Status(ctx)
	switch {
	case err == nil:
		klog.InfoS("Reusing the running local cluster")
	case errors.Is(err, localcluster.ErrStopped):
		args := strings.Fields(defaultUpArgs + " " + extraUpArgs)
		if v, ok := os.LookupEnv("METRICSCALE_E2E_UP_ARGS"); ok {
			args = strings.Fields(v)
		}
		klog.InfoS("Starting the local cluster", "command", "hack/cluster.sh up "+strings.Join(args, " "))
		up, _, err := localcluster.Command(root, append([]string{"up"}, args...), os.Stdout, os.Stdout)
		if err != nil {
			return nil, fmt.Errorf("hack/cluster.sh up: %w", err)
		}
		// up builds only what it runs; the tests that also run prometheus-adapter
		// build it when they start (PrometheusAdapter), so that its cold build
		// (10 min) does not hold up the cluster's start.
		if err := up.Up(ctx); err != nil {
			return nil, fmt.Errorf("hack/cluster.sh up: %w", err)
		}
		c.startedByUs = true
	default:
		return nil, fmt.Errorf("the local cluster is not healthy (%v); fix or restart it "+
			"(hack/cluster.sh down && hack/cluster.sh up):\n%s", err, status.String())
	}

	env, err := local.EnvMap()
	if err != nil {
		return nil, c.teardownAfter(fmt.Errorf("hack/cluster.sh env: %w", err))
	}
	c.Kubeconfig = env["KUBECONFIG"]
	c.Dir = env["METRICSCALE_CLUSTER_DIR"]
	c.KubectlBin = env["METRICSCALE_KUBECTL"]
	c.HPAController = env["METRICSCALE_HPA_CONTROLLER"] != "false"
	c.HPASyncPeriod, _ = time.ParseDuration(env["METRICSCALE_HPA_SYNC_PERIOD"])
	if c.HPASyncPeriod <= 0 {
		c.HPASyncPeriod = 15 * time.Second
	}
	c.PodStages = env["METRICSCALE_POD_STAGES"] != "false"
	c.RealNode = env["METRICSCALE_REAL_NODE"]
	c.KEDAAPIQPS, _ = strconv.Atoi(env["METRICSCALE_KEDA_API_QPS"])
	c.PushURL = env["METRICSCALE_PUSH_URL"]
	c.PushToken = env["METRICSCALE_PUSH_TOKEN"]
	c.PrometheusURL = env["METRICSCALE_PROMETHEUS_URL"]
	c.ExporterURL = env["METRICSCALE_EXPORTER_URL"]
	if repo := env["METRICSCALE_CLUSTER_REPO"]; repo != "" && repo != root && c.PushURL != "" {
		klog.InfoS("WARNING: the running cluster's metricscale components were built from another checkout; "+
			"restart it (hack/cluster.sh down) to test this one", "clusterRepo", repo, "thisRepo", root)
	}
	if c.Kubeconfig == "" {
		return nil, c.teardownAfter(fmt.Errorf("hack/cluster.sh env named no KUBECONFIG: %v", env))
	}

	c.Config, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, c.teardownAfter(err)
	}
	c.Config.QPS, c.Config.Burst = 50, 100
	c.Config.UserAgent = "metricscale-e2e"
	if c.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		return nil, c.teardownAfter(err)
	}
	if c.Metrics, err = metricsclient.NewForConfig(c.Config); err != nil {
		return nil, c.teardownAfter(err)
	}
	if c.Dynamic, err = dynamic.NewForConfig(c.Config); err != nil {
		return nil, c.teardownAfter(err)
	}
	klog.InfoS("Local cluster ready", "dir", c.Dir, "kubeconfig", c.Kubeconfig,
		"hpaController", c.HPAController, "hpaSyncPeriod", c.HPASyncPeriod, "adapter", c.PushURL != "",
		"prometheus", c.PrometheusURL)
	return c, nil
}

// local returns the package hack/cluster handle on this cluster's state folder, its
// progress and failures written to out.
func (c *Cluster) local(out io.Writer) (*localcluster.Cluster, error) {
	return localcluster.Open(c.RepoRoot, c.Dir, out, out)
}

// RestartAutoscaler stops the cluster's autoscaler (if it runs) and starts it again with
// the cluster's settings (hack/cluster.sh restart-autoscaler); changeFeedURL is its
// --change-feed-url ("" the adapter's feed, "none" none).
func (c *Cluster) RestartAutoscaler(ctx context.Context, changeFeedURL string) error {
	return c.command("hack/cluster.sh restart-autoscaler", func(lc *localcluster.Cluster) error {
		return lc.RestartAutoscaler(ctx, changeFeedURL)
	})
}

// command runs fn on the package hack/cluster handle, its output in the error.
func (c *Cluster) command(what string, fn func(*localcluster.Cluster) error) error {
	var out bytes.Buffer
	lc, err := c.local(&out)
	if err == nil {
		err = fn(lc)
	}
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", what, err, out.String())
	}
	return nil
}

// RestartAdapter stops the cluster's adapter and starts it again with its config file as
// it is now (for what a live reload cannot change).
func (c *Cluster) RestartAdapter(ctx context.Context) error {
	return c.command("restarting the adapter", func(lc *localcluster.Cluster) error { return lc.RestartAdapter(ctx) })
}

func (c *Cluster) teardownAfter(err error) error {
	c.Teardown()
	return err
}

// Teardown stops the cluster if SetupCluster started it, unless METRICSCALE_E2E_KEEP_CLUSTER=1.
func (c *Cluster) Teardown() {
	if c == nil || !c.startedByUs {
		return
	}
	if os.Getenv("METRICSCALE_E2E_KEEP_CLUSTER") == "1" {
		klog.InfoS("Leaving the local cluster running (METRICSCALE_E2E_KEEP_CLUSTER=1); stop it with hack/cluster.sh down")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lc, err := c.local(os.Stdout)
	if err == nil {
		err = lc.Down(ctx)
	}
	if err != nil {
		klog.ErrorS(err, "hack/cluster.sh down failed")
	}
	c.startedByUs = false
}

// RunMain is the body of TestMain: it sets the cluster up, runs the tests and tears the
// cluster down again, also when the tests are interrupted with SIGINT or SIGTERM.
func RunMain(m *testing.M, cluster **Cluster) int {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	// An interrupted setup stops what it started, as an interrupted hack/cluster.sh up does.
	setupCtx, stopSetup := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	c, err := SetupCluster(setupCtx)
	stopSetup()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: cannot set the local cluster up: %v\n", err)
		return 1
	}
	*cluster = c
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := <-signals
		fmt.Fprintf(os.Stderr, "e2e: %v: stopping the cluster the tests started, if any\n", sig)
		c.Teardown()
		os.Exit(2)
	}()
	defer c.Teardown()
	return m.Run()
}

// script runs a hack/cluster.sh command line in this process (package hack/cluster)
// for the state folder of the cluster. With a nil stream its combined output is
// returned, otherwise it is copied to stream as it comes. code is the exit code.
func (c *Cluster) script(ctx context.Context, stream *os.File, args ...string) (string, int, error) {
	var buf bytes.Buffer
	var w io.Writer = &buf
	if stream != nil {
		w = stream
	}
	if c.Dir != "" && len(args) > 0 {
		args = append([]string{args[0], "--dir", c.Dir}, args[1:]...)
	}
	code := localcluster.Main(ctx, c.RepoRoot, args, w, w)
	if code != 0 {
		return buf.String(), code, fmt.Errorf("hack/cluster.sh %s: exit code %d", strings.Join(args, " "), code)
	}
	return buf.String(), 0, nil
}

// Kubectl runs kubectl against the cluster and returns its standard output; the error
// carries standard error.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	// --cache-dir keeps kubectl's discovery cache in the state folder, not in ~/.kube.
	base := []string{"--kubeconfig", c.Kubeconfig, "--cache-dir", filepath.Join(c.Dir, "kubectl-cache")}
	cmd := exec.CommandContext(ctx, c.KubectlBin, append(base, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// parseEnv reads the `export KEY='value'` lines of `hack/cluster.sh env`.
func parseEnv(out string) map[string]string {
	env := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "export ")
		if !ok {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		if len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' {
			v = strings.ReplaceAll(v[1:len(v)-1], `'\''`, `'`)
		}
		env[k] = v
	}
	return env
}

// ---------------------------------------------------------------- namespaces

// CreateNamespace creates a namespace named after prefix for the test and deletes it
// when the test ends. A failed test first logs what the namespace holds.
func (c *Cluster) CreateNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("e2e-%s-%s", prefix, rand.String(5))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"metricscale.io/e2e": "true"}}}
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.DumpNamespace(t, name)
			if os.Getenv("METRICSCALE_E2E_KEEP_NAMESPACES") == "1" {
				t.Logf("keeping namespace %s (METRICSCALE_E2E_KEEP_NAMESPACES=1)", name)
				return
			}
		}
		err := c.Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Logf("delete namespace %s: %v", name, err)
		}
	})
	return name
}

// DumpNamespace logs the workloads, HPAs, pod metrics and events of a namespace.
func (c *Cluster) DumpNamespace(t *testing.T, ns string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, args := range [][]string{
		{"get", "deployments,replicasets,pods,hpa", "-o", "wide"},
		{"describe", "hpa"},
		{"top", "pods"},
		{"get", "events", "--sort-by=.lastTimestamp"},
	} {
		out, err := c.Kubectl(ctx, append([]string{"--namespace", ns}, args...)...)
		if err != nil {
			out += "\n" + err.Error()
		}
		t.Logf("--- kubectl -n %s %s\n%s", ns, strings.Join(args, " "), out)
	}
}

// ---------------------------------------------------------------- workloads

// KwokDeployment returns a Deployment whose pods run on the fake kwok nodes: each has
// one container requesting cpuRequest and reporting cpuUsage (via UsageCPUAnnotation
// on the pod template; "" leaves kwok's default of 1m).
func KwokDeployment(ns, name string, replicas int32, cpuRequest, cpuUsage string) *appsv1.Deployment {
	podLabels := map[string]string{"app": name}
	annotations := map[string]string{}
	if cpuUsage != "" {
		annotations[UsageCPUAnnotation] = cpuUsage
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: podLabels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: annotations},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{KwokNodeLabelKey: KwokNodeLabelValue},
					Tolerations: []corev1.Toleration{{
						Key: KwokTaintKey, Operator: corev1.TolerationOpEqual, Value: KwokTaintValue,
						Effect: corev1.TaintEffectNoSchedule,
					}},
					Containers: []corev1.Container{{
						Name:  "app",
						Image: "registry.k8s.io/pause:3.10",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU:    resource.MustParse(cpuRequest),
							corev1.ResourceMemory: resource.MustParse("64Mi"),
						}},
					}},
					TerminationGracePeriodSeconds: ptr.To[int64](0),
				},
			},
		},
	}
}

// CreateDeployment creates d or fails the test.
func (c *Cluster) CreateDeployment(t *testing.T, d *appsv1.Deployment) *appsv1.Deployment {
	t.Helper()
	out, err := c.Client.AppsV1().Deployments(d.Namespace).Create(context.Background(), d, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create deployment %s/%s: %v", d.Namespace, d.Name, err)
	}
	return out
}

// WaitDeploymentReady waits until the Deployment has exactly replicas pods, all updated,
// available and Ready.
func (c *Cluster) WaitDeploymentReady(t *testing.T, ns, name string, replicas int32, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, time.Second, fmt.Sprintf("deployment %s/%s to have %d ready replicas", ns, name, replicas),
		func(ctx context.Context) (bool, string, error) {
			d, err := c.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			s := d.Status
			state := fmt.Sprintf("spec.replicas=%d replicas=%d updated=%d ready=%d available=%d",
				ptr.Deref(d.Spec.Replicas, 1), s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas)
			pods, err := c.Pods(ctx, ns, d.Spec.Selector.MatchLabels)
			if err != nil {
				return false, state, err
			}
			ready := 0
			for _, p := range pods {
				if p.DeletionTimestamp == nil && podReady(&p) {
					ready++
				}
			}
			state += fmt.Sprintf(" readyPods=%d/%d", ready, len(pods))
			done := ptr.Deref(d.Spec.Replicas, 1) == replicas && s.Replicas == replicas &&
				s.UpdatedReplicas == replicas && s.ReadyReplicas == replicas && s.AvailableReplicas == replicas &&
				ready == int(replicas) && len(pods) == int(replicas)
			return done, state, nil
		})
}

// Pods lists the pods of ns that match the labels, sorted by name.
func (c *Cluster) Pods(ctx context.Context, ns string, match map[string]string) ([]corev1.Pod, error) {
	list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(match).String()})
	if err != nil {
		return nil, err
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items, nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// SetPodCPUUsage sets the CPU usage kwok reports for one pod (for example "250m").
func (c *Cluster) SetPodCPUUsage(ctx context.Context, ns, pod, usage string) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, UsageCPUAnnotation, usage)
	_, err := c.Client.CoreV1().Pods(ns).Patch(ctx, pod, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("set CPU usage of pod %s/%s to %s: %w", ns, pod, usage, err)
	}
	return nil
}

// SetCPUUsage sets the CPU usage of every existing pod of ns that matches the labels and
// returns how many it changed. Pods created later take the usage of their template's
// annotation (see KwokDeployment); changing the template instead would roll the
// Deployment out again.
func (c *Cluster) SetCPUUsage(t *testing.T, ns string, match map[string]string, usage string) int {
	t.Helper()
	ctx := context.Background()
	pods, err := c.Pods(ctx, ns, match)
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	n := 0
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		if err := c.SetPodCPUUsage(ctx, ns, p.Name, usage); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			t.Fatal(err)
		}
		n++
	}
	t.Logf("set the CPU usage of %d pod(s) in %s to %s", n, ns, usage)
	return n
}

// CPUUtilizationHPA returns an autoscaling/v2 HPA for a Deployment on average CPU
// utilization, with a scale-down stabilization window of downWindowSeconds.
func CPUUtilizationHPA(ns, name, deployment string, minReplicas, maxReplicas, utilization, downWindowSeconds int32) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: deployment},
			MinReplicas:    ptr.To(minReplicas),
			MaxReplicas:    maxReplicas,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricSource{
					Name:   corev1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(utilization)},
				},
			}},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To(downWindowSeconds)},
			},
		},
	}
}

// CreateHPA creates hpa or fails the test.
func (c *Cluster) CreateHPA(t *testing.T, hpa *autoscalingv2.HorizontalPodAutoscaler) {
	t.Helper()
	if _, err := c.Client.AutoscalingV2().HorizontalPodAutoscalers(hpa.Namespace).Create(context.Background(), hpa, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create HPA %s/%s: %v", hpa.Namespace, hpa.Name, err)
	}
}

// HPAState summarizes an HPA's status for progress and failure messages.
func (c *Cluster) HPAState(ctx context.Context, ns, name string) string {
	hpa, err := c.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Sprintf("hpa %s: %v", name, err)
	}
	s := hpa.Status
	var b strings.Builder
	fmt.Fprintf(&b, "hpa %s: current=%d desired=%d", name, s.CurrentReplicas, s.DesiredReplicas)
	for _, m := range s.CurrentMetrics {
		if m.Resource != nil {
			fmt.Fprintf(&b, " %s=%s", m.Resource.Name, formatMetric(m.Resource.Current))
		}
	}
	for _, cond := range s.Conditions {
		fmt.Fprintf(&b, " [%s=%s %s: %s]", cond.Type, cond.Status, cond.Reason, cond.Message)
	}
	return b.String()
}

func formatMetric(v autoscalingv2.MetricValueStatus) string {
	switch {
	case v.AverageUtilization != nil:
		return fmt.Sprintf("%d%%", *v.AverageUtilization)
	case v.AverageValue != nil:
		return v.AverageValue.String()
	case v.Value != nil:
		return v.Value.String()
	}
	return "?"
}

// WaitForReplicas waits until the Deployment's spec.replicas equals want, and logs each
// change on the way together with the HPA's state.
func (c *Cluster) WaitForReplicas(t *testing.T, ns, deployment, hpa string, want int32, timeout time.Duration) {
	t.Helper()
	last := int32(-1)
	Eventually(t, timeout, time.Second, fmt.Sprintf("deployment %s/%s to be scaled to %d replicas", ns, deployment, want),
		func(ctx context.Context) (bool, string, error) {
			d, err := c.Client.AppsV1().Deployments(ns).Get(ctx, deployment, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			r := ptr.Deref(d.Spec.Replicas, 1)
			state := fmt.Sprintf("spec.replicas=%d; %s", r, c.HPAState(ctx, ns, hpa))
			if r != last {
				t.Logf("replicas of %s/%s: %d (%s)", ns, deployment, r, state)
				last = r
			}
			return r == want, state, nil
		})
}

// ---------------------------------------------------------------- polling

// Eventually calls check every interval until it reports done, and fails the test with
// what and check's last state (or error) after timeout.
func Eventually(t *testing.T, timeout, interval time.Duration, what string, check func(ctx context.Context) (done bool, state string, err error)) {
	t.Helper()
	if err := Poll(context.Background(), timeout, interval, check); err != nil {
		t.Fatalf("timed out after %v waiting for %s: %v", timeout, what, err)
	}
}

// Poll calls check every interval until it reports done or timeout passes. Each call
// gets a context bounded by the time left. The error describes check's last state.
func Poll(ctx context.Context, timeout, interval time.Duration, check func(ctx context.Context) (done bool, state string, err error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var lastState string
	var lastErr error
	for {
		callCtx, callCancel := context.WithTimeout(ctx, max(interval, 10*time.Second))
		done, state, err := check(callCtx)
		callCancel()
		if err == nil && done {
			return nil
		}
		if state != "" {
			lastState = state
		}
		if err != nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			msg := "last state: " + lastState
			if lastState == "" {
				msg = "no state observed"
			}
			if lastErr != nil {
				msg += fmt.Sprintf("; last error: %v", lastErr)
			}
			return errors.New(msg)
		case <-time.After(interval):
		}
	}
}

// PrometheusAdapter returns prometheus-adapter's binary, built into the cluster's
// cache when it is not there yet; when another build of it runs (.ci/run starts
// one beside the suite), it waits for that one.
func (c *Cluster) PrometheusAdapter(t *testing.T) string {
	t.Helper()
	var log bytes.Buffer
	lc, _, err := localcluster.Command(c.RepoRoot, []string{"build", "prometheus-adapter"}, &log, &log)
	if err == nil {
		err = lc.Run(context.Background(), "build", []string{"prometheus-adapter"})
	}
	if err != nil {
		t.Fatalf("hack/cluster.sh build prometheus-adapter: %v\n%s", err, log.String())
	}
	if strings.Contains(log.String(), "built ") {
		t.Logf("hack/cluster.sh build prometheus-adapter:\n%s", log.String())
	}
	return filepath.Join(filepath.Dir(c.KubectlBin), "prometheus-adapter")
}
