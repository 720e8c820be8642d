package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The real node (up --real-node): one kubelet node beside the kwok nodes, with containerd,
// Debian's runc and CNI plugins, kube-proxy and CoreDNS, all host processes like the
// control plane. Pods on it are real containers with pod IPs on a CNI bridge; they reach
// the API server through the kubernetes Service and resolve Service names.

// RealNodeName is the real node's name (and its kubernetes.io/hostname label).
const RealNodeName = "metricscale-node"

// The real node's ports. The kubelet and CoreDNS listen on the host's address (pods and
// the API server reach them there); the rest on 127.0.0.1.
const (
	KubeletPort          = 10350
	KubeletHealthzPort   = 10348
	KubeProxyMetricsPort = 10349
	KubeProxyHealthzPort = 10356
	CoreDNSPort          = 10353 // the kube-dns Service maps port 53 to it
	CoreDNSHealthPort    = 10354
	CoreDNSReadyPort     = 10355
)

const (
	// KubeDNSServiceIP is the kube-dns Service's ClusterIP, the pods' nameserver.
	KubeDNSServiceIP = "10.0.0.10"
	// PodCIDR is the real node's pod range (its CNI bridge), inside ClusterCIDR.
	PodCIDR     = "10.244.77.0/24"
	ClusterCIDR = "10.244.0.0/16"
	// SandboxImage is the pod sandbox image the cluster builds (build/sandbox) and imports.
	SandboxImage = "metricscale.local/sandbox:1"
	// containerdVersion is what build/containerd/go.mod requires (a test checks).
	containerdVersion = "v2.4.2"
	// containerdNamespace is the CRI's containerd namespace, where images must be for pods.
	containerdNamespace = "k8s.io"
	coreDNSUser         = "metricscale:coredns"
	cniNetwork          = "metricscale-pods"
	cniBridge           = "metricscale0"
)

// realNodeModules are the build modules of the real node.
var realNodeModules = []string{"kubernetes-node", "containerd", "coredns", "sandbox"}

func withRealNode(c *Cluster) bool { return c.RealNode }

// Paths of the real node in the state folder.
func (c *Cluster) containerdSocket() string {
	return filepath.Join(c.Dir, "containerd", "containerd.sock")
}
func (c *Cluster) kubeletRoot() string { return filepath.Join(c.Dir, "kubelet", "root") }

