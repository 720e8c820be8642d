//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	localcluster "github.com/metricscale/metricscale/hack/cluster"
)

// LoadImages imports image archives into the real node's containerd (hack/cluster.sh
// load-images), for pods with imagePullPolicy Never.
func (c *Cluster) LoadImages(ctx context.Context, tarPaths ...string) error {
	var out bytes.Buffer
	lc, err := c.local(&out)
	if err == nil {
		err = lc.LoadImages(ctx, tarPaths...)
	}
	if err != nil {
		return fmt.Errorf("hack/cluster.sh load-images: %w\n%s", err, out.String())
	}
	return nil
}

// RealNodePod returns a pod that runs on the real node, with an image loaded there.
func RealNodePod(ns, name, image string, args ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{corev1.LabelHostname: localcluster.RealNodeName},
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "main", Image: image, Args: args, ImagePullPolicy: corev1.PullNever,
			}},
		},
	}
}

// probeSource is the program of TestRealNode's probe image: from inside a pod it calls the
// API server as the pod's ServiceAccount, through the kubernetes Service (in-cluster
// config: KUBERNETES_SERVICE_HOST, the mounted token and CA), and resolves the names it is
// given through the pod's resolv.conf (kube-dns). Standard library only.
const probeSource = `package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"
)

const sa = "/var/run/secrets/kubernetes.io/serviceaccount/"

func main() {
	failed := false
	user, err := whoAmI()
	if err != nil {
		failed = true
		fmt.Printf("api-error %v\n", err)
	} else {
		fmt.Printf("api-user %s\n", user)
	}
	for _, name := range os.Args[1:] {
		addrs, err := lookup(name)
		if err != nil {
			failed = true
			fmt.Printf("dns-error %s %v\n", name, err)
			continue
		}
		fmt.Printf("dns %s %s\n", name, strings.Join(addrs, ","))
	}
	if failed {
		os.Exit(1)
	}
}

// whoAmI posts a SelfSubjectReview, which every authenticated user may.
func whoAmI() (string, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return "", fmt.Errorf("KUBERNETES_SERVICE_HOST or _PORT is not set")
	}
	token, err := os.ReadFile(sa + "token")
	if err != nil {
		return "", err
	}
	ca, err := os.ReadFile(sa + "ca.crt")
	if err != nil {
		return "", err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return "", fmt.Errorf("no certificate in %sca.crt", sa)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	body := strings.NewReader(` + "`" + `{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}` + "`" + `)
	req, err := http.NewRequest(http.MethodPost, "https://"+net.JoinHostPort(host, port)+"/apis/authentication.k8s.io/v1/selfsubjectreviews", body)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("HTTP %d: %s", resp.StatusCode, data)
	}
	var review struct {
		Status struct {
			UserInfo struct {
				Username string ` + "`json:\"username\"`" + `
			} ` + "`json:\"userInfo\"`" + `
		} ` + "`json:\"status\"`" + `
	}
	if err := json.Unmarshal(data, &review); err != nil {
		return "", err
	}
	return review.Status.UserInfo.Username, nil
}

// lookup resolves name, again for up to 30 s while it fails: a Service's endpoints reach
// CoreDNS a moment after they change.
func lookup(name string) ([]string, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		addrs, err := net.LookupHost(name)
		if err == nil {
			sort.Strings(addrs)
			return addrs, nil
		}
		if time.Now().After(deadline) {
			return nil, err
		}
		time.Sleep(500 * time.Millisecond)
	}
}
`

