package cluster

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

func TestRealNodeComponentsAndModules(t *testing.T) {
	t.Parallel()
	o := DefaultOptions("")
	o.RealNode, o.Prometheus = true, false
	c := newTestCluster(t, true, o)
	want := "etcd kube-apiserver kube-controller-manager kube-scheduler kwok containerd kubelet kube-proxy coredns metrics-server metricscale-adapter metricscale-autoscaler"
	if got := strings.Join(c.selected(), " "); got != want {
		t.Errorf("components %q, want %q", got, want)
	}
	wantModules := "clusterutil kubernetes etcd kwok metrics-server kubernetes-node containerd coredns sandbox"
	if got := strings.Join(c.neededModules(), " "); got != wantModules {
		t.Errorf("modules %q, want %q", got, wantModules)
	}
	// `build` (CI) builds them too.
	for _, m := range realNodeModules {
		if !slices.Contains(AllModules(), m) {
			t.Errorf("build does not build %s", m)
		}
	}
}

// The real node's build modules exist where their entries say, and containerd's ldflags
// name the version its go.mod requires.
func TestRealNodeBuildModules(t *testing.T) {
	t.Parallel()
	root := filepath.Join("build")
	for _, m := range modules() {
		if !slices.Contains(realNodeModules, m.name) {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, m.name, "go.mod")); err != nil {
			t.Errorf("module %s: %v", m.name, err)
		}
	}
	gomod, err := os.ReadFile(filepath.Join(root, "containerd", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(gomod), "require github.com/containerd/containerd/v2 "+containerdVersion+"\n") {
		t.Errorf("build/containerd/go.mod does not require containerd %s:\n%s", containerdVersion, gomod)
	}
	tools, err := os.ReadFile(filepath.Join(root, "kubernetes-node", "tools.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"k8s.io/kubernetes/cmd/kubelet", "k8s.io/kubernetes/cmd/kube-proxy"} {
		if !strings.Contains(string(tools), `"`+cmd+`"`) {
			t.Errorf("build/kubernetes-node/tools.go does not pin %s (go mod tidy would drop its requirements)", cmd)
		}
	}
	// The node's kubelet is the control plane's Kubernetes: same version, same replaces.
	plane, node := readGoMod(t, filepath.Join(root, "kubernetes", "go.mod")), readGoMod(t, filepath.Join(root, "kubernetes-node", "go.mod"))
	if plane.kubernetes == "" || plane.kubernetes != node.kubernetes {
		t.Errorf("k8s.io/kubernetes %q in build/kubernetes, %q in build/kubernetes-node", plane.kubernetes, node.kubernetes)
	}
	if plane.replace == "" || plane.replace != node.replace {
		t.Errorf("the replace directives differ:\n%s\n---\n%s", plane.replace, node.replace)
	}
}

type goMod struct{ kubernetes, replace string }

// readGoMod reads a build module's k8s.io/kubernetes version and replace block.
func readGoMod(t *testing.T, path string) goMod {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m goMod
	if v := kubeRequire.FindSubmatch(data); v != nil {
		m.kubernetes = string(v[1])
	}
	if _, rest, ok := strings.Cut(string(data), "\nreplace ("); ok {
		m.replace, _, _ = strings.Cut(rest, "\n)")
	}
	return m
}

func TestAPIServerArgsWithRealNode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		realNode      bool
		want, wantNot []string
	}{
		{"loopback only", false,
			[]string{"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none", "--authorization-mode=RBAC"},
			[]string{"--enable-admission-plugins=NodeRestriction"}},
		{"real node", true,
			[]string{"--bind-address=0.0.0.0", "--advertise-address=192.0.2.9", "--endpoint-reconciler-type=lease",
				"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
				"--kubelet-client-certificate=/d/pki/apiserver-kubelet-client.crt"},
			[]string{"--bind-address=127.0.0.1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := DefaultOptions("/d")
			o.RealNode = tt.realNode
			c := newTestCluster(t, true, o)
			c.NodeIP = "192.0.2.9"
			args := c.component("kube-apiserver").Args(c)
			for _, w := range tt.want {
				if !slices.Contains(args, w) {
					t.Errorf("%q lacks %s", args, w)
				}
			}
			for _, w := range tt.wantNot {
				if slices.Contains(args, w) {
					t.Errorf("%q has %s", args, w)
				}
			}
			cert := "--tls-cert-file=/d/pki/apiserver.crt"
			if tt.realNode {
				cert = "--tls-cert-file=/d/pki/apiserver-realnode.crt"
			}
			if !slices.Contains(args, cert) {
				t.Errorf("%q lacks %s", args, cert)
			}
		})
	}
}