// realNodeComponents are the real node's processes, in start order.
func realNodeComponents() []*Component {
	return []*Component{{
		Name: "containerd", Enabled: withRealNode, Binary: cached("containerd"),
		// containerd finds containerd-shim-runc-v2 on its PATH.
		Env:     func(c *Cluster) []string { return []string{"PATH=" + c.Bin + ":" + os.Getenv("PATH")} },
		Prepare: func(_ context.Context, c *Cluster) error { return c.writeContainerdConfig() },
		Args: func(c *Cluster) []string {
			return []string{"--config", filepath.Join(c.Dir, "containerd", "config.toml")}
		},
		Health: func(ctx context.Context, c *Cluster) error {
			_, err := c.ctr(ctx, "version")
			return err
		},
		BeforeStop:   (*Cluster).killContainers,
		ReadyTimeout: 30 * time.Second, ReadyWhat: "serving on " + "its socket",
	}, {
		Name: "kubelet", Ports: []int{KubeletPort, KubeletHealthzPort}, Enabled: withRealNode, Binary: cached("kubelet"),
		Prepare: func(_ context.Context, c *Cluster) error { return c.writeKubeletConfig() },
		Args:    kubeletArgs,
		Health:  probeURL(local(KubeletHealthzPort, "/healthz"), plainHTTP),
		// up waits for the node Ready separately (upRealNode).
		ReadyTimeout: 60 * time.Second, ReadyWhat: "healthy",
	}, {
		Name: "kube-proxy", Ports: []int{KubeProxyMetricsPort, KubeProxyHealthzPort}, Enabled: withRealNode, Binary: cached("kube-proxy"),
		Prepare: func(_ context.Context, c *Cluster) error { return c.writeKubeProxyConfig() },
		Args: func(c *Cluster) []string {
			return []string{"--config=" + filepath.Join(c.Dir, "kube-proxy", "config.yaml"), "--v=1"}
		},
		// /livez: /healthz also fails while the node's lease is renewed late.
		Health:       probeURL(local(KubeProxyHealthzPort, "/livez"), plainHTTP),
		Ready:        probeURL(local(KubeProxyHealthzPort, "/healthz"), plainHTTP),
		AfterStop:    (*Cluster).cleanUpKubeProxy,
		ReadyTimeout: 60 * time.Second, ReadyWhat: "synced",
	}, {
		Name: "coredns", Ports: []int{CoreDNSPort, CoreDNSHealthPort, CoreDNSReadyPort}, Enabled: withRealNode, Binary: cached("coredns"),
		Prepare: func(_ context.Context, c *Cluster) error {
			if err := os.MkdirAll(filepath.Join(c.Dir, "coredns"), 0o755); err != nil {
				return err
			}
			return writeFileAtomic(filepath.Join(c.Dir, "coredns", "Corefile"), []byte(c.corefile()), 0o644)
		},
		Args: func(c *Cluster) []string {
			return []string{"-conf", filepath.Join(c.Dir, "coredns", "Corefile")}
		},
		Health: probeURL(local(CoreDNSHealthPort, "/health"), plainHTTP),
		// ready: its kubernetes plugin has listed the Services.
		Ready:        probeURL(local(CoreDNSReadyPort, "/ready"), plainHTTP),
		ReadyTimeout: 60 * time.Second, ReadyWhat: "ready",
	}}
}

func kubeletArgs(c *Cluster) []string {
	return append(flags("config", filepath.Join(c.Dir, "kubelet", "config.yaml"),
		"kubeconfig", filepath.Join(c.Dir, "kubeconfigs", "kubelet.kubeconfig"),
		"hostname-override", RealNodeName, "node-ip", c.NodeIP, "root-dir", c.kubeletRoot()), "--v=1")
}

// ---------------------------------------------------------------- configuration files

// writeContainerdConfig writes containerd's config (version 3) and the CNI network.
func (c *Cluster) writeContainerdConfig() error {
	dir := filepath.Join(c.Dir, "containerd")
	for _, d := range []string{dir, filepath.Join(dir, "cni"), filepath.Join(c.Dir, "cni")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	runc, err := exec.LookPath("runc")
	if err != nil {
		if !fileExists("/usr/sbin/runc") {
			return errors.New("runc is not installed (apt-get install runc)")
		}
		runc = "/usr/sbin/runc"
	}
	if err := writeFileAtomic(filepath.Join(dir, "config.toml"), []byte(containerdConfig(c.Dir, runc)), 0o644); err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, "cni", "10-"+cniNetwork+".conflist"), []byte(cniConfig(c.Dir)), 0o644)
}

// cniPluginDir is where Debian's containernetworking-plugins are.
const cniPluginDir = "/usr/lib/cni"

