//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/metricscale/metricscale/autoscaler/record"
	"github.com/metricscale/metricscale/autoscaler/recordserver"
	"github.com/metricscale/metricscale/autoscaler/scenario"
)

// The local autoscaler records (hack/cluster.sh: --record on 127.0.0.1:6449,
// its certificate in the state folder).
const recordServer = "https://127.0.0.1:6449"

func recordCA() string { return filepath.Join(cluster.Dir, "autoscaler", "record.crt") }

// runAutoscaler runs the autoscaler binary hack/cluster.sh built from this
// checkout with args, and returns its stdout, stderr and exit code.
func runAutoscaler(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(cluster.Dir, "bin", "metricscale-autoscaler"), args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("running autoscaler %s: %v", strings.Join(args, " "), err)
		}
		code = ee.ExitCode()
	}
	return out.String(), errOut.String(), code
}

// serviceAccountKubeconfig writes a kubeconfig acting as a new
// ServiceAccount of ns, with a token from the TokenRequest API.
func serviceAccountKubeconfig(t *testing.T, ns, name string) string {
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
	ca := cluster.Config.TLSClientConfig.CAData
	if len(ca) == 0 && cluster.Config.TLSClientConfig.CAFile != "" {
		if ca, err = os.ReadFile(cluster.Config.TLSClientConfig.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: cluster.Config.Host, CertificateAuthorityData: ca}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "local", AuthInfo: name, Namespace: ns}
	cfg.CurrentContext = name
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func ptrTo[T any](v T) *T { return &v }

// TestRecordReplay runs a MetricAutoscaler on a pushed queue through a
// scale-up and a scale-down with the recorder on, fetches the recording
// with `autoscaler record` (as cluster-admin, and as ServiceAccounts with
// and without the metricscale-record ClusterRole), and replays it with
// `autoscaler simulate`: every recorded decision is made again, and the
// rescales are those the controller's events report.
func TestRecordReplay(t *testing.T) {
	needAutoscaler(t)
	ns := cluster.CreateNamespace(t, "record")
	queue := "record-" + ns
	pushDepth(t, queue, 10)
	cluster.CreateDeployment(t, KwokDeployment(ns, "workers", 1, "100m", "10m"))
	ma := newMA(ns, "workers", 1, 10, time.Second, queueSpec(queue, "10"))
	// Scale-downs held 4s, then 2 pods per 2s: the scale-down takes steps,
	// and the history decides at most reconciles.
	ma.Spec.Behavior = scaleDownBehavior(4, 2, 2)
	createMA(t, ma)
	start := time.Now()
	waitReplicas(t, ns, "workers", 1, 30*time.Second)
	// A few reconciles at 1 first: the scale-up comes from a steady state.
	Eventually(t, 30*time.Second, 200*time.Millisecond, "three reconciles at 1 replica", func(ctx context.Context) (bool, string, error) {
		m, err := getMA(ctx, ns, "workers")
		if err != nil {
			return false, "", err
		}
		return m.Status.CurrentReplicas == 1 && m.Status.Targets == "10/10 (avg)" && time.Since(start) > 3*time.Second, m.Status.Targets, nil
	})
	pushDepth(t, queue, 50) // 5 per 10: 1 → 5 (the default scale-up policy allows +4)
	waitReplicas(t, ns, "workers", 5, 30*time.Second)
	time.Sleep(2 * time.Second)
	pushDepth(t, queue, 10) // 1: held 4s, then 5 → 3 → 1
	waitReplicas(t, ns, "workers", 1, 30*time.Second)
	time.Sleep(2 * time.Second)
	t.Logf("steady at 1, scaled to 5 and back to 1 in %s", time.Since(start).Round(100*time.Millisecond))

	dir := t.TempDir()
	file, decisions := filepath.Join(dir, "workers.yaml"), filepath.Join(dir, "workers.jsonl")
	fetched := time.Now()
	_, stderr, code := runAutoscaler(t, "record", "-n", ns, "workers", "--kubeconfig", cluster.Kubeconfig,
		"--server", recordServer, "--certificate-authority", recordCA(), "-o", file, "--decisions", decisions)
	t.Logf("autoscaler record (cluster-admin) in %s: %s", time.Since(fetched).Round(time.Millisecond), strings.TrimSpace(stderr))
	if code != 0 {
		t.Fatalf("autoscaler record exited %d: %s", code, stderr)
	}
	recorded := readDecisions(t, decisions)

	// The recording went through what the test did: one scale-up to 5, and
	// scale-downs back to 1.
	var sizes []int32
	for _, d := range recorded {
		if d.Rescaled {
			sizes = append(sizes, d.Replicas)
		}
	}
	if len(sizes) < 2 || sizes[0] != 5 || sizes[len(sizes)-1] != 1 || len(recorded) < 10 || recorded[0].Replicas != 1 || recorded[0].Rescaled {
		t.Fatalf("%d reconciles recorded, the first at %d replicas (rescaled %v), rescales to %v; want at least 10, from a steady 1, to 5 and down to 1",
			len(recorded), recorded[0].Replicas, recorded[0].Rescaled, sizes)
	}
	// They are the rescales the controller reported in its events.
	if events := rescaleEvents(t, ns); !slices.Equal(events, sizes) {
		t.Errorf("recorded rescales to %v, the SuccessfulRescale events say %v", sizes, events)
	}

	// `autoscaler simulate` on the file makes every recorded decision.
	replaySameDecisions(t, file, recorded)
	t.Logf("%d recorded reconciles replayed to the same replicas and desired count (%d rescales)", len(recorded), len(sizes))

	explained, stderr, code := runAutoscaler(t, "simulate", "-f", file, "-o", "table", "--explain")
	if code != 0 || !strings.Contains(explained, "[scale-down policy]") || !strings.Contains(explained, "[stabilization window]") {
		t.Errorf("simulate --explain (exit %d, %s) names no scale-down policy or stabilization window:\n%s", code, stderr, explained)
	}
	t.Logf("autoscaler simulate -o table --explain:\n%s", explained)

	// The last few seconds only: the replay starts from the history those
	// reconciles read, rebuilt by the recorder, and still agrees.
	_, stderr, code = runAutoscaler(t, "record", "-n", ns, "workers", "--kubeconfig", cluster.Kubeconfig, "--last", "6s",
		"--server", recordServer, "--certificate-authority", recordCA(), "-o", filepath.Join(dir, "last.yaml"))
	if code != 0 {
		t.Errorf("autoscaler record --last 6s exited %d: %s", code, stderr)
	}
	if m := regexp.MustCompile(`(\d+) reconciles`).FindStringSubmatch(stderr); m == nil || mustAtoi(m[1]) >= len(recorded) || mustAtoi(m[1]) < 3 {
		t.Errorf("--last 6s: %q, want fewer reconciles than the %d of the whole recording", strings.TrimSpace(stderr), len(recorded))
	}
	t.Logf("autoscaler record --last 6s: %s", strings.TrimSpace(stderr))

	// A ServiceAccount with the metricscale-record ClusterRole in this
	// namespace may record; one without it may not (403); an object
	// without a recording is a 404 naming it; no credentials, a 401.
	allowed := serviceAccountKubeconfig(t, ns, "recorder")
	if _, err := cluster.Client.RbacV1().RoleBindings(ns).Create(context.Background(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "recorder"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "metricscale-record"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "recorder", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	denied := serviceAccountKubeconfig(t, ns, "outsider")
	Eventually(t, 30*time.Second, time.Second, "the recorder ServiceAccount's recording", func(context.Context) (bool, string, error) {
		_, stderr, code := runAutoscaler(t, "record", "workers", "--kubeconfig", allowed, "--server", recordServer, "--certificate-authority", recordCA(), "-o", filepath.Join(dir, "sa.yaml"))
		return code == 0, stderr, nil
	})
	_, stderr, code = runAutoscaler(t, "record", "workers", "--kubeconfig", denied, "--server", recordServer, "--certificate-authority", recordCA())
	if code != 1 || !strings.Contains(stderr, "HTTP 403") || !strings.Contains(stderr, `cannot get resource "metricautoscalers/record"`) {
		t.Errorf("without RBAC: exit %d, %q; want 1 and a 403 naming metricautoscalers/record", code, stderr)
	}
	t.Logf("without RBAC: %s", strings.TrimSpace(stderr))
	_, stderr, code = runAutoscaler(t, "record", "nightly", "--kubeconfig", allowed, "--server", recordServer, "--certificate-authority", recordCA())
	if code != 1 || !strings.Contains(stderr, "HTTP 404") || !strings.Contains(stderr, `"nightly" not found`) {
		t.Errorf("unknown object: exit %d, %q; want 1 and a 404 naming nightly", code, stderr)
	}
	if status, body := anonymousGet(t, recordserver.Path(ns, "workers")); status != http.StatusUnauthorized {
		t.Errorf("without credentials: HTTP %d %s, want 401", status, body)
	}
}

func mustAtoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func readDecisions(t *testing.T, path string) []record.Decision {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []record.Decision
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var d record.Decision
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

var newSize = regexp.MustCompile(`^New size: (\d+);`)

// rescaleEvents lists the sizes of the SuccessfulRescale events of the
// namespace's MetricAutoscaler, in order.
func rescaleEvents(t *testing.T, ns string) []int32 {
	t.Helper()
	events, err := cluster.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=SuccessfulRescale"})
	if err != nil {
		t.Fatal(err)
	}
	items := events.Items
	sort.Slice(items, func(i, j int) bool { return items[i].FirstTimestamp.Before(&items[j].FirstTimestamp) })
	var out []int32
	for _, e := range items {
		m := newSize.FindStringSubmatch(e.Message)
		if e.InvolvedObject.Kind != "MetricAutoscaler" || m == nil {
			continue
		}
		for range e.Count {
			out = append(out, int32(mustAtoi(m[1])))
		}
	}
	return out
}

// anonymousGet asks the record endpoint without credentials.
func anonymousGet(t *testing.T, path string) (int, string) {
	t.Helper()
	pem, err := os.ReadFile(recordCA())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get(recordServer + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, fmt.Sprint(strings.TrimSpace(b.String()))
}

// replaySameDecisions runs `autoscaler simulate` on a recording and checks that every
// recorded reconcile replays to the same replicas, rescale and desired count.
func replaySameDecisions(t *testing.T, file string, recorded []record.Decision) {
	t.Helper()
	out, stderr, code := runAutoscaler(t, "simulate", "-f", file)
	if code != 0 {
		t.Fatalf("autoscaler simulate exited %d: %s", code, stderr)
	}
	replayed, err := scenario.ReadResults([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(replayed) != len(recorded) {
		t.Fatalf("the replay has %d steps, the recording %d", len(replayed), len(recorded))
	}
	for i, r := range recorded {
		got := replayed[i]
		if got.Replicas != r.Replicas || got.Rescaled != r.Rescaled || got.Status.DesiredReplicas != r.DesiredReplicas {
			t.Errorf("step %d (%s): replayed %d replicas (rescaled %v, desired %d), recorded %d (rescaled %v, desired %d)",
				i, r.At, got.Replicas, got.Rescaled, got.Status.DesiredReplicas, r.Replicas, r.Rescaled, r.DesiredReplicas)
		}
	}
}