func TestKubeletArgs(t *testing.T) {
	t.Parallel()
	o := DefaultOptions("/d")
	o.RealNode = true
	c := newTestCluster(t, true, o)
	c.NodeIP = "192.0.2.9"
	want := []string{"--config=/d/kubelet/config.yaml", "--kubeconfig=/d/kubeconfigs/kubelet.kubeconfig",
		"--hostname-override=metricscale-node", "--node-ip=192.0.2.9", "--root-dir=/d/kubelet/root", "--v=1"}
	if got := kubeletArgs(c); !reflect.DeepEqual(got, want) {
		t.Errorf("kubelet args\n got %q\nwant %q", got, want)
	}
}

// decodeYAML reads one YAML document into a generic map.
func decodeYAML(t *testing.T, doc string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatalf("%v in:\n%s", err, doc)
	}
	return m
}

// at walks a decoded document along keys.
func at(m any, keys ...string) any {
	for _, k := range keys {
		mm, ok := m.(map[string]any)
		if !ok {
			return nil
		}
		m = mm[k]
	}
	return m
}

func TestKubeletConfig(t *testing.T) {
	t.Parallel()
	m := decodeYAML(t, kubeletConfig("/d", "192.0.2.9"))
	checks := []struct {
		path []string
		want any
	}{
		{[]string{"kind"}, "KubeletConfiguration"},
		{[]string{"failCgroupV1"}, false},
		{[]string{"cgroupDriver"}, "cgroupfs"},
		{[]string{"failSwapOn"}, false},
		{[]string{"localStorageCapacityIsolation"}, false},
		{[]string{"containerRuntimeEndpoint"}, "unix:///d/containerd/containerd.sock"},
		{[]string{"address"}, "192.0.2.9"},
		{[]string{"port"}, float64(KubeletPort)},
		{[]string{"healthzPort"}, float64(KubeletHealthzPort)},
		{[]string{"readOnlyPort"}, float64(0)},
		{[]string{"authentication", "anonymous", "enabled"}, false},
		{[]string{"authentication", "webhook", "enabled"}, true},
		{[]string{"authentication", "x509", "clientCAFile"}, "/d/pki/ca.crt"},
		{[]string{"authorization", "mode"}, "Webhook"},
		{[]string{"clusterDNS"}, []any{KubeDNSServiceIP}},
		{[]string{"clusterDomain"}, "cluster.local"},
		{[]string{"tlsCertFile"}, "/d/pki/kubelet-realnode.crt"},
		{[]string{"imageGCHighThresholdPercent"}, float64(100)},
		{[]string{"podLogsDir"}, "/d/kubelet/pod-logs"},
	}
	for _, ck := range checks {
		if got := at(m, ck.path...); !reflect.DeepEqual(got, ck.want) {
			t.Errorf("%s = %#v, want %#v", strings.Join(ck.path, "."), got, ck.want)
		}
	}
}