// containerdConfig is containerd's config.toml: everything under the state folder, the CNI
// network of cniConfig, the sandbox image we build pinned (no registry is reachable).
func containerdConfig(dir, runc string) string {
	q := strconv.Quote
	cd := filepath.Join(dir, "containerd")
	return fmt.Sprintf(`# Written by hack/cluster for the real node (up --real-node).
version = 3
root = %s
state = %s
# Not used by the node; the tracing and NRI plugins would want their own sockets.
disabled_plugins = ['io.containerd.nri.v1.nri', 'io.containerd.tracing.processor.v1.otlp', 'io.containerd.internal.v1.tracing']

[grpc]
  address = %s

[ttrpc]
  address = %s

[plugins]
  [plugins.'io.containerd.internal.v1.opt']
    path = %s

  [plugins.'io.containerd.cri.v1.runtime']
    # The development machine refuses a negative oom_score_adj: without this every pod
    # sandbox fails with "runc create failed: ... can't get final child's PID from pipe: EOF".
    restrict_oom_score_adj = true

    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'

      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'

        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = %s
          SystemdCgroup = false

    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = [%s]
      conf_dir = %s
      max_conf_num = 1

  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'

    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = %s

  [plugins.'io.containerd.grpc.v1.cri']
    disable_tcp_service = true
    stream_server_address = '127.0.0.1'
    stream_server_port = '0'
`, q(filepath.Join(cd, "root")), q(filepath.Join(cd, "state")), q(filepath.Join(cd, "containerd.sock")),
		q(filepath.Join(cd, "containerd.sock.ttrpc")), q(filepath.Join(cd, "opt")), q(runc), q(cniPluginDir),
		q(filepath.Join(cd, "cni")), q(SandboxImage))
}

// cniConfig is the pods' network: a bridge (the pods' gateway, masquerading what leaves
// the host) with host-local addresses from PodCIDR, kept in the state folder, plus portmap
// (hostPort) and loopback.
func cniConfig(dir string) string {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       cniNetwork,
		"plugins": []map[string]any{{
			"type": "bridge", "bridge": cniBridge, "isGateway": true, "ipMasq": true, "hairpinMode": true,
			"ipam": map[string]any{
				"type": "host-local", "dataDir": filepath.Join(dir, "cni", "ipam"),
				"ranges": [][]map[string]string{{{"subnet": PodCIDR}}},
				"routes": []map[string]string{{"dst": "0.0.0.0/0"}},
			},
		}, {
			"type": "portmap", "capabilities": map[string]bool{"portMappings": true},
		}, {
			"type": "loopback",
		}},
	}
	out, _ := json.MarshalIndent(conf, "", "  ")
	return string(out) + "\n"
}

// writeKubeletConfig writes the kubelet's KubeletConfiguration.
func (c *Cluster) writeKubeletConfig() error {
	dir := filepath.Join(c.Dir, "kubelet")
	for _, d := range []string{dir, c.kubeletRoot(), filepath.Join(dir, "pod-logs"), filepath.Join(dir, "volume-plugins")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	return writeFileAtomic(filepath.Join(dir, "config.yaml"), []byte(kubeletConfig(c.Dir, c.NodeIP)), 0o644)
}

func kubeletConfig(dir, nodeIP string) string {
	q := strconv.Quote
	return fmt.Sprintf(`# Written by hack/cluster for the real node (up --real-node).
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# The development machine runs cgroup v1, which kubelet 1.35+ refuses unless failCgroupV1 is
# false. This is for this development node only: a production node runs cgroup v2.
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: %s
# The API server (kubectl logs, exec, port-forward) and metrics-server reach it here.
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
tlsCertFile: %s
tlsPrivateKeyFile: %s
rotateCertificates: false
serverTLSBootstrap: false
# Only clients with a certificate of the cluster CA (the API server, metrics-server) or a
# token, each authorized by the API server (SubjectAccessReview).
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
    cacheTTL: 30s
  x509:
    clientCAFile: %s
authorization:
  mode: Webhook
  webhook:
    cacheAuthorizedTTL: 30s
    cacheUnauthorizedTTL: 10s
clusterDNS:
- %s
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
# The machine has swap settings and a disk layout of its own: none of these may stop it.
failSwapOn: false
localStorageCapacityIsolation: false
# It may not lower its own OOM score here (see restrict_oom_score_adj in containerd's config).
oomScoreAdj: 0
podLogsDir: %s
volumePluginDir: %s
# Images are loaded (hack/cluster.sh load-images), never pulled: image GC must not remove them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 2%%
  imagefs.available: 2%%
serializeImagePulls: false
`, q("unix://"+filepath.Join(dir, "containerd", "containerd.sock")), q(nodeIP), KubeletPort, KubeletHealthzPort,
		q(filepath.Join(dir, "pki", "kubelet-realnode.crt")), q(filepath.Join(dir, "pki", "kubelet-realnode.key")),
		q(filepath.Join(dir, "pki", "ca.crt")), KubeDNSServiceIP,
		q(filepath.Join(dir, "kubelet", "pod-logs")), q(filepath.Join(dir, "kubelet", "volume-plugins")))
}

func (c *Cluster) writeKubeProxyConfig() error {
	if err := os.MkdirAll(filepath.Join(c.Dir, "kube-proxy"), 0o755); err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(c.Dir, "kube-proxy", "config.yaml"), []byte(kubeProxyConfig(c.Dir)), 0o644)
}

