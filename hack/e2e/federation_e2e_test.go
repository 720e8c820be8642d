//go:build e2e

package e2e

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/metricscale/metricscale/certs"
)

// The federation set-up of hack/adapter-config.yaml: provider "federated" (type
// apiservice) forwards fed_* to https://127.0.0.1:6448, with the cluster CA and the
// adapter's ServiceAccount token.
const (
	fedPort     = 6448
	fedProvider = "federated"
	fedQueue    = "fed_queue_depth"  // external, namespaced, one item per queue
	fedRequests = "fed_app_requests" // custom, deployments.apps
)

// fedRules are prometheus-adapter's rules for the federated names, over series the test
// sets in the exporter. No other provider of the cluster's adapter serves a fed_* name.
const fedRules = `rules:
- seriesQuery: 'fed_app_requests{namespace!="",deployment!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
      deployment: {group: apps, resource: deployment}
  name: {matches: '^(.*)$', as: '${1}'}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
externalRules:
- seriesQuery: 'fed_queue_depth{namespace!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
  name: {matches: '^(.*)$', as: '${1}'}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (queue)'
`

// remoteAdapter is prometheus-adapter v0.12 run unregistered on fedPort: no APIService
// points at it; only the cluster's metricscale adapter reaches it, as a client.
type remoteAdapter struct {
	args []string
	log  string
	cmd  *exec.Cmd
	logf *os.File
}

