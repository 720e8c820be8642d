//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// certManagerModule holds the cert-manager CRDs the certManager render
// needs; the Go module proxy serves them (deploy/crds).
const certManagerModule = "github.com/cert-manager/cert-manager@v1.21.2"

// TestHelmChart renders manifests/chart with hack/helm (the Helm library, no
// helm binary) for each value set and has kube-apiserver check the result
// with `kubectl apply --dry-run=server` (schema, field validation, admission),
// in a fresh namespace as the release namespace. Every render's adapter config
// passes `adapter check-config`. A render with an invalid field must be
// refused, so the check can fail; and the selfSigned certificate is kept when
// lookup finds the Secret an install made.
func TestHelmChart(t *testing.T) {
	ctx := context.Background()
	ns := cluster.CreateNamespace(t, "chart")
	tool := buildChartTool(t)
	adapterBin := adapterBinary(t)
	installCertManagerCRDs(t)

	render := func(t *testing.T, extra ...string) string {
		t.Helper()
		args := append([]string{"template", "--namespace", ns, "--name", "metricscale"}, extra...)
		return helmTemplate(ctx, t, tool, args...)
	}
	caBundle := renderedSecret(t, render(t, "--set", "certs.mode=selfSigned"), "ca.crt")

	sets := []struct {
		name string
		set  []string
	}{
		{"defaults", nil},
		{"adapter only", []string{"autoscaler.enabled=false"}},
		{"autoscaler only", []string{"adapter.enabled=false"}},
		{"selfSigned", []string{"certs.mode=selfSigned"}},
		{"certManager", []string{"certs.mode=certManager"}},
		{"certManager with a ClusterIssuer", []string{"certs.mode=certManager", "certs.certManager.issuerRef.name=corp-ca", "certs.certManager.issuerRef.kind=ClusterIssuer"}},
		{"provided", []string{"certs.mode=provided", "certs.provided.secretName=my-cert", "certs.provided.caBundle=" + base64.StdEncoding.EncodeToString(caBundle)}},
		{"metrics API", []string{"adapter.metricsAPI.enabled=true"}},
		{"external metrics left to another adapter", []string{"adapter.apiServices.externalMetrics.v1beta1=false"}},
		{"custom metrics left to another adapter", []string{"adapter.apiServices.customMetrics.v1beta1=false", "adapter.apiServices.customMetrics.v1beta2=false"}},
		{"push off", []string{"adapter.push.enabled=false"}},
		{"push token made by the user", []string{"adapter.push.tokenSecret.create=false"}},
		{"selector resources", []string{"adapter.config.selectorResources={deployments.apps,namespaces}"}},
		{"prometheus-adapter layout", []string{"prometheus.url=http://prometheus.monitoring.svc", "adapter.push.enabled=false"}},
		{"chart conventions", []string{"commonLabels.team=platform", "networkPolicy.enabled=true", "autoscaler.podDisruptionBudget.enabled=true",
			"adapter.priorityClassResourceQuota.enabled=true", "adapter.revisionHistoryLimit=0", "adapter.hostNetwork=true", "adapter.dnsPolicy=ClusterFirstWithHostNet",
			"adapter.serviceAccount.create=false", "adapter.serviceAccount.name=default", "nameOverride=ms"}},
	}
	for _, s := range sets {
		t.Run(s.name, func(t *testing.T) {
			var extra []string
			for _, kv := range s.set {
				extra = append(extra, "--set", kv)
			}
			f := render(t, extra...)
			n := countObjects(t, f)
			out, err := cluster.Kubectl(ctx, "apply", "--dry-run=server", "--validate=strict", "-f", f)
			if err != nil {
				t.Fatalf("the server refuses the render: %v", err)
			}
			if got := strings.Count(out, "(server dry run)"); got != n {
				t.Errorf("the server checked %d objects of %d:\n%s", got, n, out)
			}
			if cfg := renderedConfig(t, f); cfg != "" {
				check := exec.CommandContext(ctx, adapterBin, "check-config", "-f", cfg)
				if msg, err := check.CombinedOutput(); err != nil {
					t.Errorf("adapter check-config refuses the rendered config: %v: %s", err, msg)
				}
			}
			t.Logf("%d objects accepted by the server (dry run)", n)
		})
	}

	// The check can fail: kube-apiserver refuses invalid renders.
	broken := []struct {
		name string
		set  string
		want string
	}{
		{"invalid priority class name", "adapter.priorityClassName=Not_A_DNS_Name", "priorityClassName"},
		{"unknown field", "autoscaler.securityContext.notAField=true", "notAField"},
	}
	for _, b := range broken {
		t.Run("refused: "+b.name, func(t *testing.T) {
			f := render(t, "--set", b.set)
			_, err := cluster.Kubectl(ctx, "apply", "--dry-run=server", "--validate=strict", "-f", f)
			if err == nil || !strings.Contains(err.Error(), b.want) {
				t.Fatalf("kubectl apply --dry-run=server: %v, want an error naming %s", err, b.want)
			}
			t.Logf("refused as expected: %s", lastLine(err.Error()))
		})
	}

	t.Run("selfSigned certificate kept on upgrade", func(t *testing.T) {
		install := render(t, "--set", "certs.mode=selfSigned", "--set", "autoscaler.enabled=false")
		secret := extractKind(t, install, "Secret")
		if _, err := cluster.Kubectl(ctx, "apply", "-f", secret); err != nil {
			t.Fatal(err)
		}
		upgrade := render(t, "--set", "certs.mode=selfSigned", "--set", "autoscaler.enabled=false", "--kubeconfig", cluster.Kubeconfig)
		for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
			if !bytes.Equal(renderedSecret(t, install, k), renderedSecret(t, upgrade, k)) {
				t.Errorf("%s: the render with lookup generated a new one instead of keeping the live Secret's", k)
			}
		}
		if fresh := render(t, "--set", "certs.mode=selfSigned", "--set", "autoscaler.enabled=false"); bytes.Equal(renderedSecret(t, install, "ca.crt"), renderedSecret(t, fresh, "ca.crt")) {
			t.Error("two renders without lookup made the same CA: the test proves nothing")
		}
	})
}

