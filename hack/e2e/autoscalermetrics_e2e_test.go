//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// autoscalerAddr is the local cluster's autoscaler: /metrics over HTTPS,
// authorized by kube-apiserver.
const autoscalerAddr = "127.0.0.1:6446"

// autoscalerGet GETs https://addr+path with the cluster's admin credentials
// (system:masters, allowed everything), skipping the verification of the
// autoscaler's self-signed certificate.
func autoscalerGet(ctx context.Context, addr, path string) (string, error) {
	cfg := rest.CopyConfig(cluster.Config)
	cfg.TLSClientConfig.Insecure, cfg.TLSClientConfig.CAData, cfg.TLSClientConfig.CAFile = true, nil, ""
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		return "", err
	}
	return getWith(ctx, &http.Client{Transport: transport, Timeout: 30 * time.Second}, "https://"+addr+path, "")
}

// getWith GETs url with client, sending token as a bearer token when set;
// a status other than 200 is an error that carries it.
func getWith(ctx context.Context, client *http.Client, url, token string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(body), &statusError{url: url, code: resp.StatusCode}
	}
	return string(body), nil
}

type statusError struct {
	url  string
	code int
}

func (e *statusError) Error() string { return fmt.Sprintf("GET %s: %d", e.url, e.code) }

func statusOf(err error) int {
	if se, ok := err.(*statusError); ok {
		return se.code
	}
	return 0
}

// readerClusterRole is the ClusterRole of manifests/monitoring/scraper-rbac.yaml.
func readerClusterRole(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(cluster.RepoRoot, "manifests", "monitoring", "scraper-rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(data), "\n---") {
		var role rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(doc), &role); err != nil {
			t.Fatal(err)
		}
		if role.Kind == "ClusterRole" {
			return &role
		}
	}
	t.Fatal("manifests/monitoring/scraper-rbac.yaml has no ClusterRole")
	return nil
}

// TestAutoscalerMetricsAuth: the autoscaler's /metrics, served with
// delegated authentication and authorization against the real
// kube-apiserver, refuses anonymous callers (403) and a ServiceAccount
// without RBAC (403), serves one bound to the scraper ClusterRole of
// manifests/monitoring (200, with the per-MetricAutoscaler series), and
// answers the probes' paths to anyone.
func TestAutoscalerMetricsAuth(t *testing.T) {
	needAutoscaler(t)
	ctx := context.Background()
	ns := cluster.CreateNamespace(t, "metricsauth")

	// A MetricAutoscaler, so that its series are there to read.
	queue := "metricsauth-" + ns
	pushDepth(t, queue, 10)
	cluster.CreateDeployment(t, KwokDeployment(ns, "workers", 1, "100m", "10m"))
	createMA(t, newMA(ns, "workers", 1, 10, time.Second, queueSpec(queue, "10")))
	waitReplicas(t, ns, "workers", 1, 30*time.Second)

	role := readerClusterRole(t)
	role.Name = "e2e-" + ns + "-" + role.Name // the manifest's own may be installed; this one is the test's
	if _, err := cluster.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cluster.Client.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "scraper", Namespace: ns}},
	}
	if _, err := cluster.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cluster.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	scraper := serviceAccountToken(t, ns, "scraper")
	stranger := serviceAccountToken(t, ns, "stranger")

	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the autoscaler's self-signed certificate
	url := "https://" + autoscalerAddr
	if _, err := getWith(ctx, hc, url+"/metrics", ""); statusOf(err) != http.StatusForbidden {
		t.Errorf("anonymous GET /metrics: %v, want 403", err)
	}
	if _, err := getWith(ctx, hc, url+"/metrics", stranger); statusOf(err) != http.StatusForbidden {
		t.Errorf("GET /metrics as a ServiceAccount without RBAC: %v, want 403", err)
	}
	if _, err := getWith(ctx, hc, url+"/metrics", "not-a-token"); statusOf(err) != http.StatusUnauthorized {
		t.Errorf("GET /metrics with an invalid token: %v, want 401", err)
	}
	for _, p := range []string{"/healthz", "/readyz", "/livez"} {
		if _, err := getWith(ctx, hc, url+p, ""); err != nil {
			t.Errorf("anonymous GET %s: %v, want 200", p, err)
		}
	}
	if _, err := getWith(ctx, http.DefaultClient, "http://"+autoscalerAddr+"/metrics", ""); err == nil || statusOf(err) == http.StatusOK {
		t.Errorf("plain HTTP GET /metrics: %v, want no answer", err)
	}
	// The RBAC binding reaches the SubjectAccessReview cache in time.
	want := fmt.Sprintf(`metricscale_metricautoscaler_desired_replicas{name="workers",namespace=%q} 1`, ns)
	Eventually(t, 30*time.Second, 200*time.Millisecond, "the scraper's read of /metrics", func(ctx context.Context) (bool, string, error) {
		body, err := getWith(ctx, hc, url+"/metrics", scraper)
		if err != nil {
			return false, err.Error(), nil
		}
		return strings.Contains(body, want), "no " + want, nil
	})
}

// serviceAccountToken creates a ServiceAccount of ns and returns a token of it.
func serviceAccountToken(t *testing.T, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := cluster.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cluster.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrTo(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}