func kubeProxyConfig(dir string) string {
	return fmt.Sprintf(`# Written by hack/cluster for the real node (up --real-node).
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
hostnameOverride: %s
mode: iptables
clusterCIDR: %s
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
# 0: leave the machine's conntrack settings as they are.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, strconv.Quote(filepath.Join(dir, "kubeconfigs", "kube-proxy.kubeconfig")), RealNodeName, ClusterCIDR,
		KubeProxyHealthzPort, KubeProxyMetricsPort)
}

// corefile is CoreDNS's configuration: the cluster's names from the API server, the rest
// forwarded to the host's resolvers.
func (c *Cluster) corefile() string {
	bind := "127.0.0.1"
	if c.NodeIP != "" {
		bind = c.NodeIP + " 127.0.0.1"
	}
	return fmt.Sprintf(`# Written by hack/cluster for the real node (up --real-node).
.:%d {
    bind %s
    errors
    health 127.0.0.1:%d
    ready 127.0.0.1:%d
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig %s
        pods insecure
        endpoint_pod_names
        ttl 5
        fallthrough in-addr.arpa ip6.arpa
    }
    forward . /etc/resolv.conf
    cache 5
    loop
    loadbalance
}
`, CoreDNSPort, bind, CoreDNSHealthPort, CoreDNSReadyPort, filepath.Join(c.Dir, "kubeconfigs", "coredns.kubeconfig"))
}

// coreDNSManifests are CoreDNS's read-only role and the kube-dns Service, whose
// EndpointSlice points at CoreDNS on the host (a Service without a selector).
func coreDNSManifests(nodeIP string) string {
	return fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: %[1]s
rules:
- apiGroups: [""]
  resources: [services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: %[1]s
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: %[1]s}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: %[1]s}
---
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels: {k8s-app: kube-dns, kubernetes.io/name: CoreDNS}
spec:
  clusterIP: %[2]s
  ports:
  - {name: dns, port: 53, protocol: UDP, targetPort: %[3]d}
  - {name: dns-tcp, port: 53, protocol: TCP, targetPort: %[3]d}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: kube-dns-host
  namespace: kube-system
  labels:
    kubernetes.io/service-name: kube-dns
    endpointslice.kubernetes.io/managed-by: hack-cluster.metricscale.dev
addressType: IPv4
endpoints:
- addresses: [%[4]q]
  conditions: {ready: true}
  nodeName: %[5]s
ports:
- {name: dns, port: %[3]d, protocol: UDP}
- {name: dns-tcp, port: %[3]d, protocol: TCP}
`, coreDNSUser, KubeDNSServiceIP, CoreDNSPort, nodeIP, RealNodeName)
}

// ---------------------------------------------------------------- the host's address

