//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/metricscale/metricscale/autoscaler/recordclient"
	"github.com/metricscale/metricscale/hack/backends"
)

// The chart's release in TestInstalledChart. Not "metricscale": its
// cluster-scoped objects (ClusterRoles, bindings) are then named
// ichart-metricscale-*, apart from those of the local cluster's own adapter.
const (
	icRelease    = "ichart"
	icAdapter    = icRelease + "-metricscale-adapter"
	icAutoscaler = icRelease + "-metricscale-autoscaler"
	// The autoscaler's leader Lease in the release namespace (its default name).
	icLease = "metricscale-autoscaler"
)

// The APIServices a default install registers.
var icAPIServices = []string{"v1beta1.external.metrics.k8s.io", "v1beta2.custom.metrics.k8s.io", "v1beta1.custom.metrics.k8s.io"}

var apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// TestInstalledChart installs manifests/chart, rendered by hack/helm, on the
// local cluster's real node (hack/cluster.sh up --real-node) with the images
// `make images` builds from this checkout, loaded into the node's containerd:
// default values (two adapter replicas) plus autoscaler.record.enabled, which
// `autoscaler record` needs. It checks what a platform team relies on:
// every pod Ready, the APIServices served by the adapter Service with the
// adapter's in-cluster credentials, pushes reaching both replicas (certs.mode
// adapter, then selfSigned), a rolling update and a deleted adapter pod under
// pushes and queries (non-200 answers and backwards values counted), a
// deleted autoscaler leader (its successor keeps the history), `autoscaler
// record` through its port-forward, and real worker pods draining Redis
// queues scaled by kube-controller-manager's HPA and by a MetricAutoscaler.
//
// Figures are logged as "installedchart: ...".
func TestInstalledChart(t *testing.T) {
	node := needRealNode(t)
	ic := newInstalledChart(t, node)

	ic.install(t)
	t.Run("ready", ic.testReady)
	t.Run("pushes reach both replicas", func(t *testing.T) { ic.testPushesReachReplicas(t, "adapter") })
	t.Run("rolling update", ic.testRollingUpdate)
	t.Run("adapter pod deleted", ic.testAdapterPodDeleted)
	t.Run("autoscaler leader deleted and record", ic.testLeaderDeletedAndRecord)
	t.Run("workers", ic.testWorkers)
	t.Run("selfSigned", ic.testSelfSigned)
}

// installedChart is one install of the chart in its own namespace.
type installedChart struct {
	ns     string
	node   string
	tool   string   // hack/helm
	images []string // the image tars loaded into the node
	// values are the --set values of every render; the last render is what
	// is applied.
	values []string
	files  []string // values files (-f), after the --set values
	last   string
	token  string
	dir    string // the whole test's files: a subtest's TempDir goes when it ends
	// failures are the load checks' errors, logged again after the
	// namespace dump of a failed test, which would bury them.
	failures []string
}

// errorf fails t and keeps the message for the summary at the end.
func (ic *installedChart) errorf(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	ic.failures = append(ic.failures, t.Name()+": "+msg)
	t.Error(msg)
}

// needRealNode returns the real node's name, failing when the cluster runs
// none or it is not Ready: the test runs pods, which the kwok nodes only
// pretend to run.
func needRealNode(t *testing.T) string {
	t.Helper()
	if cluster.RealNode == "" {
		t.Fatal("the local cluster has no real node: restart it with hack/cluster.sh down && hack/cluster.sh up --real-node " +
			"(the e2e suite's default METRICSCALE_E2E_UP_ARGS has it)")
	}
	n, err := cluster.Client.CoreV1().Nodes().Get(context.Background(), cluster.RealNode, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("node %s: %v", cluster.RealNode, err)
	}
	if !nodeReady(n) {
		t.Fatalf("node %s is not Ready: %v", n.Name, n.Status.Conditions)
	}
	return n.Name
}

func newInstalledChart(t *testing.T, node string) *installedChart {
	t.Helper()
	ic := &installedChart{node: node, tool: buildChartTool(t), dir: t.TempDir()}
	// Registered first, so it runs last: after the namespace dump.
	t.Cleanup(func() {
		if len(ic.failures) > 0 {
			t.Logf("installedchart: failed checks (see above):\n%s", strings.Join(ic.failures, "\n"))
		}
	})
	ic.images = buildImages(t)
	start := time.Now()
	if out, _, err := cluster.script(context.Background(), nil, append([]string{"load-images"}, ic.images...)...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("installedchart: %d images loaded into %s's containerd in %s", len(ic.images), node, time.Since(start).Round(100*time.Millisecond))

	// The local cluster's own autoscaler would reconcile the test's
	// MetricAutoscalers beside the chart's: it is stopped for the test.
	if pid, err := autoscalerPid(); err == nil && syscall.Kill(pid, 0) == nil {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { restartAutoscaler(t) })
	}
	saveAPIServices(t)
	ic.ns = cluster.CreateNamespace(t, "ichart")
	// Installed last, removed first: the cluster-scoped objects of the
	// release (the namespace's deletion takes the rest), before the
	// APIServices are given back.
	t.Cleanup(func() { ic.deleteClusterScoped(t) })
	ic.values = []string{"autoscaler.record.enabled=true"}
	return ic
}