func TestKubeProxyConfig(t *testing.T) {
	t.Parallel()
	m := decodeYAML(t, kubeProxyConfig("/d"))
	checks := []struct {
		path []string
		want any
	}{
		{[]string{"kind"}, "KubeProxyConfiguration"},
		{[]string{"mode"}, "iptables"},
		{[]string{"clusterCIDR"}, ClusterCIDR},
		{[]string{"hostnameOverride"}, RealNodeName},
		{[]string{"clientConnection", "kubeconfig"}, "/d/kubeconfigs/kube-proxy.kubeconfig"},
		{[]string{"healthzBindAddress"}, "127.0.0.1:10356"},
		{[]string{"conntrack", "maxPerCore"}, float64(0)},
	}
	for _, ck := range checks {
		if got := at(m, ck.path...); !reflect.DeepEqual(got, ck.want) {
			t.Errorf("%s = %#v, want %#v", strings.Join(ck.path, "."), got, ck.want)
		}
	}
}

func TestContainerdConfig(t *testing.T) {
	t.Parallel()
	conf := containerdConfig("/d", "/usr/sbin/runc")
	for _, want := range []string{
		"version = 3\n",
		`root = "/d/containerd/root"`,
		`state = "/d/containerd/state"`,
		`address = "/d/containerd/containerd.sock"`,
		"restrict_oom_score_adj = true",
		`BinaryName = "/usr/sbin/runc"`,
		"SystemdCgroup = false",
		`bin_dirs = ["/usr/lib/cni"]`,
		`conf_dir = "/d/containerd/cni"`,
		`sandbox = "` + SandboxImage + `"`,
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("containerd config lacks %s:\n%s", want, conf)
		}
	}
	// Each table is declared once (TOML rejects a table defined twice).
	seen := map[string]bool{}
	for _, l := range splitLines(conf) {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "[") {
			if seen[l] {
				t.Errorf("table %s twice", l)
			}
			seen[l] = true
		}
	}
}