// defaultRouteInterface names the interface of the default IPv4 route in /proc/net/route's
// text (the lowest metric when there are several).
func defaultRouteInterface(table string) (string, error) {
	best, bestMetric := "", -1
	sc := bufio.NewScanner(strings.NewReader(table))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// Iface Destination Gateway Flags RefCnt Use Metric Mask ...
		if len(f) < 8 || f[1] != "00000000" || f[7] != "00000000" {
			continue
		}
		flags, err := strconv.ParseUint(f[3], 16, 32)
		if err != nil || flags&0x1 == 0 { // RTF_UP
			continue
		}
		metric, err := strconv.Atoi(f[6])
		if err != nil {
			continue
		}
		if bestMetric < 0 || metric < bestMetric {
			best, bestMetric = f[0], metric
		}
	}
	if best == "" {
		return "", errors.New("no default IPv4 route in /proc/net/route")
	}
	return best, nil
}

// HostIP is the IPv4 address of the interface of the default route: where pods reach the
// host's processes (the API server, CoreDNS) and the node's address.
func HostIP() (string, error) {
	table, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return "", err
	}
	name, err := defaultRouteInterface(string(table))
	if err != nil {
		return "", err
	}
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return "", fmt.Errorf("default route interface %s: %w", name, err)
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return "", fmt.Errorf("default route interface %s: %w", name, err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			return n.IP.String(), nil
		}
	}
	return "", fmt.Errorf("default route interface %s has no IPv4 address", name)
}

// ---------------------------------------------------------------- up

// realNodePKI writes the real node's certificates and kubeconfigs.
func (c *Cluster) realNodePKI(ctx context.Context) error {
	for _, r := range realNodeCerts(c.NodeIP) {
		if err := ensureCert(filepath.Join(c.Dir, "pki"), r); err != nil {
			return fmt.Errorf("real node certificate %s: %w", r.name, err)
		}
	}
	for _, kc := range []struct{ file, cert string }{{"kubelet", "node"}, {"kube-proxy", "kube-proxy"}, {"coredns", "coredns"}} {
		if _, err := c.clusterutil(ctx, "kubeconfig", "-out", filepath.Join(c.Dir, "kubeconfigs", kc.file+".kubeconfig"),
			"-server", secure(APIServerPort, ""), "-ca", c.pki("ca.crt"), "-cert", c.pki(kc.cert+".crt"),
			"-key", c.pki(kc.cert+".key"), "-user", kc.file); err != nil {
			return err
		}
	}
	return nil
}

// upRealNode starts containerd, imports the sandbox image, starts the kubelet, kube-proxy
// and CoreDNS, and waits until the node is Ready.
func (c *Cluster) upRealNode(ctx context.Context) error {
	c.phaseBegin(fmt.Sprintf("start the real node %s (%s): containerd, kubelet, kube-proxy, CoreDNS", RealNodeName, c.NodeIP))
	if !fileExists(filepath.Join(cniPluginDir, "bridge")) {
		return fmt.Errorf("no CNI plugins in %s (apt-get install containernetworking-plugins)", cniPluginDir)
	}
	if err := c.startAndWait(ctx, "containerd"); err != nil {
		return err
	}
	if err := c.importSandboxImage(ctx); err != nil {
		return err
	}
	if err := c.apply(ctx, coreDNSManifests(c.NodeIP)); err != nil {
		return fmt.Errorf("creating CoreDNS's role and the kube-dns Service failed: %w", err)
	}
	names := []string{"kubelet", "kube-proxy", "coredns"}
	for _, n := range names {
		if err := c.startComponent(ctx, n); err != nil {
			return err
		}
	}
	if err := c.waitFor(ctx, "kubelet", 120*time.Second, "Ready as node "+RealNodeName,
		c.kubectlCheck("wait", "--for=condition=Ready", "node/"+RealNodeName, "--timeout=5s")); err != nil {
		return err
	}
	for _, n := range names {
		if err := c.waitReady(ctx, n); err != nil {
			return err
		}
	}
	c.phaseEnd("real node " + RealNodeName)
	return nil
}