// buildImages runs `make images`' tool (hack/images) for this checkout into a
// temporary folder, with the chart's appVersion as the tag, and returns the
// image tars.
func buildImages(t *testing.T) []string {
	t.Helper()
	chart, err := os.ReadFile(filepath.Join(cluster.RepoRoot, "manifests", "chart", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(chart, &meta); err != nil || meta.AppVersion == "" {
		t.Fatalf("Chart.yaml: appVersion %q: %v", meta.AppVersion, err)
	}
	out := t.TempDir()
	start := time.Now()
	cmd := exec.Command("go", "run", ".", "--root", "../..", "--version", meta.AppVersion, "--out", out, "--go", "go")
	cmd.Dir = filepath.Join(cluster.RepoRoot, "hack", "images")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/images (make images): %v\n%s", err, msg)
	}
	tars, err := filepath.Glob(filepath.Join(out, "*.tar"))
	if err != nil || len(tars) < 2 {
		t.Fatalf("hack/images wrote %v (%v), want the adapter's and the autoscaler's image at least", tars, err)
	}
	t.Logf("installedchart: make images (%s) built %d images in %s", meta.AppVersion, len(tars), time.Since(start).Round(100*time.Millisecond))
	return tars
}

// saveAPIServices keeps the cluster's APIServices the chart replaces and puts
// their spec back when the test ends, for the suite's other tests.
func saveAPIServices(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	api := cluster.Dynamic.Resource(apiServiceGVR)
	saved := map[string]*unstructured.Unstructured{}
	for _, n := range icAPIServices {
		if a, err := api.Get(ctx, n, metav1.GetOptions{}); err == nil {
			saved[n] = a
		}
	}
	t.Cleanup(func() {
		ctx := context.Background()
		for _, n := range icAPIServices {
			cur, err := api.Get(ctx, n, metav1.GetOptions{})
			old, had := saved[n]
			switch {
			case err != nil && !had:
				continue
			case !had:
				if err := api.Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
					t.Errorf("delete APIService %s: %v", n, err)
				}
				continue
			case err != nil:
				old.SetResourceVersion("")
				if _, err := api.Create(ctx, old, metav1.CreateOptions{}); err != nil {
					t.Errorf("restore APIService %s: %v", n, err)
				}
				continue
			}
			cur.Object["spec"] = old.Object["spec"]
			cur.SetLabels(old.GetLabels())
			cur.SetAnnotations(old.GetAnnotations())
			if _, err := api.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
				t.Errorf("restore APIService %s: %v", n, err)
			}
		}
	})
}