// buildChartTool builds hack/helm, a nested module, once for the test.
func buildChartTool(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "chart-helm")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join(cluster.RepoRoot, "hack", "helm")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build hack/helm: %v\n%s", err, out)
	}
	return bin
}

// adapterBinary is the adapter hack/cluster.sh built from this checkout, or a
// fresh build of it.
func adapterBinary(t *testing.T) string {
	t.Helper()
	if bin := filepath.Join(cluster.Dir, "bin", "metricscale-adapter"); fileExists(bin) {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "adapter")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/adapter")
	cmd.Dir = cluster.RepoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the adapter: %v\n%s", err, out)
	}
	return bin
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// installCertManagerCRDs installs cert-manager's Issuer, ClusterIssuer and
// Certificate CRDs (from its Go module) when the cluster lacks them, and
// removes them after the test.
func installCertManagerCRDs(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if _, err := cluster.Kubectl(ctx, "get", "crd", "certificates.cert-manager.io"); err == nil {
		return
	}
	cmd := exec.Command("go", "mod", "download", "-json", certManagerModule)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v", certManagerModule, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download %s: %v: %s", certManagerModule, err, out)
	}
	var files []string
	for _, n := range []string{"issuers", "clusterissuers", "certificates"} {
		files = append(files, "-f", filepath.Join(mod.Dir, "deploy", "crds", "cert-manager.io_"+n+".yaml"))
	}
	if _, err := cluster.Kubectl(ctx, append([]string{"apply", "--server-side"}, files...)...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := cluster.Kubectl(context.Background(), append([]string{"delete", "--ignore-not-found"}, files...)...); err != nil {
			t.Logf("remove the cert-manager CRDs: %v", err)
		}
	})
	if _, err := cluster.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s",
		"crd/issuers.cert-manager.io", "crd/clusterissuers.cert-manager.io", "crd/certificates.cert-manager.io"); err != nil {
		t.Fatal(err)
	}
}

func documents(t *testing.T, f string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	var docs [][]byte
	for _, d := range bytes.Split(data, []byte("\n---")) {
		var o map[string]any
		if err := yaml.Unmarshal(d, &o); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if o != nil {
			docs = append(docs, d)
		}
	}
	return docs
}

func countObjects(t *testing.T, f string) int { return len(documents(t, f)) }

// extractKind writes the render's objects of one kind to a file.
func extractKind(t *testing.T, f, kind string) string {
	t.Helper()
	var out [][]byte
	for _, d := range documents(t, f) {
		var o struct{ Kind string }
		_ = yaml.Unmarshal(d, &o)
		if o.Kind == kind {
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no %s", f, kind)
	}
	p := filepath.Join(t.TempDir(), kind+".yaml")
	if err := os.WriteFile(p, bytes.Join(out, []byte("\n---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// renderedSecret returns one key of the render's serving-certificate Secret.
func renderedSecret(t *testing.T, f, key string) []byte {
	t.Helper()
	for _, d := range documents(t, f) {
		var s corev1.Secret
		if yaml.Unmarshal(d, &s) == nil && s.Kind == "Secret" && strings.HasSuffix(s.Name, "-serving-cert") {
			if len(s.Data[key]) == 0 {
				t.Fatalf("Secret %s has no %s", s.Name, key)
			}
			return s.Data[key]
		}
	}
	t.Fatalf("%s has no serving-certificate Secret", f)
	return nil
}

// renderedConfig writes the adapter config of the render to a file; "" when
// the render has no adapter.
func renderedConfig(t *testing.T, f string) string {
	t.Helper()
	for _, d := range documents(t, f) {
		var cm corev1.ConfigMap
		if yaml.Unmarshal(d, &cm) == nil && cm.Kind == "ConfigMap" && cm.Data["config.yaml"] != "" {
			p := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(p, []byte(cm.Data["config.yaml"]), 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}
	}
	return ""
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// helmTemplate runs hack/helm's template with args on manifests/chart and returns the
// file of its render.
func helmTemplate(ctx context.Context, t *testing.T, tool string, args ...string) string {
	t.Helper()
	args = append(args, filepath.Join(cluster.RepoRoot, "manifests", "chart"))
	cmd := exec.CommandContext(ctx, tool, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("hack/helm %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	f := filepath.Join(t.TempDir(), "render.yaml")
	if err := os.WriteFile(f, stdout.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}