// importSandboxImage packs the sandbox program as SandboxImage and imports it.
func (c *Cluster) importSandboxImage(ctx context.Context) error {
	bin, err := os.ReadFile(filepath.Join(c.Bin, "sandbox"))
	if err != nil {
		return fmt.Errorf("sandbox image: %w", err)
	}
	var archive bytes.Buffer
	if err := WriteImageArchive(&archive, SandboxImage, []string{"/sandbox"}, []ImageFile{{Path: "sandbox", Mode: 0o755, Data: bin}}); err != nil {
		return fmt.Errorf("sandbox image: %w", err)
	}
	path := filepath.Join(c.Dir, "containerd", "sandbox-image.tar")
	if err := writeFileAtomic(path, archive.Bytes(), 0o644); err != nil {
		return err
	}
	if _, err := c.ctr(ctx, "images", "import", path); err != nil {
		return fmt.Errorf("importing the sandbox image: %w", err)
	}
	c.logf("    imported the sandbox image %s", SandboxImage)
	return nil
}

// ctr runs ctr against the node's containerd, in the CRI's namespace, and returns its
// standard output: on this machine it warns on standard error at every call (cgroup v1 is
// deprecated), which must not be read as output.
func (c *Cluster) ctr(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(c.Bin, "ctr"),
		append([]string{"--address", c.containerdSocket(), "--namespace", containerdNamespace}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err,
			lastLines(strings.TrimSpace(stderr.String()+"\n"+stdout.String()), 5))
	}
	return stdout.String(), nil
}

// LoadImages imports image archives (docker-archive or OCI tars, as `make images` writes
// them to _output/images) into the real node's containerd, where pods with
// imagePullPolicy Never or IfNotPresent find them.
func (c *Cluster) LoadImages(ctx context.Context, tarPaths ...string) error {
	if len(tarPaths) == 0 {
		return errors.New("load-images: no image archive given")
	}
	if !c.Alive("containerd") {
		return fmt.Errorf("the real node does not run in %s; start the cluster with: hack/cluster.sh up --real-node", c.Dir)
	}
	for _, p := range tarPaths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return err
		}
		if _, err := os.Stat(abs); err != nil {
			return fmt.Errorf("load-images: %w", err)
		}
		out, err := c.ctr(ctx, "images", "import", abs)
		if err != nil {
			return fmt.Errorf("load-images %s: %w", p, err)
		}
		names := importedNames(out)
		if len(names) == 0 {
			return fmt.Errorf("load-images %s: ctr imported no image: %s", p, lastLines(strings.TrimSpace(out), 5))
		}
		c.logf("loaded %s: %s", p, strings.Join(names, " "))
	}
	return nil
}

// importedNames reads the image names of ctr images import's output: a line
// "NAME<tab>saved" per image, then its manifest and progress lines. Its progress
// display may redraw a name with a blank in it (once in CI: "metricscale.local/e2e
// probe:…" for e2e-probe), so a line ending in "saved" counts whatever precedes it.
func importedNames(out string) []string {
	var names []string
	for _, l := range splitLines(out) {
		if f := strings.Fields(l); len(f) >= 2 && f[len(f)-1] == "saved" {
			names = append(names, strings.Join(f[:len(f)-1], " "))
		}
	}
	return names
}

// ---------------------------------------------------------------- down