// render renders the chart for the release with ic.values and extra --set
// values, and returns the file.
func (ic *installedChart) render(t *testing.T, extra ...string) string {
	t.Helper()
	args := []string{"template", "--namespace", ic.ns, "--name", icRelease, "--kubeconfig", cluster.Kubeconfig}
	for _, f := range ic.files {
		args = append(args, "-f", f)
	}
	for _, v := range append(append([]string(nil), ic.values...), extra...) {
		args = append(args, "--set", v)
	}
	// Kept in ic.dir: the clean-up reads the last render after the subtest that made it.
	f, err := os.CreateTemp(ic.dir, "render-*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if err := os.Rename(helmTemplate(context.Background(), t, ic.tool, args...), f.Name()); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// apply renders with extra values, applies the render and waits for both
// Deployments to be rolled out.
func (ic *installedChart) apply(t *testing.T, extra ...string) {
	t.Helper()
	f := ic.render(t, extra...)
	if _, err := cluster.Kubectl(context.Background(), "apply", "-f", f); err != nil {
		t.Fatal(err)
	}
	ic.last = f
	ic.waitRolledOut(t)
}

// install applies the default render and reads the push token the chart made.
func (ic *installedChart) install(t *testing.T) {
	t.Helper()
	start := time.Now()
	ic.apply(t)
	t.Logf("installedchart: install applied and rolled out in %s", time.Since(start).Round(100*time.Millisecond))
	s, err := cluster.Client.CoreV1().Secrets(ic.ns).Get(context.Background(), icAdapter+"-push-token", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the push token the chart makes by default: %v", err)
	}
	ic.token = string(s.Data["token"])
	if ic.token == "" {
		t.Fatalf("Secret %s has no token", s.Name)
	}
}

func (ic *installedChart) waitRolledOut(t *testing.T) {
	t.Helper()
	for _, d := range []string{icAdapter, icAutoscaler} {
		if out, err := cluster.Kubectl(context.Background(), "-n", ic.ns, "rollout", "status", "deployment/"+d, "--timeout=4m"); err != nil {
			cluster.DumpNamespace(t, ic.ns)
			t.Fatalf("%v\n%s", err, out)
		}
	}
}

// deleteClusterScoped deletes the last render's objects outside the release
// namespace but for the CRD (other tests' MetricAutoscalers) and the
// APIServices (saveAPIServices gives them back).
func (ic *installedChart) deleteClusterScoped(t *testing.T) {
	if ic.last == "" {
		return
	}
	var keep [][]byte
	for _, d := range documents(t, ic.last) {
		var o struct {
			Kind     string
			Metadata struct{ Namespace string }
		}
		_ = yaml.Unmarshal(d, &o)
		if o.Kind == "CustomResourceDefinition" || o.Kind == "APIService" || o.Metadata.Namespace == ic.ns {
			continue
		}
		keep = append(keep, d)
	}
	if len(keep) == 0 {
		return
	}
	f := filepath.Join(t.TempDir(), "cluster-scoped.yaml")
	if err := os.WriteFile(f, bytes.Join(keep, []byte("\n---\n")), 0o600); err != nil {
		t.Error(err)
		return
	}
	if _, err := cluster.Kubectl(context.Background(), "delete", "--ignore-not-found", "-f", f); err != nil {
		t.Errorf("delete the release's cluster-scoped objects: %v", err)
	}
}

// pods returns the Running, not terminating pods of a Deployment of the
// release, sorted by name.
func (ic *installedChart) pods(ctx context.Context, deployment string) ([]corev1.Pod, error) {
	d, err := cluster.Client.AppsV1().Deployments(ic.ns).Get(ctx, deployment, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, err
	}
	list, err := cluster.Client.CoreV1().Pods(ic.ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ------------------------------------------------------------------ ready

// testReady: every pod of the release is Ready on the real node, the
// APIServices are Available through the adapter Service, and the adapter
// reads the API with its ServiceAccount: a custom metric of pods selected by
// a label selector resolves, which needs its pod informer (in-cluster
// config; the chart gives it no kubeconfig).
func (ic *installedChart) testReady(t *testing.T) {
	ctx := context.Background()
	for _, dep := range []string{icAdapter, icAutoscaler} {
		pods, err := ic.pods(ctx, dep)
		if err != nil {
			t.Fatal(err)
		}
		if len(pods) != 2 {
			t.Errorf("Deployment %s runs %d pods, want 2", dep, len(pods))
		}
		for _, p := range pods {
			if !podReady(&p) {
				t.Errorf("pod %s is not Ready", p.Name)
				continue
			}
			if p.Spec.NodeName != ic.node {
				t.Errorf("pod %s runs on %s, not the real node %s", p.Name, p.Spec.NodeName, ic.node)
			}
			t.Logf("installedchart: pod %s start-to-Ready %s (created to Ready %s)", p.Name,
				readyAt(&p).Sub(p.Status.StartTime.Time).Round(100*time.Millisecond), readyAt(&p).Sub(p.CreationTimestamp.Time).Round(time.Second))
		}
	}

	for _, n := range icAPIServices[:2] {
		Eventually(t, time.Minute, time.Second, "APIService "+n+" Available through "+icAdapter, func(ctx context.Context) (bool, string, error) {
			a, err := cluster.Dynamic.Resource(apiServiceGVR).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			svcNS, _, _ := unstructured.NestedString(a.Object, "spec", "service", "namespace")
			svc, _, _ := unstructured.NestedString(a.Object, "spec", "service", "name")
			conds, _, _ := unstructured.NestedSlice(a.Object, "status", "conditions")
			state := fmt.Sprintf("service %s/%s, conditions %v", svcNS, svc, conds)
			if svcNS != ic.ns || svc != icAdapter {
				return false, state, nil
			}
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] == "Available" && m["status"] == "True" {
					return true, state, nil
				}
			}
			return false, state, nil
		})
	}

	adapters, err := ic.pods(ctx, icAdapter)
	if err != nil || len(adapters) == 0 {
		t.Fatalf("adapter pods: %v %v", adapters, err)
	}
	for _, c := range adapters[0].Spec.Containers[0].Args {
		if strings.HasPrefix(c, "--kubeconfig") {
			t.Fatalf("the adapter runs with %s: not its in-cluster config", c)
		}
	}
	body := ""
	for i, p := range adapters {
		body += fmt.Sprintf("ichart_pod_load{namespace=%q,pod=%q} %d\n", ic.ns, p.Name, 7+i)
	}
	ic.push(t, body)
	sel := labels.SelectorFromSet(adapters[0].Labels).String()
	path := "/apis/custom.metrics.k8s.io/v1beta2/namespaces/" + ic.ns + "/pods/*/ichart_pod_load"
	Eventually(t, 30*time.Second, 500*time.Millisecond, "the pods' custom metric through the aggregator", func(ctx context.Context) (bool, string, error) {
		raw, err := adapterRawGet(ctx, cluster.Client, path, map[string]string{"labelSelector": sel})
		if err != nil {
			return false, err.Error(), nil
		}
		var l adapterMetricList
		if err := json.Unmarshal(raw, &l); err != nil {
			return false, "", err
		}
		got := map[string]int64{}
		for _, it := range l.Items {
			got[it.DescribedObject.Name] = it.Value.Value()
		}
		for i, p := range adapters {
			if got[p.Name] != int64(7+i) {
				return false, fmt.Sprintf("%v", got), nil
			}
		}
		return true, "", nil
	})
	t.Logf("installedchart: the adapter's informers (ServiceAccount %s, in-cluster config) resolved pods selected by %s", icAdapter, sel)
}

// readyAt is when the pod's Ready condition last turned true.
func readyAt(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// ------------------------------------------------------------------ push

// pushURL is the push Service's cluster IP (kube-proxy routes it from the
// host as from a pod).
func (ic *installedChart) pushURL(ctx context.Context) (string, error) {
	s, err := cluster.Client.CoreV1().Services(ic.ns).Get(ctx, icAdapter+"-push", metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return "http://" + net.JoinHostPort(s.Spec.ClusterIP, "6445") + "/push", nil
}

// pushClient opens a connection per push, so that kube-proxy spreads the
// pushes over the replicas (one kept-alive connection would reach one).
var pushClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}

// tryPush posts body to the push Service; 204 is success.
func (ic *installedChart) tryPush(ctx context.Context, body string) error {
	u, err := ic.pushURL(ctx)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+ic.token)
	req.Header.Set("Content-Type", "text/plain; version=0.0.4")
	resp, err := pushClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("push: %d %s", resp.StatusCode, msg)
	}
	return nil
}

// push pushes body through the push Service, retrying for up to 30 s: kube-
// proxy programs a new Service's rules a moment after its endpoints are
// ready, and a push before that is refused. The loads that count failures
// use tryPush.
func (ic *installedChart) push(t *testing.T, body string) {
	t.Helper()
	start := time.Now()
	attempts, first := 0, ""
	err := Poll(context.Background(), 30*time.Second, 500*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		attempts++
		err := ic.tryPush(ctx, body)
		if err != nil && first == "" {
			first = err.Error()
		}
		return err == nil, "", err
	})
	if err != nil {
		t.Fatalf("push through the push Service: %d attempts in 30s failed: first %s; %v", attempts, first, err)
	}
	if attempts > 1 {
		t.Logf("installedchart: a push through the push Service took %d attempts (%s); first error: %s", attempts, time.Since(start).Round(100*time.Millisecond), first)
	}
}