func TestCNIConfig(t *testing.T) {
	t.Parallel()
	var conf struct {
		Name    string `json:"name"`
		Plugins []struct {
			Type      string `json:"type"`
			Bridge    string `json:"bridge"`
			IsGateway bool   `json:"isGateway"`
			IPMasq    bool   `json:"ipMasq"`
			IPAM      struct {
				Type    string                `json:"type"`
				DataDir string                `json:"dataDir"`
				Ranges  [][]map[string]string `json:"ranges"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal([]byte(cniConfig("/d")), &conf); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, p := range conf.Plugins {
		types = append(types, p.Type)
	}
	if got := strings.Join(types, ","); got != "bridge,portmap,loopback" {
		t.Errorf("plugins %s", got)
	}
	b := conf.Plugins[0]
	if !b.IsGateway || !b.IPMasq || b.Bridge != cniBridge || len(cniBridge) > 15 {
		t.Errorf("bridge %+v", b)
	}
	if b.IPAM.Type != "host-local" || b.IPAM.DataDir != "/d/cni/ipam" || len(b.IPAM.Ranges) != 1 || b.IPAM.Ranges[0][0]["subnet"] != PodCIDR {
		t.Errorf("ipam %+v", b.IPAM)
	}
}

func TestCoreDNSConfig(t *testing.T) {
	t.Parallel()
	o := DefaultOptions("/d")
	o.RealNode = true
	c := newTestCluster(t, true, o)
	c.NodeIP = "192.0.2.9"
	corefile := c.corefile()
	for _, want := range []string{".:10353 {", "bind 192.0.2.9 127.0.0.1", "kubernetes cluster.local in-addr.arpa ip6.arpa",
		"kubeconfig /d/kubeconfigs/coredns.kubeconfig", "endpoint_pod_names", "forward . /etc/resolv.conf",
		"health 127.0.0.1:10354", "ready 127.0.0.1:10355"} {
		if !strings.Contains(corefile, want) {
			t.Errorf("Corefile lacks %q:\n%s", want, corefile)
		}
	}
	docs := strings.Split(coreDNSManifests("192.0.2.9"), "\n---\n")
	kinds := map[string]map[string]any{}
	for _, d := range docs {
		m := decodeYAML(t, d)
		kinds[m["kind"].(string)] = m
	}
	svc, slice := kinds["Service"], kinds["EndpointSlice"]
	if at(svc, "spec", "clusterIP") != KubeDNSServiceIP || at(svc, "metadata", "name") != "kube-dns" {
		t.Errorf("Service %v", svc)
	}
	if at(slice, "metadata", "labels", "kubernetes.io/service-name") != "kube-dns" {
		t.Errorf("EndpointSlice is not kube-dns's: %v", slice)
	}
	eps := at(slice, "endpoints").([]any)
	if addrs := at(eps[0], "addresses"); !reflect.DeepEqual(addrs, []any{"192.0.2.9"}) {
		t.Errorf("EndpointSlice addresses %v", addrs)
	}
	// Service port 53 → CoreDNS's port, matched by port name.
	svcPorts, slicePorts := map[string]float64{}, map[string]float64{}
	for _, p := range at(svc, "spec", "ports").([]any) {
		svcPorts[at(p, "name").(string)] = at(p, "port").(float64)
	}
	for _, p := range at(slice, "ports").([]any) {
		slicePorts[at(p, "name").(string)] = at(p, "port").(float64)
	}
	if !reflect.DeepEqual(svcPorts, map[string]float64{"dns": 53, "dns-tcp": 53}) ||
		!reflect.DeepEqual(slicePorts, map[string]float64{"dns": CoreDNSPort, "dns-tcp": CoreDNSPort}) {
		t.Errorf("ports: Service %v, EndpointSlice %v", svcPorts, slicePorts)
	}
	if rules := at(kinds["ClusterRole"], "rules").([]any); len(rules) != 2 {
		t.Errorf("CoreDNS role rules %v", rules)
	}
}

func TestDefaultRouteInterface(t *testing.T) {
	t.Parallel()
	const header = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
	tests := []struct {
		name, table, want string
	}{
		{"one default", header +
			"eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n" +
			"eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n", "eth0"},
		{"lowest metric wins", header +
			"wlan0\t00000000\t0101A8C0\t0003\t0\t0\t600\t00000000\t0\t0\t0\n" +
			"eth1\t00000000\t0100000A\t0003\t0\t0\t100\t00000000\t0\t0\t0\n", "eth1"},
		{"a route that is down is skipped", header +
			"eth0\t00000000\t010200C0\t0002\t0\t0\t0\t00000000\t0\t0\t0\n" +
			"eth2\t00000000\t010200C0\t0003\t0\t0\t50\t00000000\t0\t0\t0\n", "eth2"},
		{"none", header + "eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := defaultRouteInterface(tt.table)
			if tt.want == "" {
				if err == nil {
					t.Errorf("got %q, want an error", got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// writeTestCA writes a CA key pair as clusterutil does (EC PRIVATE KEY).
func writeTestCA(t *testing.T, dir string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour * 48)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestEnsureCert(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTestCA(t, dir)
	ca, _, err := loadKeyPair(filepath.Join(dir, "ca"))
	if err != nil {
		t.Fatal(err)
	}
	byName := func(ip string) map[string]certRequest {
		m := map[string]certRequest{}
		for _, r := range realNodeCerts(ip) {
			m[r.name] = r
		}
		return m
	}
	reqs := byName("192.0.2.9")
	for _, r := range reqs {
		if err := ensureCert(dir, r); err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
	}
	node, _, err := loadKeyPair(filepath.Join(dir, "node"))
	if err != nil {
		t.Fatal(err)
	}
	if node.Subject.CommonName != "system:node:metricscale-node" || !slices.Equal(node.Subject.Organization, []string{"system:nodes"}) ||
		node.CheckSignatureFrom(ca) != nil {
		t.Errorf("node certificate %v, signed by the CA: %v", node.Subject, node.CheckSignatureFrom(ca))
	}
	api, _, err := loadKeyPair(filepath.Join(dir, "apiserver-realnode"))
	if err != nil {
		t.Fatal(err)
	}
	if api.VerifyHostname("192.0.2.9") != nil || api.VerifyHostname("10.0.0.1") != nil || api.VerifyHostname("kubernetes.default.svc") != nil {
		t.Errorf("API server certificate names: %v %v", api.DNSNames, api.IPAddresses)
	}
	// The same request keeps the pair; another address gets a new one.
	before, _ := os.ReadFile(filepath.Join(dir, "apiserver-realnode.crt"))
	if err := ensureCert(dir, reqs["apiserver-realnode"]); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "apiserver-realnode.crt")); !bytes.Equal(before, again) {
		t.Error("an unchanged request issued a new certificate")
	}
	if err := ensureCert(dir, byName("192.0.2.77")["apiserver-realnode"]); err != nil {
		t.Fatal(err)
	}
	moved, _, err := loadKeyPair(filepath.Join(dir, "apiserver-realnode"))
	if err != nil {
		t.Fatal(err)
	}
	if moved.VerifyHostname("192.0.2.77") != nil || moved.VerifyHostname("192.0.2.9") == nil {
		t.Errorf("after the address changed: %v", moved.IPAddresses)
	}
}

func TestWriteImageArchive(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	bin := []byte("\x7fELF not really")
	if err := WriteImageArchive(&buf, SandboxImage, []string{"/sandbox"}, []ImageFile{{Path: "sandbox", Mode: 0o755, Data: bin}}); err != nil {
		t.Fatal(err)
	}
	entries := map[string][]byte{}
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		entries[h.Name] = must(io.ReadAll(tr))
	}
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(entries["manifest.json"], &manifest); err != nil {
		t.Fatalf("manifest.json: %v", err)
	}
	if len(manifest) != 1 || !slices.Equal(manifest[0].RepoTags, []string{SandboxImage}) || len(manifest[0].Layers) != 1 {
		t.Fatalf("manifest %+v", manifest)
	}
	var config struct {
		OS     string `json:"os"`
		Config struct{ Entrypoint []string }
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	if err := json.Unmarshal(entries[manifest[0].Config], &config); err != nil {
		t.Fatalf("config %s: %v", manifest[0].Config, err)
	}
	// Content-addressed: the config's name is its digest, the layer's diff ID its digest.
	cfgSum := sha256.Sum256(entries[manifest[0].Config])
	if manifest[0].Config != hex.EncodeToString(cfgSum[:])+".json" {
		t.Errorf("config name %s is not its digest", manifest[0].Config)
	}
	layer := entries[manifest[0].Layers[0]]
	sum := sha256.Sum256(layer)
	if !slices.Equal(config.RootFS.DiffIDs, []string{"sha256:" + hex.EncodeToString(sum[:])}) || config.OS != "linux" ||
		!slices.Equal(config.Config.Entrypoint, []string{"/sandbox"}) {
		t.Errorf("config %+v", config)
	}
	lr := tar.NewReader(bytes.NewReader(layer))
	h, err := lr.Next()
	if err != nil {
		t.Fatal(err)
	}
	if h.Name != "sandbox" || h.Mode != 0o755 || !bytes.Equal(must(io.ReadAll(lr)), bin) {
		t.Errorf("layer file %s mode %o", h.Name, h.Mode)
	}
}

func TestImportedNames(t *testing.T) {
	t.Parallel()
	// What ctr 2.4.2 printed for two archives (make images' adapter, the sandbox image).
	out := "ghcr.io/metricscale/adapter:v0.1.0      \tsaved\t\n" +
		"application/vnd.docker.distribution.manifest.v2+json sha256:7579b27a3be861f91dab43b760f8a9773fd3110482588d1f63b5d4438fd3e869\n" +
		"Importing\telapsed: 2.0 s\ttotal:   0.0 B\t(0.0 B/s)\t\n" +
		"metricscale.local/sandbox:1             \tsaved\t\n" +
		// as a CI run showed it
		"metricscale.local/e2e probe:1d5948a950f4\tsaved\t\n" +
		"application/vnd.docker.distribution.manifest.v2+json sha256:db82\n" +
		"Importing\telapsed: 0.4 s\ttotal:   0.0 B\t(0.0 B/s)\n"
	if got := importedNames(out); !slices.Equal(got, []string{"ghcr.io/metricscale/adapter:v0.1.0", "metricscale.local/sandbox:1", "metricscale.local/e2e probe:1d5948a950f4"}) {
		t.Errorf("names %q", got)
	}
}

func TestUnescapeMountPath(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{`/a/b`: "/a/b", `/a\040b`: "/a b", `/x\134y`: `/x\y`} {
		if got := unescapeMountPath(in); got != want {
			t.Errorf("%s: %q, want %q", in, got, want)
		}
	}
}

// Each component's Prepare writes its files into a fresh state folder (nothing else makes
// their folders first).
func TestRealNodePrepareOnAFreshFolder(t *testing.T) {
	t.Parallel()
	o := DefaultOptions(filepath.Join(t.TempDir(), "state"))
	o.RealNode = true
	c := newTestCluster(t, true, o)
	c.NodeIP = "192.0.2.9"
	files := map[string]string{
		"containerd": "containerd/config.toml", "kubelet": "kubelet/config.yaml",
		"kube-proxy": "kube-proxy/config.yaml", "coredns": "coredns/Corefile",
	}
	for name, file := range files {
		if err := c.component(name).Prepare(context.Background(), c); err != nil {
			t.Fatalf("prepare %s: %v", name, err)
		}
		if _, err := os.Stat(filepath.Join(c.Dir, file)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Every directive of the Corefile is a plugin that build/coredns compiles in (CoreDNS
// refuses a directive it has no plugin for).
func TestCorefilePluginsBuilt(t *testing.T) {
	t.Parallel()
	main, err := os.ReadFile(filepath.Join("build", "coredns", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	c := newTestCluster(t, true, DefaultOptions("/d"))
	c.NodeIP = "192.0.2.9"
	n := 0
	for _, l := range splitLines(c.corefile()) {
		// The server block's directives are indented by four spaces; their options by more.
		if !strings.HasPrefix(l, "    ") || strings.HasPrefix(l, "     ") || strings.TrimSpace(l) == "}" {
			continue
		}
		n++
		directive := strings.Fields(l)[0]
		if !strings.Contains(string(main), `"github.com/coredns/coredns/plugin/`+directive+`"`) {
			t.Errorf("the Corefile uses %s, which build/coredns does not import", directive)
		}
	}
	if n < 5 {
		t.Errorf("only %d directives found in:\n%s", n, c.corefile())
	}
}

// killContainers acts on the task IDs ctr prints, not on the warning it writes to standard
// error at every call on a cgroup v1 host.
func TestKillContainersReadsOnlyStandardOutput(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, true, DefaultOptions(""))
	if err := os.MkdirAll(c.Bin, 0o755); err != nil {
		t.Fatal(err)
	}
	calls := filepath.Join(t.TempDir(), "calls")
	script := `#!/bin/sh
echo 'time="x" level=warning msg="DEPRECATION: The support for cgroup v1 is deprecated"' >&2
shift 4
echo "$*" >> ` + calls + `
if [ "$1 $2" = "tasks list" ]; then printf 'alpha\nbeta\n'; fi
`
	if err := os.WriteFile(filepath.Join(c.Bin, "ctr"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	c.killContainers(context.Background())
	got, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	want := "tasks list --quiet\ntasks kill --signal SIGKILL alpha\ntasks kill --signal SIGKILL beta\ntasks delete alpha\ntasks delete beta\n"
	if string(got) != want {
		t.Errorf("ctr calls:\n%s\nwant:\n%s", got, want)
	}
}