// buildProbeImage builds probeSource (static) into a one-layer image, loads it into the
// real node and returns its name.
func buildProbeImage(t *testing.T, ctx context.Context) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(probeSource), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module probe\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", filepath.Join(dir, "probe"), ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the probe: %v\n%s", err, out)
	}
	bin, err := os.ReadFile(filepath.Join(dir, "probe"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(bin)
	image := "metricscale.local/e2e-probe:" + hex.EncodeToString(sum[:6])
	var archive bytes.Buffer
	if err := localcluster.WriteImageArchive(&archive, image, []string{"/probe"},
		[]localcluster.ImageFile{{Path: "probe", Mode: 0o755, Data: bin}}); err != nil {
		t.Fatal(err)
	}
	tarPath := filepath.Join(dir, "probe.tar")
	if err := os.WriteFile(tarPath, archive.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cluster.LoadImages(ctx, tarPath); err != nil {
		t.Fatal(err)
	}
	return image
}

// TestRealNode checks the real node of `hack/cluster.sh up --real-node` as pods use it:
// Ready beside the tainted kwok nodes, images loaded without a registry, a pod IP on the
// CNI bridge, exec and logs through the API server, the API server reached from a pod with
// its ServiceAccount through the kubernetes Service (kube-proxy), and Service names, a
// headless Service's and its pod's names resolved by CoreDNS through kube-dns.
func TestRealNode(t *testing.T) {
	c := cluster
	if c.RealNode == "" {
		t.Fatalf("the running cluster has no real node: stop it (hack/cluster.sh down) and run the suite again, " +
			"which starts it with --real-node (or start it with hack/cluster.sh up --real-node)")
	}
	ctx := context.Background()

	node, err := c.Client.CoreV1().Nodes().Get(ctx, c.RealNode, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("node %s: %v", c.RealNode, err)
	}
	lc, err := c.local(os.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	if !nodeReady(node) {
		t.Errorf("node %s is not Ready: %+v", node.Name, node.Status.Conditions)
	}
	if got := node.Status.NodeInfo.ContainerRuntimeVersion; got != "containerd://2.4.2" {
		t.Errorf("container runtime %q, want containerd://2.4.2", got)
	}
	if got := node.Status.NodeInfo.KubeletVersion; got != lc.KubeVersion {
		t.Errorf("kubelet %q, want the control plane's %s", got, lc.KubeVersion)
	}
	if len(node.Spec.Taints) != 0 {
		t.Errorf("the real node has taints: %v", node.Spec.Taints)
	}
	kwokNodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: KwokNodeLabelKey + "=" + KwokNodeLabelValue})
	if err != nil || len(kwokNodes.Items) == 0 {
		t.Fatalf("kwok nodes: %v (%d)", err, len(kwokNodes.Items))
	}
	for _, n := range kwokNodes.Items {
		tainted := false
		for _, taint := range n.Spec.Taints {
			tainted = tainted || taint.Key == KwokTaintKey && taint.Value == KwokTaintValue
		}
		if !tainted {
			t.Errorf("kwok node %s lost its taint: %v", n.Name, n.Spec.Taints)
		}
	}

	image := buildProbeImage(t, ctx)
	ns := c.CreateNamespace(t, "realnode")
	Eventually(t, time.Minute, time.Second, "the namespace's default ServiceAccount", func(ctx context.Context) (bool, string, error) {
		_, err := c.Client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, "", err
	})

	// A peer behind a headless Service: the sandbox image, which only waits.
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "peers", Namespace: ns},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": "peer"},
			Ports: []corev1.ServicePort{{Name: "none", Port: 80}}},
	}
	if _, err := c.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	peer := RealNodePod(ns, "peer", localcluster.SandboxImage)
	peer.Labels = map[string]string{"app": "peer"}
	peer.Spec.RestartPolicy = corev1.RestartPolicyAlways
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, peer, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var peerIP string
	start := time.Now()
	Eventually(t, 2*time.Minute, time.Second, "pod peer Ready on the real node", func(ctx context.Context) (bool, string, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "peer", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		peerIP = p.Status.PodIP
		return podReady(p), fmt.Sprintf("phase %s on %q, IP %q, %v", p.Status.Phase, p.Spec.NodeName, p.Status.PodIP, p.Status.ContainerStatuses), nil
	})
	t.Logf("pod peer Ready in %s, IP %s", time.Since(start).Round(100*time.Millisecond), peerIP)
	_, podCIDR, _ := net.ParseCIDR(localcluster.PodCIDR)
	if ip := net.ParseIP(peerIP); ip == nil || !podCIDR.Contains(ip) {
		t.Errorf("pod IP %q is not in the node's pod range %s", peerIP, localcluster.PodCIDR)
	}
	// exec: the API server reaches the kubelet (its client certificate, the kubelet's webhook
	// authorization), the kubelet containerd's streaming server.
	if out, err := c.Kubectl(ctx, "-n", ns, "exec", "peer", "--", "/sandbox", "-v"); err != nil || strings.TrimSpace(out) != "metricscale sandbox" {
		t.Errorf("kubectl exec peer: %q, %v", out, err)
	}

	names := []string{"kubernetes.default.svc.cluster.local", "kubernetes.default", "peers." + ns + ".svc.cluster.local",
		"peer.peers." + ns + ".svc.cluster.local"}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, RealNodePod(ns, "probe", image, names...), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var phase corev1.PodPhase
	Eventually(t, 2*time.Minute, time.Second, "pod probe to finish", func(ctx context.Context) (bool, string, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "probe", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		phase = p.Status.Phase
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed, fmt.Sprintf("phase %s, %v", phase, p.Status.ContainerStatuses), nil
	})
	logs, err := c.Kubectl(ctx, "-n", ns, "logs", "probe")
	if err != nil {
		t.Fatalf("kubectl logs probe: %v", err)
	}
	t.Logf("probe (%s):\n%s", phase, logs)
	if phase != corev1.PodSucceeded {
		t.Errorf("probe ended %s", phase)
	}
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(logs), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 2 && f[0] == "api-user":
			got["api-user"] = f[1]
		case len(f) == 3 && f[0] == "dns":
			got[f[1]] = f[2]
		}
	}
	want := map[string]string{
		"api-user":                                "system:serviceaccount:" + ns + ":default",
		"kubernetes.default.svc.cluster.local":    "10.0.0.1",
		"kubernetes.default":                      "10.0.0.1",
		"peers." + ns + ".svc.cluster.local":      peerIP,
		"peer.peers." + ns + ".svc.cluster.local": peerIP,
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("probe %s = %q, want %q", k, got[k], w)
		}
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}