// podGet reads path from one adapter pod's secure port on its pod IP, with
// the admin kubeconfig's client certificate (the adapter authenticates it
// with the cluster's client CA). The pod's certificate names the Service, not
// the pod IP: it is not verified here.
func podGet(ctx context.Context, p corev1.Pod, path string) (int, []byte, error) {
	cfg := rest.CopyConfig(cluster.Config)
	cfg.Host = "https://" + net.JoinHostPort(p.Status.PodIP, "6443")
	cfg.TLSClientConfig.Insecure = true
	cfg.TLSClientConfig.CAData, cfg.TLSClientConfig.CAFile, cfg.TLSClientConfig.ServerName = nil, "", ""
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+path, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

type externalList struct {
	Items []struct {
		MetricLabels map[string]string `json:"metricLabels"`
		Value        resource.Quantity `json:"value"`
	} `json:"items"`
}

// externalValues reads an External metric's items from one pod, by their
// label key.
func externalValues(ctx context.Context, p corev1.Pod, ns, metric, key string) (map[string]int64, error) {
	code, body, err := podGet(ctx, p, "/apis/external.metrics.k8s.io/v1beta1/namespaces/"+ns+"/"+metric)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("%s: %d %s", p.Name, code, bytes.TrimSpace(body))
	}
	var l externalList
	if err := json.Unmarshal(body, &l); err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, it := range l.Items {
		out[it.MetricLabels[key]] = it.Value.Value()
	}
	return out, nil
}

// testPushesReachReplicas pushes series to the push Service, one push per
// series (kube-proxy spreads them over the replicas), and reads each replica
// directly: every replica serves every series.
func (ic *installedChart) testPushesReachReplicas(t *testing.T, mode string) {
	ctx := context.Background()
	const n = 40
	metric := "ichart_spread_" + strings.ToLower(mode)
	start := time.Now()
	for i := range n {
		ic.push(t, fmt.Sprintf("%s{namespace=%q,series=\"s%d\"} %d\n", metric, ic.ns, i, 100+i))
	}
	pods, err := ic.pods(ctx, icAdapter)
	if err != nil || len(pods) != 2 {
		t.Fatalf("adapter pods %d: %v", len(pods), err)
	}
	for _, p := range pods {
		Eventually(t, 30*time.Second, 200*time.Millisecond, "every series on "+p.Name, func(ctx context.Context) (bool, string, error) {
			got, err := externalValues(ctx, p, ic.ns, metric, "series")
			if err != nil {
				return false, err.Error(), nil
			}
			var missing []string
			for i := range n {
				if got[fmt.Sprintf("s%d", i)] != int64(100+i) {
					missing = append(missing, fmt.Sprintf("s%d=%d", i, got[fmt.Sprintf("s%d", i)]))
				}
			}
			return len(missing) == 0, fmt.Sprintf("%d of %d series wrong or missing: %v", len(missing), n, missing), nil
		})
	}
	t.Logf("installedchart: certs.mode=%s: %d pushes to the push Service served by both replicas (%s, %s) within %s",
		mode, n, pods[0].Name, pods[1].Name, time.Since(start).Round(100*time.Millisecond))
}

// ------------------------------------------------------------------ rollout

// load pushes an increasing value of one series to the push Service and reads
// it through the aggregator, each every 50 ms, counting the reads that are not
// a 200 and the values lower than one already read.
type load struct {
	ic     *installedChart
	metric string
	stop   chan struct{}
	wg     sync.WaitGroup

	pushes, pushFailed       atomic.Int64
	reads, non200, backwards atomic.Int64
	acked                    atomic.Int64 // the last value a push of which got 204
	mu                       sync.Mutex
	failures                 []string // the first few, for the report
	maxSeen                  int64
}

