//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

// parityPort is where the parity test runs prometheus-adapter (the adapter is on 6444,
// the autoscaler's metrics on 6446).
const parityPort = 6447

// TestPrometheusAdapterParity runs prometheus-adapter v0.12.0 (built by hack/cluster.sh from
// its own module) on the cluster's Prometheus with the rules of the adapter's prom provider
// (hack/adapter-config.yaml, written out as a prometheus-adapter rules file), and compares
// both adapters' answers to the same queries, asked of each directly: discovery, values,
// labels, described objects, metrics.k8s.io usage and 404s. Values must be equal, but for
// CPU rates, which the two evaluate a moment apart: 10%.
func TestPrometheusAdapterParity(t *testing.T) {
	cluster.RequirePrometheus(t)
	ctx := context.Background()
	bin := cluster.PrometheusAdapter(t)
	rulesFile := writeParityRules(t)
	dir := t.TempDir()
	pctx, stop := context.WithCancel(ctx)
	cmd := exec.CommandContext(pctx, bin,
		"--prometheus-url="+cluster.PrometheusURL, "--config="+rulesFile,
		"--metrics-relist-interval=10s", "--metrics-max-age=1m",
		fmt.Sprintf("--secure-port=%d", parityPort), "--bind-address=127.0.0.1", "--cert-dir="+dir,
		"--lister-kubeconfig="+cluster.Kubeconfig, "--authentication-kubeconfig="+cluster.Kubeconfig,
		"--authorization-kubeconfig="+cluster.Kubeconfig, "-v=1")
	logf, err := os.Create(filepath.Join(cluster.Dir, "logs", "prometheus-adapter-parity.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(); _ = cmd.Wait(); logf.Close() })

	client := parityClient(t)
	ours := fmt.Sprintf("https://127.0.0.1:%d", 6444)
	theirs := fmt.Sprintf("https://127.0.0.1:%d", parityPort)
	Eventually(t, 60*time.Second, 500*time.Millisecond, "prometheus-adapter to be ready", func(ctx context.Context) (bool, string, error) {
		code, body, err := parityGet(ctx, client, theirs+"/readyz")
		if err != nil {
			return false, err.Error(), nil
		}
		return code == http.StatusOK, fmt.Sprintf("%d %s", code, body), nil
	})

	ns := cluster.CreateNamespace(t, "parity")
	global := "global-" + ns
	if err := cluster.SetExporterSeries(ctx, fmt.Sprintf(`queue_messages_ready{namespace=%[1]q,queue="orders"} 12
queue_messages_ready{namespace=%[1]q,queue="billing"} 5
queue_messages_ready{namespace=%[1]q,queue="jobs"} 50.5
queue_messages_ready{queue=%[2]q} 7
app_requests{namespace=%[1]q,deployment="web"} 42.5
app_requests{namespace=%[1]q,deployment="api"} 3
`, ns, global)); err != nil {
		t.Fatal(err)
	}
	cluster.CreateDeployment(t, KwokDeployment(ns, "web", 2, "100m", "200m"))
	cluster.CreateDeployment(t, KwokDeployment(ns, "api", 1, "100m", "50m"))
	cluster.WaitDeploymentReady(t, ns, "web", 2, 60*time.Second)
	cluster.WaitDeploymentReady(t, ns, "api", 1, 60*time.Second)
	pods, err := cluster.Pods(ctx, ns, map[string]string{"app": "web"})
	if err != nil || len(pods) == 0 {
		t.Fatalf("pods of web: %v %v", pods, err)
	}
	webPod := pods[0].Name

	cm := "/apis/custom.metrics.k8s.io/v1beta2"
	em := "/apis/external.metrics.k8s.io/v1beta1/namespaces/"
	rm := "/apis/metrics.k8s.io/v1beta1"
	sel := func(s string) string { return "?labelSelector=" + url.QueryEscape(s) }
	queries := []struct {
		what, path string
		want       int // the status both must answer
	}{
		{"custom discovery", cm, http.StatusOK},
		{"external discovery", "/apis/external.metrics.k8s.io/v1beta1", http.StatusOK},
		{"external, all queues", em + ns + "/prom_queue_messages_ready", http.StatusOK},
		{"external, =", em + ns + "/prom_queue_messages_ready" + sel("queue=orders"), http.StatusOK},
		{"external, ==", em + ns + "/prom_queue_messages_ready" + sel("queue==billing"), http.StatusOK},
		{"external, !=", em + ns + "/prom_queue_messages_ready" + sel("queue!=orders"), http.StatusOK},
		{"external, in", em + ns + "/prom_queue_messages_ready" + sel("queue in (orders,billing)"), http.StatusOK},
		{"external, notin", em + ns + "/prom_queue_messages_ready" + sel("queue notin (orders)"), http.StatusOK},
		{"external, exists", em + ns + "/prom_queue_messages_ready" + sel("queue"), http.StatusOK},
		{"external, two requirements", em + ns + "/prom_queue_messages_ready" + sel("queue!=orders,queue!=jobs"), http.StatusOK},
		{"external, no match", em + ns + "/prom_queue_messages_ready" + sel("queue=nope"), http.StatusNotFound},
		{"external, other namespace", em + "default/prom_queue_messages_ready" + sel("queue=orders"), http.StatusNotFound},
		{"external, not namespaced", em + ns + "/prom_cluster_queue_messages_ready" + sel("queue="+global), http.StatusOK},
		{"external, not namespaced, from default", em + "default/prom_cluster_queue_messages_ready" + sel("queue="+global), http.StatusOK},
		{"external, unknown metric", em + ns + "/prom_no_such_metric", http.StatusNotFound},
		{"namespace metric", cm + "/namespaces/" + ns + "/metrics/prom_queue_messages_ready", http.StatusOK},
		{"namespace metric of objects", cm + "/namespaces/" + ns + "/metrics/prom_app_requests", http.StatusOK},
		{"deployment by name", cm + "/namespaces/" + ns + "/deployments.apps/web/prom_app_requests", http.StatusOK},
		{"deployments, all", cm + "/namespaces/" + ns + "/deployments.apps/*/prom_app_requests", http.StatusBadRequest},
		{"deployments, selector", cm + "/namespaces/" + ns + "/deployments.apps/*/prom_app_requests" + sel("app=api"), http.StatusBadRequest},
		{"deployment without a value", cm + "/namespaces/" + ns + "/deployments.apps/nope/prom_app_requests", http.StatusNotFound},
		{"pods, selector", cm + "/namespaces/" + ns + "/pods/*/prom_container_cpu_usage" + sel("app=web"), http.StatusOK},
		{"pods, other selector", cm + "/namespaces/" + ns + "/pods/*/prom_container_cpu_usage" + sel("app=api"), http.StatusOK},
		{"pods, all", cm + "/namespaces/" + ns + "/pods/*/prom_container_cpu_usage", http.StatusOK},
		{"pod by name", cm + "/namespaces/" + ns + "/pods/" + webPod + "/prom_container_cpu_usage", http.StatusOK},
		{"pods, selector matching none", cm + "/namespaces/" + ns + "/pods/*/prom_container_cpu_usage" + sel("app=nope"), http.StatusNotFound},
		{"custom, unknown metric", cm + "/namespaces/" + ns + "/pods/*/prom_no_such_metric", http.StatusNotFound},
		{"custom, unknown namespace metric", cm + "/namespaces/" + ns + "/metrics/prom_no_such_metric", http.StatusNotFound},
		{"metrics.k8s.io pods", rm + "/namespaces/" + ns + "/pods", http.StatusOK},
		{"metrics.k8s.io pods, selector", rm + "/namespaces/" + ns + "/pods" + sel("app=web"), http.StatusOK},
		{"metrics.k8s.io pod by name", rm + "/namespaces/" + ns + "/pods/" + webPod, http.StatusOK},
		{"metrics.k8s.io nodes", rm + "/nodes", http.StatusOK},
	}
	// Documented deviations (adapter/README, "Migrating from prometheus-adapter"): the
	// status each answers instead of agreeing. An empty external selection is a 404 naming
	// the metric here, an empty list there; a selector query on a resource outside
	// selectorResources is a 400 saying how to allow it here, a LIST per request there.
	deviations := map[string][2]int{
		"external, no match":        {http.StatusNotFound, http.StatusOK},
		"external, other namespace": {http.StatusNotFound, http.StatusOK},
		"deployments, all":          {http.StatusBadRequest, http.StatusOK},
		"deployments, selector":     {http.StatusBadRequest, http.StatusOK},
	}
	// Both relist every 10s and the pods' CPU rate needs 20s of samples: the first
	// answers may differ for that reason alone, so each query gets until both agree.
	agreed := 0
	for _, q := range queries {
		var last string
		err := Poll(ctx, 45*time.Second, time.Second, func(ctx context.Context) (bool, string, error) {
			oc, ob, err := parityGet(ctx, client, ours+q.path)
			if err != nil {
				return false, "", err
			}
			tc, tb, err := parityGet(ctx, client, theirs+q.path)
			if err != nil {
				return false, "", err
			}
			if dev, ok := deviations[q.what]; ok {
				last = fmt.Sprintf("ours %d %s\ntheirs %d %s", oc, parityShort(ob), tc, parityShort(tb))
				return oc == dev[0] && tc == dev[1], last, nil
			}
			diff := parityDiff(oc, ob, tc, tb)
			if diff == "" && oc != q.want {
				diff = fmt.Sprintf("both answered %d, want %d", oc, q.want)
			}
			if diff == "" && oc == http.StatusOK {
				if items, _ := parityItems(ob); len(items) == 0 {
					diff = "both answered nothing"
				}
			}
			last = fmt.Sprintf("ours %d %s\ntheirs %d %s\n%s", oc, parityShort(ob), tc, parityShort(tb), diff)
			return diff == "", last, nil
		})
		if err != nil {
			t.Errorf("%s (%s): the adapters disagree: %v\n%s", q.what, q.path, err, last)
			continue
		}
		agreed++
	}
	t.Logf("%d of %d queries answered alike by metricscale and prometheus-adapter v0.12.0 (documented deviations included)", agreed, len(queries))
}

// writeParityRules writes the prom provider's rules as a prometheus-adapter rules file.
func writeParityRules(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(cluster.RepoRoot, "hack", "adapter-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Providers []struct {
			Name    string         `json:"name"`
			Options map[string]any `json:"options"`
		} `json:"providers"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	rules := map[string]any{}
	for _, p := range cfg.Providers {
		if p.Name == "prom" {
			for _, k := range []string{"rules", "externalRules", "resourceRules"} {
				if v, ok := p.Options[k]; ok {
					rules[k] = v
				}
			}
		}
	}
	if len(rules) == 0 {
		t.Fatal("hack/adapter-config.yaml has no prom provider with rules")
	}
	out, err := yaml.Marshal(rules)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(file, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// parityClient authenticates as the cluster's admin by client certificate, which both
// adapters accept through the cluster's extension-apiserver-authentication client CA.
func parityClient(t *testing.T) *http.Client {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(filepath.Join(cluster.Dir, "pki", "admin.crt"), filepath.Join(cluster.Dir, "pki", "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	// Both serve self-signed certificates on loopback; the client proves who it is.
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true, //nolint:gosec // test, loopback
	}}}
}

func parityGet(ctx context.Context, c *http.Client, u string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

func parityShort(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "..."
	}
	return string(b)
}

// parityDiff compares two answers by what a client reads in them: the status code; for a
// list of metric values, each item's described object or labels and its value; for
// discovery, the prom_* metric names; for metrics.k8s.io, each object's usage. Timestamps,
// windows and error texts are left out. It returns "" when they agree.
func parityDiff(oc int, ob []byte, tc int, tb []byte) string {
	if oc != tc {
		return fmt.Sprintf("status %d, prometheus-adapter %d", oc, tc)
	}
	if oc != http.StatusOK {
		return ""
	}
	o, err := parityItems(ob)
	if err != nil {
		return "ours: " + err.Error()
	}
	p, err := parityItems(tb)
	if err != nil {
		return "prometheus-adapter: " + err.Error()
	}
	if len(o) != len(p) {
		return fmt.Sprintf("%d items, prometheus-adapter %d:\n  %v\n  %v", len(o), len(p), o, p)
	}
	var diffs []string
	for k, ov := range o {
		pv, ok := p[k]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%s only in ours", k))
		case !parityClose(k, ov, pv):
			diffs = append(diffs, fmt.Sprintf("%s: %v, prometheus-adapter %v", k, ov, pv))
		}
	}
	sort.Strings(diffs)
	return strings.Join(diffs, "; ")
}

// parityItems flattens an answer to key → value: "Pod ns/name prom_x" → milli-units,
// "prom_x{queue=a}" → milli-units, "pod ns/name container cpu" → milli-units, a
// discovery entry → 0.
func parityItems(b []byte) (map[string]float64, error) {
	var doc struct {
		Kind      string `json:"kind"`
		Resources []struct {
			Name string `json:"name"`
		} `json:"resources"`
		Items []struct {
			MetricName      string            `json:"metricName"`
			MetricLabels    map[string]string `json:"metricLabels"`
			Value           resource.Quantity `json:"value"`
			DescribedObject struct {
				Kind, Namespace, Name string
			} `json:"describedObject"`
			Metric struct {
				Name string `json:"name"`
			} `json:"metric"`
			Metadata struct {
				Namespace, Name string
			} `json:"metadata"`
			Usage      map[string]resource.Quantity `json:"usage"`
			Containers []struct {
				Name  string                       `json:"name"`
				Usage map[string]resource.Quantity `json:"usage"`
			} `json:"containers"`
		} `json:"items"`
	}
	// a single object (a pod's metrics, one custom value list) reads as one item
	var single map[string]json.RawMessage
	if err := json.Unmarshal(b, &single); err != nil {
		return nil, err
	}
	if _, list := single["items"]; !list {
		if _, res := single["resources"]; !res {
			b = []byte(`{"items":[` + string(b) + `]}`)
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, r := range doc.Resources {
		if strings.Contains(r.Name, "prom_") {
			out["discovery "+r.Name] = 0
		}
	}
	for _, it := range doc.Items {
		switch {
		case it.MetricName != "":
			out[fmt.Sprintf("%s%v", it.MetricName, sortedLabels(it.MetricLabels))] = float64(it.Value.MilliValue())
		case it.DescribedObject.Name != "":
			d := it.DescribedObject
			out[fmt.Sprintf("%s %s/%s %s", d.Kind, d.Namespace, d.Name, it.Metric.Name)] = float64(it.Value.MilliValue())
		case it.Usage != nil:
			for r, q := range it.Usage {
				out[fmt.Sprintf("node %s %s", it.Metadata.Name, r)] = parityUsage(r, q)
			}
		default:
			for _, c := range it.Containers {
				for r, q := range c.Usage {
					out[fmt.Sprintf("pod %s/%s %s %s", it.Metadata.Namespace, it.Metadata.Name, c.Name, r)] = parityUsage(r, q)
				}
			}
		}
	}
	return out, nil
}

func parityUsage(r string, q resource.Quantity) float64 {
	if r == "cpu" {
		return float64(q.MilliValue())
	}
	return float64(q.Value())
}

func sortedLabels(l map[string]string) []string {
	var out []string
	for k, v := range l {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// parityClose: equal; a CPU rate (the only rate() in the rules) may differ by 10%, as
// the two adapters evaluate it a moment apart.
func parityClose(key string, a, b float64) bool {
	if a == b {
		return true
	}
	if !strings.Contains(key, "cpu") {
		return false
	}
	return math.Abs(a-b) <= 0.1*math.Max(math.Abs(a), math.Abs(b))
}