// drainRealNode deletes the pods of the real node while the kubelet and containerd run, so
// that they are torn down as on any node (CNI DEL, unmounts), and waits until their
// containers are gone. Cordoned first: their controllers' replacements stay Pending.
func (c *Cluster) drainRealNode(ctx context.Context) {
	if !c.Alive("kubelet") || !c.Alive("kube-apiserver") || !c.Alive("containerd") {
		return
	}
	if _, err := c.kubectl(ctx, "", "cordon", RealNodeName); err != nil {
		c.warnf("cordon %s: %v", RealNodeName, err)
		return
	}
	out, err := c.kubectl(ctx, "", "delete", "pods", "--all-namespaces", "--field-selector", "spec.nodeName="+RealNodeName,
		"--grace-period=0", "--force", "--wait=false")
	if err != nil {
		c.warnf("deleting the pods of %s: %v: %s", RealNodeName, err, strings.TrimSpace(out))
		return
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		tasks, err := c.ctr(ctx, "tasks", "list", "--quiet")
		// The kubelet bind-mounts its root onto itself (shared propagation): only the
		// pods' mounts count.
		mounts := mountsUnder(filepath.Join(c.kubeletRoot(), "pods"))
		if err == nil && strings.TrimSpace(tasks) == "" && len(mounts) == 0 {
			c.logf("    removed the pods of %s", RealNodeName)
			return
		}
		if time.Now().After(deadline) {
			c.warnf("the pods of %s were not all removed within 60s (tasks: %s; mounts: %d); removing what is left",
				RealNodeName, strings.Join(strings.Fields(tasks), " "), len(mounts))
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// killContainers kills and deletes the containers containerd still runs (what the drain
// left), so that their shims exit with them.
func (c *Cluster) killContainers(ctx context.Context) {
	out, err := c.ctr(ctx, "tasks", "list", "--quiet")
	if err != nil {
		return
	}
	for _, id := range strings.Fields(out) {
		_, _ = c.ctr(ctx, "tasks", "kill", "--signal", "SIGKILL", id)
	}
	for _, id := range strings.Fields(out) {
		for i := 0; i < 20; i++ {
			if _, err := c.ctr(ctx, "tasks", "delete", id); err == nil {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	if ids := strings.Fields(out); len(ids) > 0 {
		c.logf("    killed %d container(s) left on %s", len(ids), RealNodeName)
	}
}

// cleanUpKubeProxy removes the Service rules kube-proxy wrote (kube-proxy --cleanup).
func (c *Cluster) cleanUpKubeProxy(ctx context.Context) {
	if out, err := run(ctx, "", nil, nil, filepath.Join(c.Bin, "kube-proxy"), "--cleanup", "--v=0"); err != nil {
		c.warnf("kube-proxy --cleanup: %v: %s", err, lastLines(strings.TrimSpace(out), 5))
	}
}

// cleanUpRealNode runs once every component stopped: it stops the shims of our containerd
// that are left, unmounts what pods left mounted under the state folder, and forgets the
// pod addresses (host-local's store) so that the next up starts clean.
func (c *Cluster) cleanUpRealNode() {
	socket := c.containerdSocket()
	for _, pid := range processesWithArg(filepath.Join(c.Bin, "containerd-shim-runc-v2"), socket) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		c.logf("    killed a leftover containerd shim (pid %d)", pid)
	}
	mounts := mountsUnder(c.Dir)
	for _, m := range mounts {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
			c.warnf("unmount %s: %v", m, err)
		}
	}
	if len(mounts) > 0 {
		c.logf("    unmounted %d mount(s) left under %s", len(mounts), c.Dir)
	}
	_ = os.RemoveAll(filepath.Join(c.Dir, "cni", "ipam"))
	// The pods' folders (the next kubelet has other pods), only once nothing is mounted there:
	// RemoveAll would follow a hostPath bind mount into the host's files.
	if left := mountsUnder(c.kubeletRoot()); len(left) == 0 {
		_ = os.RemoveAll(c.kubeletRoot())
	} else {
		c.warnf("still mounted under %s: %s", c.kubeletRoot(), strings.Join(left, " "))
	}
}

// mountsUnder lists the mount points at or below dir, deepest first.
func mountsUnder(dir string) []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range splitLines(string(data)) {
		f := strings.Fields(l)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMountPath(f[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// processesWithArg lists the processes running binary with arg among their arguments.
func processesWithArg(binary, arg string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(cmdline) == 0 {
			continue
		}
		argv := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		exe, _ := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if (argv[0] == binary || exe == binary) && containsArg(argv[1:], arg) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func containsArg(args []string, arg string) bool {
	for _, a := range args {
		if a == arg || strings.HasSuffix(a, "="+arg) {
			return true
		}
	}
	return false
}