func (ic *installedChart) startLoad(t *testing.T, metric string) *load {
	t.Helper()
	l := &load{ic: ic, metric: metric, stop: make(chan struct{})}
	// A first value, served before the reader counts.
	l.pushOne(1)
	path := "/apis/external.metrics.k8s.io/v1beta1/namespaces/" + ic.ns + "/" + metric
	Eventually(t, 30*time.Second, 100*time.Millisecond, metric+" served through the aggregator", func(ctx context.Context) (bool, string, error) {
		_, err := adapterRawGet(ctx, cluster.Client, path, nil)
		return err == nil, fmt.Sprint(err), nil
	})
	l.wg.Add(2)
	go func() {
		defer l.wg.Done()
		for v := int64(2); ; v++ {
			select {
			case <-l.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			l.pushOne(v)
		}
	}()
	go func() {
		defer l.wg.Done()
		for {
			select {
			case <-l.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			l.readOne(path)
		}
	}()
	return l
}

func (l *load) pushOne(v int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l.pushes.Add(1)
	if err := l.ic.tryPush(ctx, fmt.Sprintf("%s{namespace=%q} %d\n", l.metric, l.ic.ns, v)); err != nil {
		l.pushFailed.Add(1)
		l.note("push %d: %v", v, err)
		return
	}
	l.acked.Store(v)
}

func (l *load) readOne(path string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l.reads.Add(1)
	raw, err := adapterRawGet(ctx, cluster.Client, path, nil)
	if err != nil {
		l.non200.Add(1)
		l.note("read: %d %v", adapterStatusCode(err), err)
		return
	}
	var el externalList
	if err := json.Unmarshal(raw, &el); err != nil || len(el.Items) != 1 {
		l.non200.Add(1)
		l.note("read: %d items (%v): %s", len(el.Items), err, raw)
		return
	}
	v := el.Items[0].Value.Value()
	l.mu.Lock()
	defer l.mu.Unlock()
	if v < l.maxSeen {
		l.backwards.Add(1)
		if len(l.failures) < 10 {
			l.failures = append(l.failures, fmt.Sprintf("read %d after %d", v, l.maxSeen))
		}
		return
	}
	l.maxSeen = v
}

func (l *load) note(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.failures) < 10 {
		l.failures = append(l.failures, fmt.Sprintf(format, args...))
	}
}

// finish stops the load, checks that the last acknowledged value is served by
// every replica, and reports the counts.
func (l *load) finish(t *testing.T, what string) {
	t.Helper()
	close(l.stop)
	l.wg.Wait()
	last := l.acked.Load()
	pods, err := l.ic.pods(context.Background(), icAdapter)
	if err != nil {
		t.Fatal(err)
	}
	lost := 0
	for _, p := range pods {
		err := Poll(context.Background(), 10*time.Second, 200*time.Millisecond, func(ctx context.Context) (bool, string, error) {
			got, err := externalValues(ctx, p, l.ic.ns, l.metric, "")
			if err != nil {
				return false, err.Error(), nil
			}
			return got[""] == last, fmt.Sprintf("serves %d", got[""]), nil
		})
		if err != nil {
			lost++
			l.ic.errorf(t, "%s: replica %s does not serve the last acknowledged value %d: %v", what, p.Name, last, err)
		}
	}
	t.Logf("installedchart: %s: %d pushes (%d not acknowledged), %d queries through the aggregator, %d non-200, %d backwards values, last value on %d of %d replicas; first failures: %v",
		what, l.pushes.Load(), l.pushFailed.Load(), l.reads.Load(), l.non200.Load(), l.backwards.Load(), len(pods)-lost, len(pods), l.failures)
	// Issue 27's goal for a rollout and a pod deletion: no failed query and no
	// read older than an earlier one. The adapter Service's ClientIP affinity
	// keeps the aggregator's reads on one replica, and a stopping replica
	// flushes its forwards before it stops serving reads.
	if n := l.non200.Load(); n > 0 {
		l.ic.errorf(t, "%s: %d of %d queries through the aggregator were not a 200 (goal: 0): %v", what, n, l.reads.Load(), l.failures)
	}
	if n := l.backwards.Load(); n > 0 {
		l.ic.errorf(t, "%s: %d reads through the aggregator showed an older value than an earlier read (goal: 0): %v", what, n, l.failures)
	}
}

// testRollingUpdate changes the adapter's config (a new ConfigMap, hence a
// rollout of its Deployment) while pushes and queries run.
func (ic *installedChart) testRollingUpdate(t *testing.T) {
	before, err := ic.pods(context.Background(), icAdapter)
	if err != nil {
		t.Fatal(err)
	}
	l := ic.startLoad(t, "ichart_rollout")
	time.Sleep(3 * time.Second)
	start := time.Now()
	ic.values = append(ic.values, "adapter.config.discovery.maxMetrics=999")
	ic.apply(t)
	ic.waitReplaced(t, before)
	took := time.Since(start)
	time.Sleep(5 * time.Second)
	l.finish(t, "rolling update")
	t.Logf("installedchart: rolling update of %s took %s", icAdapter, took.Round(100*time.Millisecond))
}

// waitReplaced waits until the adapter runs two Ready pods, none of before.
func (ic *installedChart) waitReplaced(t *testing.T, before []corev1.Pod) {
	t.Helper()
	old := map[string]bool{}
	for _, p := range before {
		old[p.Name] = true
	}
	Eventually(t, 4*time.Minute, 500*time.Millisecond, "two new Ready adapter pods", func(ctx context.Context) (bool, string, error) {
		// The Deployment's selector: the pods' own labels name their
		// ReplicaSet (pod-template-hash), which a rollout replaces.
		d, err := cluster.Client.AppsV1().Deployments(ic.ns).Get(ctx, icAdapter, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil {
			return false, "", err
		}
		list, err := cluster.Client.CoreV1().Pods(ic.ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return false, "", err
		}
		fresh, stale := 0, 0
		var state []string
		for _, p := range list.Items {
			state = append(state, fmt.Sprintf("%s ready=%v deleting=%v", p.Name, podReady(&p), p.DeletionTimestamp != nil))
			if old[p.Name] {
				stale++
			} else if podReady(&p) && p.DeletionTimestamp == nil {
				fresh++
			}
		}
		return fresh == 2 && stale == 0, strings.Join(state, ", "), nil
	})
}

// testAdapterPodDeleted deletes one adapter pod while pushes and queries run.
func (ic *installedChart) testAdapterPodDeleted(t *testing.T) {
	ctx := context.Background()
	pods, err := ic.pods(ctx, icAdapter)
	if err != nil || len(pods) != 2 {
		t.Fatalf("adapter pods %d: %v", len(pods), err)
	}
	l := ic.startLoad(t, "ichart_deleted")
	time.Sleep(3 * time.Second)
	start := time.Now()
	if err := cluster.Client.CoreV1().Pods(ic.ns).Delete(ctx, pods[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ic.waitReplaced(t, pods[:1])
	took := time.Since(start)
	time.Sleep(5 * time.Second)
	l.finish(t, "adapter pod deleted")
	t.Logf("installedchart: adapter pod %s deleted, a replacement Ready after %s", pods[0].Name, took.Round(100*time.Millisecond))
}

// ------------------------------------------------------------------ autoscaler

// testLeaderDeletedAndRecord: a MetricAutoscaler holds 5 replicas of a
// Deployment in its scale-down stabilization window when the leader's pod is
// deleted; the other replica takes over with the saved history: the
// Deployment stays at 5 until the window (counted from before the deletion)
// ends, and is scaled down then, not a window after the takeover. Then
// `autoscaler record` fetches the recording through a port-forward to the new
// leader's pod, and `autoscaler simulate` replays it to the same decisions.
func (ic *installedChart) testLeaderDeletedAndRecord(t *testing.T) {
	ctx := context.Background()
	const name = "steady"
	const window = 40 * time.Second
	depth := func(v int) {
		ic.push(t, fmt.Sprintf("ichart_depth{namespace=%q,queue=%q} %d\n", ic.ns, name, v))
	}
	depth(50)
	cluster.CreateDeployment(t, KwokDeployment(ic.ns, name, 1, "100m", "10m"))
	ma := newMA(ic.ns, name, 1, 10, time.Second, queueSpec(name, "10"))
	ma.Spec.Metrics[0].External.Metric.Name = "ichart_depth"
	ma.Spec.Behavior = scaleDownBehavior(int32(window/time.Second), 10, 15)
	createMA(t, ma)
	waitReplicas(t, ic.ns, name, 5, time.Minute)

	time.Sleep(2 * time.Second)
	dropped := time.Now()
	depth(10) // the proposal is now 1, held by the window
	time.Sleep(8 * time.Second)
	leader := ic.leaderPod(t)
	if m, err := getMA(ctx, ic.ns, name); err != nil || m.Status.History == nil {
		t.Fatalf("the MetricAutoscaler's status has no history before the deletion: %v", err)
	}
	if err := cluster.Client.CoreV1().Pods(ic.ns).Delete(ctx, leader, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()

	var seen []int32
	var scaledDown time.Time
	for time.Since(dropped) < window+45*time.Second {
		got, err := replicasOf(ctx, ic.ns, name)
		if err == nil && (len(seen) == 0 || seen[len(seen)-1] != got) {
			seen = append(seen, got)
		}
		if err == nil && got < 5 {
			scaledDown = time.Now()
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	next := ic.leaderPod(t)
	t.Logf("installedchart: autoscaler leader %s deleted %s into the %s window; new leader %s; replicas %v; scaled down %s after the drop",
		leader, deleted.Sub(dropped).Round(100*time.Millisecond), window, next, seen, scaledDown.Sub(dropped).Round(100*time.Millisecond))
	if next == leader {
		t.Errorf("the Lease still names the deleted pod %s", leader)
	}
	if scaledDown.IsZero() {
		t.Fatalf("no scale-down within %s of the drop (replicas %v)", window+45*time.Second, seen)
	}
	// Held at 5 until the scale-down, which goes below 5 only.
	for _, v := range seen[:len(seen)-1] {
		if v != 5 {
			t.Errorf("replicas went %v around the takeover: a jump", seen)
			break
		}
	}
	if after := scaledDown.Sub(dropped); after < window-2*time.Second {
		t.Errorf("scaled down %s after the drop, before the %s window ended", after, window)
	} else if after > window+12*time.Second {
		t.Errorf("scaled down %s after the drop: the new leader forgot the history and waited a window again", after)
	}
	waitReplicas(t, ic.ns, name, 1, time.Minute)
	time.Sleep(2 * time.Second)

	// autoscaler record through its default path: the leader Lease names the
	// pod, and a port-forward through the API server reaches its record port.
	dir := t.TempDir()
	file, decisions := filepath.Join(dir, "steady.yaml"), filepath.Join(dir, "steady.jsonl")
	fetched := time.Now()
	_, stderr, code := runAutoscaler(t, "record", "-n", ic.ns, name, "--kubeconfig", cluster.Kubeconfig,
		"--lease-namespace", ic.ns, "-o", file, "--decisions", decisions)
	if code != 0 {
		t.Fatalf("autoscaler record exited %d: %s", code, stderr)
	}
	recorded := readDecisions(t, decisions)
	t.Logf("installedchart: autoscaler record -n %s %s (port-forward to %s) in %s: %d reconciles", ic.ns, name, next,
		time.Since(fetched).Round(time.Millisecond), len(recorded))
	if len(recorded) < 5 || recorded[len(recorded)-1].Replicas != 1 {
		t.Fatalf("%d reconciles recorded, want the new leader's (at least 5, ending at 1 replica)", len(recorded))
	}
	replaySameDecisions(t, file, recorded)
	t.Logf("installedchart: autoscaler simulate replayed the %d recorded reconciles to the same decisions", len(recorded))
}

// leaderPod is the pod the autoscaler's leader Lease names.
func (ic *installedChart) leaderPod(t *testing.T) string {
	t.Helper()
	var pod string
	Eventually(t, 45*time.Second, 500*time.Millisecond, "the leader Lease naming a live autoscaler pod", func(ctx context.Context) (bool, string, error) {
		l, err := cluster.Client.CoordinationV1().Leases(ic.ns).Get(ctx, icLease, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return false, "no holder", nil
		}
		pod = recordclient.PodOf(*l.Spec.HolderIdentity)
		p, err := cluster.Client.CoreV1().Pods(ic.ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp != nil {
			return false, fmt.Sprintf("holder %s: %v", pod, err), nil
		}
		return true, "", nil
	})
	return pod
}

// ------------------------------------------------------------------ selfSigned

// testSelfSigned upgrades the release to certs.mode=selfSigned: the
// APIServices carry the chart's CA and no insecureSkipTLSVerify, are
// Available, and pushes reach both replicas again.
func (ic *installedChart) testSelfSigned(t *testing.T) {
	before, err := ic.pods(context.Background(), icAdapter)
	if err != nil {
		t.Fatal(err)
	}
	ic.values = append(ic.values, "certs.mode=selfSigned")
	ic.apply(t)
	ic.waitReplaced(t, before)
	ca := renderedSecret(t, ic.last, "ca.crt")
	for _, n := range icAPIServices[:2] {
		Eventually(t, time.Minute, time.Second, "APIService "+n+" Available with the chart's CA", func(ctx context.Context) (bool, string, error) {
			a, err := cluster.Dynamic.Resource(apiServiceGVR).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			insecure, _, _ := unstructured.NestedBool(a.Object, "spec", "insecureSkipTLSVerify")
			bundle, _, _ := unstructured.NestedString(a.Object, "spec", "caBundle")
			conds, _, _ := unstructured.NestedSlice(a.Object, "status", "conditions")
			available := false
			for _, c := range conds {
				m, _ := c.(map[string]any)
				available = available || (m["type"] == "Available" && m["status"] == "True")
			}
			return !insecure && bundle != "" && available, fmt.Sprintf("insecureSkipTLSVerify %v, caBundle %d bytes (chart CA %d), conditions %v", insecure, len(bundle), len(ca), conds), nil
		})
	}
	ic.testPushesReachReplicas(t, "selfSigned")
}

// ------------------------------------------------------------------ workers

// testWorkers: real worker pods (the worker image of `make images`) consume
// their own Redis list each; kube-controller-manager's HPA scales one worker
// Deployment and a MetricAutoscaler the other, each on its own list's depth as
// the adapter's redis provider serves it (a config change that rolls the
// adapter); each list drains because the workers took its jobs: the workers'
// counters add up to what the test published, and the test consumes nothing.
func (ic *installedChart) testWorkers(t *testing.T) {
	ctx := context.Background()
	var workerTar string
	for _, tar := range ic.images {
		if strings.HasPrefix(filepath.Base(tar), "worker-") {
			workerTar = tar
		}
	}
	if workerTar == "" {
		t.Fatalf("make images built no worker image (%v)", ic.images)
	}
	image := "ghcr.io/metricscale/worker:" + strings.TrimSuffix(strings.TrimPrefix(filepath.Base(workerTar), "worker-"), ".tar")

	// Pods reach the host's Redis on the host's address: the development
	// Redis listens there too while the test runs (backends.SetPodAddress),
	// and its Env names that address.
	redis := queueBackendOf(t, "redis")
	host, err := backends.HostAddress()
	if err != nil {
		t.Fatal(err)
	}
	var startLog bytes.Buffer
	if err := backends.SetPodAddress(cluster.Dir, host); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		var log bytes.Buffer
		if err := backends.SetPodAddress(cluster.Dir, netip.Addr{}); err != nil {
			t.Error(err)
		} else if err := redis.Start(context.Background(), cluster.Dir, &log); err != nil {
			t.Errorf("rebind Redis to 127.0.0.1 only: %v\n%s", err, log.String())
		}
	})
	if err := redis.Start(ctx, cluster.Dir, &startLog); err != nil {
		t.Fatalf("rebind Redis to %s: %v\n%s", host, err, startLog.String())
	}
	env := redis.Env(cluster.Dir)
	addr := env["METRICSCALE_REDIS_ADDR"]
	if h, _, err := net.SplitHostPort(addr); err != nil || h != host.String() {
		t.Fatalf("METRICSCALE_REDIS_ADDR %q: want the host address %s (%v)", addr, host, err)
	}
	readFile := func(k string) []byte {
		b, err := os.ReadFile(env[k])
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		return bytes.TrimSpace(b)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ichart-redis", Namespace: ic.ns}, Data: map[string][]byte{
		"password":       readFile("METRICSCALE_REDIS_PASSWORD_FILE"),
		"admin-password": readFile("METRICSCALE_REDIS_ADMIN_PASSWORD_FILE"),
	}}
	if _, err := cluster.Client.CoreV1().Secrets(ic.ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The adapter serves each list's length (LLEN, the adapter's read-only
	// ACL user) as an External metric.
	keys := map[string]string{"hpa": "ichart-hpa-" + ic.ns, "ma": "ichart-ma-" + ic.ns}
	values := map[string]any{"adapter": map[string]any{
		"config": map[string]any{
			"providers": []any{
				map[string]any{"name": "memory", "type": "memory", "timeout": "5s", "options": map[string]any{"maxSeries": 1000000}},
				map[string]any{"name": "redis", "type": "redis", "timeout": "2s", "options": map[string]any{
					"address": addr, "username": env["METRICSCALE_REDIS_USER"],
					"password": map[string]any{"file": "/etc/metricscale/redis/password"},
					"cacheTTL": "1s",
					"metrics": []any{
						map[string]any{"name": "redis_ichart_hpa", "type": "listLength", "key": keys["hpa"]},
						map[string]any{"name": "redis_ichart_ma", "type": "listLength", "key": keys["ma"]},
					},
				}},
			},
			"routes": []any{
				map[string]any{"metric": "redis_*", "provider": "redis"},
				map[string]any{"metric": "*", "provider": "memory"},
			},
		},
		"extraVolumes": []any{map[string]any{"name": "redis", "secret": map[string]any{
			"secretName": secret.Name, "items": []any{map[string]any{"key": "password", "path": "password"}}}}},
		"extraVolumeMounts": []any{map[string]any{"name": "redis", "mountPath": "/etc/metricscale/redis", "readOnly": true}},
	}}
	vf := filepath.Join(ic.dir, "redis-values.yaml")
	data, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vf, data, 0o600); err != nil {
		t.Fatal(err)
	}
	before, err := ic.pods(ctx, icAdapter)
	if err != nil {
		t.Fatal(err)
	}
	ic.files = append(ic.files, vf)
	ic.apply(t)
	ic.waitReplaced(t, before)

	const jobs, perPod, maxPods = 300, 20, 4
	const jobTime = 200 * time.Millisecond
	for kind, key := range keys {
		ic.createWorkers(t, kind+"-workers", image, addr, key, jobTime)
	}
	target := resource.MustParse(fmt.Sprint(perPod))
	spec := func(kind string) autoscalingv2.MetricSpec {
		return autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "redis_ichart_" + kind},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &target},
		}}
	}
	one := int32(1)
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "hpa-workers", Namespace: ic.ns},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "hpa-workers"},
			MinReplicas:    &one, MaxReplicas: maxPods, Metrics: []autoscalingv2.MetricSpec{spec("hpa")},
		},
	}
	cluster.CreateHPA(t, hpa)
	createMA(t, newMA(ic.ns, "ma-workers", 1, maxPods, time.Second, spec("ma")))

	queues := map[string]backends.Queue{}
	for kind, key := range keys {
		qenv := maps.Clone(env)
		qenv["METRICSCALE_REDIS_QUEUE"] = key
		q, err := redis.OpenQueue(ctx, qenv)
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		queues[kind] = q
	}
	start := time.Now()
	for kind, q := range queues {
		if err := q.Publish(ctx, jobs); err != nil {
			t.Fatalf("publish to %s: %v", keys[kind], err)
		}
	}
	peak := map[string]int32{}
	drained := map[string]time.Duration{}
	Eventually(t, 5*time.Minute, 500*time.Millisecond, "both lists drained", func(ctx context.Context) (bool, string, error) {
		var state []string
		for kind, q := range queues {
			n, err := q.Depth(ctx)
			if err != nil {
				return false, "", err
			}
			r, err := replicasOf(ctx, ic.ns, kind+"-workers")
			if err != nil {
				return false, "", err
			}
			peak[kind] = max(peak[kind], r)
			if _, done := drained[kind]; !done && n == 0 {
				drained[kind] = time.Since(start)
			}
			state = append(state, fmt.Sprintf("%s: depth %d, %d replicas", keys[kind], n, r))
		}
		return len(drained) == len(queues), strings.Join(state, "; "), nil
	})
	for kind := range keys {
		name := kind + "-workers"
		// An empty list is not the end of the work: the last jobs taken are still
		// being processed; wait for the counters a little, then compare.
		processed := 0
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(500 * time.Millisecond) {
			if processed = ic.workersProcessed(t, name); processed >= jobs || time.Now().After(deadline) {
				break
			}
		}
		by := map[string]string{"hpa": "kube-controller-manager's HPA", "ma": "the chart's autoscaler (MetricAutoscaler)"}[kind]
		t.Logf("installedchart: workers: %s scaled %s 1 -> %d (max %d) on its list's depth; %d jobs drained in %s; the workers' counters sum to %d",
			by, name, peak[kind], maxPods, jobs, drained[kind].Round(100*time.Millisecond), processed)
		if peak[kind] < 2 {
			t.Errorf("%s: %s never scaled %s above 1 replica for %d jobs at %d per pod", name, by, name, jobs, perPod)
		}
		if processed != jobs {
			t.Errorf("%s: the workers processed %d jobs, the test published %d", name, processed, jobs)
		}
	}
}