// newRemoteAdapter prepares prometheus-adapter with a serving certificate from the
// cluster's CA (the CA the federated provider trusts) and delegated authentication and
// authorization against the cluster's kube-apiserver: it checks the token metricscale
// presents with a TokenReview and its RBAC with a SubjectAccessReview.
func newRemoteAdapter(t *testing.T) *remoteAdapter {
	t.Helper()
	bin := cluster.PrometheusAdapter(t)
	dir := t.TempDir()
	ca := clusterCA(t)
	serving, err := ca.Issue("prometheus-adapter-federated", certs.Serving, []string{"127.0.0.1", "localhost"}, nil, 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := serving.Write(dir, "serving"); err != nil {
		t.Fatal(err)
	}
	rules := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rules, []byte(fedRules), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &remoteAdapter{log: filepath.Join(cluster.Dir, "logs", "prometheus-adapter-federated.log"), args: []string{
		"--prometheus-url=" + cluster.PrometheusURL, "--config=" + rules,
		"--metrics-relist-interval=5s", "--metrics-max-age=1m",
		fmt.Sprintf("--secure-port=%d", fedPort), "--bind-address=127.0.0.1",
		"--tls-cert-file=" + filepath.Join(dir, "serving.crt"), "--tls-private-key-file=" + filepath.Join(dir, "serving.key"),
		"--lister-kubeconfig=" + cluster.Kubeconfig, "--authentication-kubeconfig=" + cluster.Kubeconfig,
		"--authorization-kubeconfig=" + cluster.Kubeconfig, "-v=2",
	}}
	r.args = append([]string{bin}, r.args...)
	t.Cleanup(r.stop)
	return r
}

// clusterCA loads the cluster's CA (hack/cluster.sh writes its key as "EC PRIVATE KEY").
func clusterCA(t *testing.T) *certs.CA {
	t.Helper()
	certPEM, err := os.ReadFile(filepath.Join(cluster.Dir, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(cluster.Dir, "pki", "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		t.Fatal("pki/ca.crt or pki/ca.key holds no PEM block")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	var key crypto.Signer
	if k, err := x509.ParseECPrivateKey(kb.Bytes); err == nil {
		key = k
	} else if k, err := x509.ParsePKCS8PrivateKey(kb.Bytes); err == nil {
		key, _ = k.(crypto.Signer)
	} else if k, err := x509.ParsePKCS1PrivateKey(kb.Bytes); err == nil {
		key = k
	}
	if key == nil {
		t.Fatalf("pki/ca.key: no EC, PKCS#8 or PKCS#1 private key (%s)", kb.Type)
	}
	return &certs.CA{Cert: cert, Key: key}
}

func (r *remoteAdapter) start(t *testing.T) {
	t.Helper()
	logf, err := os.OpenFile(r.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(r.args[0], r.args[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatal(err)
	}
	r.cmd, r.logf = cmd, logf
	client := parityClient(t)
	Eventually(t, 60*time.Second, 500*time.Millisecond, "prometheus-adapter on :6448 to be ready", func(ctx context.Context) (bool, string, error) {
		code, body, err := parityGet(ctx, client, fmt.Sprintf("https://127.0.0.1:%d/readyz", fedPort))
		if err != nil {
			return false, err.Error(), nil
		}
		return code == http.StatusOK, fmt.Sprintf("%d %s", code, body), nil
	})
}

// stop ends the process and waits for it: its port is closed when stop returns.
func (r *remoteAdapter) stop() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r.logf.Close()
	r.cmd = nil
}

// fedStatus GETs path through kube-apiserver's aggregator (so through metricscale's
// APIService) and returns the code and the Status message of an error.
func fedStatus(ctx context.Context, path string, params map[string]string) (int, string, []byte) {
	body, err := adapterRawGet(ctx, cluster.Client, path, params)
	if err == nil {
		return http.StatusOK, "", body
	}
	var st metav1.Status
	_ = json.Unmarshal(body, &st)
	return adapterStatusCode(err), st.Message, body
}

// TestFederation: metricscale's registered APIServices serve the metrics of a second
// adapter — prometheus-adapter v0.12, unregistered — through an apiservice provider that
// authenticates to it with the metricscale adapter's ServiceAccount token. Values,
// selectors and discovery come through; an HPA scales on them; the second adapter stopped
// is a 503 naming the provider and no scale-down; restarted, values again.
func TestFederation(t *testing.T) {
	cluster.RequirePrometheus(t)
	if !cluster.HPAController {
		t.Fatal("kube-controller-manager runs without its HPA controller (hack/cluster.sh up --no-hpa-controller): the HPA check cannot run")
	}
	ctx := context.Background()
	testStart := time.Now()
	ns := cluster.CreateNamespace(t, "fed")
	extPath := "/apis/external.metrics.k8s.io/v1beta1/namespaces/" + ns + "/" + fedQueue
	jobs := map[string]string{"labelSelector": "queue=jobs"}
	if err := cluster.SetExporterSeries(ctx, fmt.Sprintf(`fed_queue_depth{namespace=%[1]q,queue="jobs"} 50
fed_queue_depth{namespace=%[1]q,queue="other"} 3
fed_app_requests{namespace=%[1]q,deployment="web"} 42.5
`, ns)); err != nil {
		t.Fatal(err)
	}
	remote := newRemoteAdapter(t)

	t.Run("remote not running: 503 naming the provider, the adapter serves the rest", func(t *testing.T) {
		code, msg, body := fedStatus(ctx, extPath, jobs)
		if code != http.StatusServiceUnavailable || !strings.Contains(msg, `"`+fedProvider+`"`) || !strings.Contains(msg, fedQueue) {
			t.Errorf("GET %s: %d %s; want a 503 naming provider %s and the metric", extPath, code, body, fedProvider)
		}
		t.Logf("remote not running: %d %s", code, msg)
		if code, _, body := fedStatus(ctx, "/apis/external.metrics.k8s.io/v1beta1", nil); code != http.StatusOK {
			t.Errorf("external discovery: %d %s", code, body)
		}
	})

	remote.start(t)

	parent := t
	t.Run("the remote authenticates and authorizes metricscale", func(t *testing.T) {
		// Anonymous: refused by the remote itself.
		anon := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: parityClient(t).Transport.(*http.Transport).TLSClientConfig.Clone()}}
		anon.Transport.(*http.Transport).TLSClientConfig.Certificates = nil
		code, body, err := parityGet(ctx, anon, fmt.Sprintf("https://127.0.0.1:%d%s", fedPort, extPath))
		if err != nil || (code != http.StatusUnauthorized && code != http.StatusForbidden) {
			t.Errorf("anonymous GET on the remote: %d %s %v; want 401 or 403", code, parityShort(body), err)
		}
		// metricscale's ServiceAccount without the RBAC of manifests/federation/remote-rbac.yaml:
		// authenticated, then forbidden, which comes back as a 503 naming the provider.
		Eventually(t, 30*time.Second, 500*time.Millisecond, "a 503 saying the remote forbids metricscale-adapter", func(ctx context.Context) (bool, string, error) {
			code, msg, _ := fedStatus(ctx, extPath, jobs)
			return code == http.StatusServiceUnavailable && strings.Contains(msg, "forbidden") &&
				strings.Contains(msg, "system:serviceaccount:metricscale:metricscale-adapter") && strings.Contains(msg, `"`+fedProvider+`"`), fmt.Sprintf("%d %s", code, msg), nil
		})
		if out, err := cluster.Kubectl(ctx, "apply", "-f", filepath.Join(cluster.RepoRoot, "manifests", "federation", "remote-rbac.yaml")); err != nil {
			t.Fatalf("applying the remote's RBAC: %v\n%s", err, out)
		}
		// on the parent: the binding must outlive this subtest
		parent.Cleanup(func() {
			_, _ = cluster.Kubectl(context.Background(), "delete", "--ignore-not-found", "-f", filepath.Join(cluster.RepoRoot, "manifests", "federation", "remote-rbac.yaml"))
		})
	})

	t.Run("values and selectors through metricscale's APIServices", func(t *testing.T) {
		// the remote caches denied SubjectAccessReviews for 10s
		Eventually(t, 45*time.Second, 500*time.Millisecond, "queue=jobs to be 50", func(ctx context.Context) (bool, string, error) {
			got, body, err := promExternal(ctx, ns, fedQueue, "queue=jobs")
			if err != nil {
				return false, string(body), nil
			}
			return fmt.Sprint(got) == "map[jobs:50]", fmt.Sprint(got), nil
		})
		for sel, want := range map[string]string{"": "map[jobs:50 other:3]", "queue!=jobs": "map[other:3]", "queue in (jobs,nope)": "map[jobs:50]"} {
			got, body, err := promExternal(ctx, ns, fedQueue, sel)
			if err != nil || fmt.Sprint(got) != want {
				t.Errorf("selector %q: %v %v %s; want %s", sel, got, err, body, want)
			}
		}
		if code, msg, body := fedStatus(ctx, extPath, map[string]string{"labelSelector": "queue=nope"}); code != http.StatusNotFound || !strings.Contains(msg, fedQueue) {
			t.Errorf("queue=nope: %d %s; want a 404 naming %s", code, body, fedQueue)
		}
		for _, gv := range []string{"v1beta2", "v1beta1"} {
			path := "/apis/custom.metrics.k8s.io/" + gv + "/namespaces/" + ns + "/deployments.apps/web/" + fedRequests
			code, _, body := fedStatus(ctx, path, nil)
			var l adapterMetricList
			if code == http.StatusOK {
				_ = json.Unmarshal(body, &l)
			}
			if code != http.StatusOK || len(l.Items) != 1 || l.Items[0].Value.MilliValue() != 42500 || l.Items[0].DescribedObject.Name != "web" {
				t.Errorf("GET %s: %d %s; want web = 42.5", path, code, parityShort(body))
			}
		}
		path := "/apis/custom.metrics.k8s.io/v1beta2/namespaces/" + ns + "/deployments.apps/nope/" + fedRequests
		if code, msg, body := fedStatus(ctx, path, nil); code != http.StatusNotFound || !strings.Contains(msg, fedRequests) {
			t.Errorf("GET %s: %d %s; want the remote's 404 naming %s", path, code, body, fedRequests)
		}
	})

	t.Run("discovery merges the remote's", func(t *testing.T) {
		// next to a metric of another provider: one pushed to the memory provider
		pushed := "e2e_fed_pushed_" + strings.ReplaceAll(ns, "-", "_")
		adapterPush(ctx, t, fmt.Sprintf("%s{namespace=%q} 3\n", pushed, ns))
		waitDiscovery(t, "/apis/external.metrics.k8s.io/v1beta1", []string{fedQueue, pushed}, 500*time.Millisecond)
		waitDiscovery(t, "/apis/custom.metrics.k8s.io/v1beta2", []string{"deployments.apps/" + fedRequests, "namespaces/" + fedRequests, "namespaces/" + pushed}, 500*time.Millisecond)
	})

	period := cluster.HPASyncPeriod
	cluster.CreateDeployment(t, KwokDeployment(ns, "fed-worker", 1, "100m", "10m"))
	cluster.WaitDeploymentReady(t, ns, "fed-worker", 1, 60*time.Second)
	avg := resource.MustParse("10")
	cluster.CreateHPA(t, &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fed-worker"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "fed-worker"},
			MinReplicas:    ptr.To[int32](1), MaxReplicas: 8,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: fedQueue, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"queue": "jobs"}}},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &avg},
			}}},
			Behavior: noScaleDownWindow(),
		},
	})
	created := time.Now()
	if !t.Run("the HPA scales on the federated metric", func(t *testing.T) {
		cluster.WaitForReplicas(t, ns, "fed-worker", "fed-worker", 5, 45*time.Second+4*period)
		t.Logf("kube-controller-manager's HPA: 1 → 5 replicas (50 jobs, 10 per pod) %s after it was created", time.Since(created).Round(100*time.Millisecond))
	}) {
		t.FailNow()
	}

	if !t.Run("remote stopped: 503 naming the provider, no scale-down", func(t *testing.T) {
		remote.stop()
		stopped := time.Now()
		// Were any value still served, 0 jobs would scale the HPA to 1 at its next sync.
		if err := cluster.SetExporterSeries(ctx, fmt.Sprintf("fed_queue_depth{namespace=%q,queue=\"jobs\"} 0\n", ns)); err != nil {
			t.Fatal(err)
		}
		var msg string
		Eventually(t, 10*time.Second, 100*time.Millisecond, "a 503 naming provider "+fedProvider, func(ctx context.Context) (bool, string, error) {
			var code int
			code, msg, _ = fedStatus(ctx, extPath, jobs)
			return code == http.StatusServiceUnavailable && strings.Contains(msg, `"`+fedProvider+`"`), fmt.Sprintf("%d %s", code, msg), nil
		})
		t.Logf("remote stopped: 503 %s", msg)
		if token, err := os.ReadFile(filepath.Join(cluster.Dir, "adapter", "token")); err == nil && len(token) > 20 && strings.Contains(msg, strings.TrimSpace(string(token))) {
			t.Error("the 503 carries the adapter's token")
		}
		hold := max(3*period, 15*time.Second)
		var cond string
		for deadline := time.Now().Add(hold); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
			if r, err := replicasOf(ctx, ns, "fed-worker"); err == nil && r != 5 {
				t.Fatalf("fed-worker scaled to %d while the remote was down (%s after the stop)", r, time.Since(stopped).Round(100*time.Millisecond))
			}
			if h, err := cluster.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "fed-worker", metav1.GetOptions{}); err == nil {
				cond = conditionsOf(h.Status.Conditions)
			}
		}
		t.Logf("after %s without the remote: 5 replicas; HPA %s", hold, cond)
		if !strings.Contains(cond, "ScalingActive=False/FailedGetExternalMetric") {
			t.Errorf("HPA conditions %q; want ScalingActive=False/FailedGetExternalMetric", cond)
		}
		// discovery still answers, from the last refresh
		raw, err := adapterRawGet(ctx, cluster.Client, "/apis/external.metrics.k8s.io/v1beta1", nil)
		if err != nil || !strings.Contains(string(raw), `"`+fedQueue+`"`) {
			t.Errorf("external discovery without the remote: %v %.300s; want it to still list %s", err, raw, fedQueue)
		}
	}) {
		t.FailNow()
	}

	t.Run("remote restarted: values again, the HPA follows", func(t *testing.T) {
		restart := time.Now()
		remote.start(t)
		Eventually(t, 30*time.Second, 200*time.Millisecond, "queue=jobs to answer 0", func(ctx context.Context) (bool, string, error) {
			got, body, err := promExternal(ctx, ns, fedQueue, "queue=jobs")
			if err != nil {
				return false, string(body), nil
			}
			return fmt.Sprint(got) == "map[jobs:0]", fmt.Sprint(got), nil
		})
		t.Logf("values again %s after the restart", time.Since(restart).Round(100*time.Millisecond))
		cluster.WaitForReplicas(t, ns, "fed-worker", "fed-worker", 1, 30*time.Second+3*period)
		t.Logf("the HPA scaled down to 1 by %s after the restart", time.Since(restart).Round(100*time.Millisecond))
	})
	t.Logf("TestFederation took %s", time.Since(testStart).Round(time.Second))
}