// createWorkers creates a Deployment of one worker pod consuming list key.
func (ic *installedChart) createWorkers(t *testing.T, name, image, addr, key string, jobTime time.Duration) {
	t.Helper()
	one := int32(1)
	podLabels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ic.ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{corev1.LabelHostname: ic.node},
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					// A worker finishes the job it holds on SIGTERM.
					TerminationGracePeriodSeconds: ptr.To(int64(10)),
					Containers: []corev1.Container{{
						Name: "worker", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
						Args: []string{"--backend=redis", "--queue=" + key, "--job-time=" + jobTime.String(), "--listen=:8080"},
						Env: []corev1.EnvVar{
							{Name: "METRICSCALE_REDIS_ADDR", Value: addr},
							{Name: "METRICSCALE_REDIS_ADMIN_PASSWORD_FILE", Value: "/etc/redis/admin-password"},
						},
						Ports:          []corev1.ContainerPort{{Name: "metrics", ContainerPort: 8080}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("metrics")}}, PeriodSeconds: 2},
						Resources:      corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")}},
						SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
						VolumeMounts: []corev1.VolumeMount{{Name: "redis", MountPath: "/etc/redis", ReadOnly: true}},
					}},
					Volumes: []corev1.Volume{{Name: "redis", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
						SecretName: "ichart-redis", Items: []corev1.KeyToPath{{Key: "admin-password", Path: "admin-password"}}}}}},
				},
			},
		},
	}
	cluster.CreateDeployment(t, d)
	cluster.WaitDeploymentReady(t, ic.ns, name, 1, 2*time.Minute)
}

// workersProcessed sums metricscale_worker_jobs_processed_total over the
// Deployment's pods, read from each pod's /metrics on its pod IP. Pods a
// scale-down removed would be missing from the sum: the test ends before the
// autoscalers' 5-minute scale-down window.
func (ic *installedChart) workersProcessed(t *testing.T, name string) int {
	t.Helper()
	pods, err := cluster.Pods(context.Background(), ic.ns, map[string]string{"app": name})
	if err != nil {
		t.Fatal(err)
	}
	sum := 0
	for _, p := range pods {
		if p.Status.PodIP == "" {
			continue
		}
		body, err := httpGet(context.Background(), "http://"+net.JoinHostPort(p.Status.PodIP, "8080")+"/metrics")
		if err != nil {
			t.Fatalf("worker %s /metrics: %v", p.Name, err)
		}
		for _, line := range strings.Split(body, "\n") {
			if v, ok := strings.CutPrefix(line, "metricscale_worker_jobs_processed_total "); ok {
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil {
					t.Fatalf("worker %s: %q: %v", p.Name, line, err)
				}
				sum += int(f)
			}
		}
	}
	return sum
}
