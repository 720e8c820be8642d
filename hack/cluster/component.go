package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Component is one process of the cluster: how up decides to run it, starts it and
// waits for it, and how status checks it. A new process (a kubelet, containerd) is one
// more value in components().
type Component struct {
	Name  string
	Ports []int // what it listens on: up checks them free, status shows them
	// Enabled tells whether up runs it, from the cluster's options.
	Enabled func(c *Cluster) bool
	// Binary is its executable; Args and Env (KEY=value, added to up's) what it runs with.
	Binary func(c *Cluster) string
	Args   func(c *Cluster) []string
	Env    func(c *Cluster) []string
	// Prepare makes its folders and files; it runs before each start and is idempotent.
	Prepare func(ctx context.Context, c *Cluster) error
	// Health is one quick check that it serves (status).
	Health func(ctx context.Context, c *Cluster) error
	// Ready is what up waits for, for at most ReadyTimeout (nil: Health), and ReadyWhat
	// names it in messages.
	Ready        func(ctx context.Context, c *Cluster) error
	ReadyTimeout time.Duration
	ReadyWhat    string
	// BeforeStop and AfterStop, when set, clean up around down's stop of it (the real
	// node's containers, kube-proxy's rules).
	BeforeStop, AfterStop func(c *Cluster, ctx context.Context)
}

func (comp *Component) ready(ctx context.Context, c *Cluster) error {
	if comp.Ready != nil {
		return comp.Ready(ctx, c)
	}
	return comp.Health(ctx, c)
}

func always(*Cluster) bool { return true }

func probeURL(url string, mode tlsMode) func(context.Context, *Cluster) error {
	return func(ctx context.Context, c *Cluster) error {
		_, err := c.probe(ctx, url, mode)
		return err
	}
}

func local(port int, path string) string { return "http://127.0.0.1:" + strconv.Itoa(port) + path }
func secure(port int, path string) string {
	return "https://127.0.0.1:" + strconv.Itoa(port) + path
}

func mkdirs(dirs ...func(c *Cluster) string) func(context.Context, *Cluster) error {
	return func(_ context.Context, c *Cluster) error {
		for _, d := range dirs {
			if err := os.MkdirAll(d(c), 0o755); err != nil {
				return err
			}
		}
		return nil
	}
}

func inDir(parts ...string) func(c *Cluster) string {
	return func(c *Cluster) string { return filepath.Join(append([]string{c.Dir}, parts...)...) }
}

func cached(name string) func(c *Cluster) string {
	return func(c *Cluster) string { return filepath.Join(c.Bin, name) }
}

// flags builds --name=value arguments.
func flags(kv ...string) []string {
	out := make([]string, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, "--"+kv[i]+"="+kv[i+1])
	}
	return out
}

// components lists every component up may run: status lists them in this order, down
// stops them in the reverse one. (up starts Prometheus first, to become ready while the
// others start, and the exporter once kube-apiserver serves.)
func components() []*Component {
	kubeconfig := func(name string) func(c *Cluster) []string {
		return func(c *Cluster) []string {
			kc := filepath.Join(c.Dir, "kubeconfigs", name+".kubeconfig")
			return flags("kubeconfig", kc, "authentication-kubeconfig", kc, "authorization-kubeconfig", kc)
		}
	}
	all := []*Component{{
		Name: "etcd", Ports: []int{EtcdPort, EtcdPeerPort}, Enabled: always, Binary: cached("etcd"),
		Args: func(c *Cluster) []string {
			client, peer := local(EtcdPort, ""), local(EtcdPeerPort, "")
			return append(flags("name", "metricscale", "data-dir", filepath.Join(c.Dir, "etcd"),
				"listen-client-urls", client, "advertise-client-urls", client,
				"listen-peer-urls", peer, "initial-advertise-peer-urls", peer,
				"initial-cluster", "metricscale="+peer, "initial-cluster-state", "new"),
				"--unsafe-no-fsync", "--log-level=warn")
		},
		Health:       probeURL(local(EtcdPort, "/health"), plainHTTP),
		ReadyTimeout: 30 * time.Second, ReadyWhat: "healthy",
	}, {
		Name: "kube-apiserver", Ports: []int{APIServerPort}, Enabled: always, Binary: cached("kube-apiserver"),
		Prepare: mkdirs(inDir("kube-apiserver")),
		Args: func(c *Cluster) []string {
			bind, advertise, reconciler, cert, authz := "127.0.0.1", "127.0.0.1", "none", "apiserver", "RBAC"
			if c.RealNode {
				// Pods reach it through the kubernetes Service: it listens on the host's
				// address too and publishes that address as the Service's endpoint; the
				// kubelet's credentials are a node's (Node authorizer, NodeRestriction).
				bind, advertise, reconciler, cert, authz = "0.0.0.0", c.NodeIP, "lease", "apiserver-realnode", "Node,RBAC"
			}
			var extra []string
			if c.RealNode {
				extra = []string{"--enable-admission-plugins=NodeRestriction"}
			}
			return append(append(flags("etcd-servers", local(EtcdPort, ""),
				"bind-address", bind, "secure-port", strconv.Itoa(APIServerPort), "advertise-address", advertise,
				"cert-dir", filepath.Join(c.Dir, "kube-apiserver"),
				"endpoint-reconciler-type", reconciler, "service-cluster-ip-range", "10.0.0.0/24",
				"tls-cert-file", c.pki(cert+".crt"), "tls-private-key-file", c.pki(cert+".key"),
				"client-ca-file", c.pki("ca.crt"), "authorization-mode", authz, "allow-privileged", "true",
				"service-account-issuer", "https://kubernetes.default.svc.cluster.local",
				"service-account-key-file", c.pki("sa.pub"), "service-account-signing-key-file", c.pki("sa.key"),
				"requestheader-client-ca-file", c.pki("front-proxy-ca.crt"), "requestheader-allowed-names", "front-proxy-client",
				"requestheader-extra-headers-prefix", "X-Remote-Extra-", "requestheader-group-headers", "X-Remote-Group",
				"requestheader-username-headers", "X-Remote-User",
				"proxy-client-cert-file", c.pki("front-proxy-client.crt"), "proxy-client-key-file", c.pki("front-proxy-client.key"),
				"kubelet-client-certificate", c.pki("apiserver-kubelet-client.crt"), "kubelet-client-key", c.pki("apiserver-kubelet-client.key"),
				"kubelet-preferred-address-types", "InternalIP", "profiling", "false"), extra...), "--v=1")
		},
		Health:       probeURL(secure(APIServerPort, "/readyz"), adminTLS),
		ReadyTimeout: 120 * time.Second, ReadyWhat: "ready",
	}, {
		Name: "kube-controller-manager", Ports: []int{KCMPort}, Enabled: always, Binary: cached("kube-controller-manager"),
		Prepare: mkdirs(inDir("kube-controller-manager", "flexvolume")),
		Args: func(c *Cluster) []string {
			controllers := "*"
			if c.HPAController != HPAOn {
				controllers = "*,-horizontalpodautoscaling"
			}
			return append(append(kubeconfig("kube-controller-manager")(c), flags(
				"bind-address", "127.0.0.1", "secure-port", strconv.Itoa(KCMPort), "cert-dir", filepath.Join(c.Dir, "kube-controller-manager"),
				"leader-elect", "false", "controllers", controllers, "use-service-account-credentials", "true",
				"service-account-private-key-file", c.pki("sa.key"), "root-ca-file", c.pki("ca.crt"),
				"cluster-signing-cert-file", c.pki("ca.crt"), "cluster-signing-key-file", c.pki("ca.key"),
				"flex-volume-plugin-dir", filepath.Join(c.Dir, "kube-controller-manager", "flexvolume"),
				"horizontal-pod-autoscaler-sync-period", c.HPASyncPeriod,
				"kube-api-qps", "100", "kube-api-burst", "200", "profiling", "false")...), "--v=1")
		},
		Health:       probeURL(secure(KCMPort, "/healthz"), insecureTLS),
		ReadyTimeout: 60 * time.Second, ReadyWhat: "healthy",
	}, {
		// The HPA controller alone, as a cluster would run it: leader-elected, on its own lease.
		Name: "kube-controller-manager-hpa", Ports: []int{KCMHPAPort}, Binary: cached("kube-controller-manager"),
		Enabled: func(c *Cluster) bool { return c.HPAController == HPASeparate },
		Prepare: mkdirs(inDir("kube-controller-manager-hpa")),
		Args: func(c *Cluster) []string {
			return append(append(kubeconfig("kube-controller-manager")(c), flags(
				"bind-address", "127.0.0.1", "secure-port", strconv.Itoa(KCMHPAPort), "cert-dir", filepath.Join(c.Dir, "kube-controller-manager-hpa"),
				"leader-elect", "true", "leader-elect-resource-name", "kube-controller-manager-hpa",
				"controllers", "horizontalpodautoscaling", "use-service-account-credentials", "true",
				"horizontal-pod-autoscaler-sync-period", c.HPASyncPeriod,
				"kube-api-qps", "100", "kube-api-burst", "200", "profiling", "true")...), "--v=1")
		},
		Health:       probeURL(secure(KCMHPAPort, "/healthz"), insecureTLS),
		ReadyTimeout: 60 * time.Second, ReadyWhat: "healthy",
	}, {
		Name: "kube-scheduler", Ports: []int{SchedulerPort}, Enabled: always, Binary: cached("kube-scheduler"),
		Prepare: mkdirs(inDir("kube-scheduler")),
		Args: func(c *Cluster) []string {
			return append(append(kubeconfig("kube-scheduler")(c), flags(
				"bind-address", "127.0.0.1", "secure-port", strconv.Itoa(SchedulerPort), "cert-dir", filepath.Join(c.Dir, "kube-scheduler"),
				"leader-elect", "false", "kube-api-qps", "100", "kube-api-burst", "200", "profiling", "false")...), "--v=1")
		},
		Health:       probeURL(secure(SchedulerPort, "/healthz"), insecureTLS),
		ReadyTimeout: 60 * time.Second, ReadyWhat: "healthy",
	}, {
		Name: "kwok", Ports: []int{KwokPort}, Enabled: always, Binary: cached("kwok"),
		Prepare: mkdirs(inDir("kwok")),
		// KWOK_WORKDIR keeps kwok away from ~/.kwok (it would also load ~/.kwok/kwok.yaml).
		Env: func(c *Cluster) []string { return []string{"KWOK_WORKDIR=" + filepath.Join(c.Dir, "kwok")} },
		Args: func(c *Cluster) []string {
			config := filepath.Join(c.CacheDir, "kwok.yaml")
			if !c.PodStages {
				config = filepath.Join(c.CacheDir, "kwok-nodes.yaml")
			}
			return flags("kubeconfig", filepath.Join(c.Dir, "kubeconfigs", "kwok.kubeconfig"), "config", config,
				"manage-all-nodes", "false", "manage-nodes-with-annotation-selector", "kwok.x-k8s.io/node=fake",
				"manage-nodes-with-label-selector", "", "cidr", "10.244.0.0/16",
				"node-ip", "127.0.0.1", "node-port", strconv.Itoa(KwokPort), "server-address", "127.0.0.1:"+strconv.Itoa(KwokPort),
				"tls-cert-file", c.pki("kubelet.crt"), "tls-private-key-file", c.pki("kubelet.key"),
				"node-lease-duration-seconds", "40")
		},
		Health:       probeURL(secure(KwokPort, "/healthz"), insecureTLS),
		ReadyTimeout: 30 * time.Second, ReadyWhat: "healthy",
	}, {
		// kwok serves no resource metrics without its pod stages: no metrics-server then.
		Name: "metrics-server", Ports: []int{MetricsServerPort}, Binary: cached("metrics-server"),
		Enabled: func(c *Cluster) bool { return c.PodStages },
		Prepare: mkdirs(inDir("metrics-server")),
		Args: func(c *Cluster) []string {
			return append(append(kubeconfig("metrics-server")(c), flags(
				"bind-address", "127.0.0.1", "secure-port", strconv.Itoa(MetricsServerPort), "cert-dir", filepath.Join(c.Dir, "metrics-server"))...),
				"--kubelet-insecure-tls", "--kubelet-use-node-status-port", "--kubelet-preferred-address-types=InternalIP",
				"--metric-resolution=10s", "--kubelet-request-timeout=5s", "--v=1")
		},
		Health: probeURL(secure(MetricsServerPort, "/readyz"), insecureTLS),
		// Ready only after its first scrape of the nodes (--metric-resolution): up waits until live.
		Ready:        probeURL(secure(MetricsServerPort, "/livez"), insecureTLS),
		ReadyTimeout: 60 * time.Second, ReadyWhat: "live",
	}, {
		Name: "metricscale-adapter", Ports: []int{AdapterPort, PushPort}, Binary: inDir("bin", "metricscale-adapter"),
		Enabled: func(c *Cluster) bool { return c.withAdapter() },
		// No pod runs the adapter here: it names one, so its config reload events (which the
		// API server accepts for a pod that does not exist) are emitted with its real RBAC.
		Env: func(*Cluster) []string {
			return []string{"POD_NAMESPACE=metricscale", "POD_NAME=metricscale-adapter-local"}
		},
		Prepare: mkdirs(inDir("adapter")),
		Args: func(c *Cluster) []string {
			kc := filepath.Join(c.Dir, "kubeconfigs", "metricscale-adapter.kubeconfig")
			args := flags("secure-port", strconv.Itoa(AdapterPort), "bind-address", "127.0.0.1", "cert-dir", filepath.Join(c.Dir, "adapter"),
				"kubeconfig", kc, "authentication-kubeconfig", kc, "authorization-kubeconfig", kc)
			if c.Prometheus {
				args = append(args, "--config="+filepath.Join(c.Dir, "adapter", "config.yaml"))
			}
			return append(append(args, flags("push-bind-address", "127.0.0.1", "push-port", strconv.Itoa(PushPort),
				"push-token-file", filepath.Join(c.Dir, "push-token"))...), "-v=2")
		},
		Health:       probeURL(secure(AdapterPort, "/healthz"), insecureTLS),
		ReadyTimeout: 90 * time.Second, ReadyWhat: "healthy",
	}, {
		Name: "metricscale-autoscaler", Ports: []int{AutoscalerPort, AutoscalerRecPort}, Binary: inDir("bin", "metricscale-autoscaler"),
		Enabled: func(c *Cluster) bool { return c.withAutoscaler() },
		Prepare: mkdirs(inDir("autoscaler")),
		Args:    autoscalerArgs,
		// Its probes are open to anyone over HTTPS, like kube-controller-manager's.
		Health: probeURL(secure(AutoscalerPort, "/readyz"), insecureTLS),
		// Its record port is only served with --record.
		ReadyTimeout: 60 * time.Second, ReadyWhat: "healthy",
	}, {
		// The exporter watches pods and nodes: it starts once kube-apiserver serves.
		Name: "exporter", Ports: []int{ExporterPort}, Binary: inDir("bin", "exporter"),
		Enabled: func(c *Cluster) bool { return c.Prometheus },
		Args: func(c *Cluster) []string {
			return flags("listen", "127.0.0.1:"+strconv.Itoa(ExporterPort), "kubeconfig", c.Kubeconfig())
		},
		Health:       probeURL(local(ExporterPort, "/healthz"), plainHTTP),
		ReadyTimeout: 30 * time.Second, ReadyWhat: "healthy",
	}, {
		Name: "prometheus", Ports: []int{PrometheusPort}, Binary: func(c *Cluster) string { return c.PrometheusBin },
		Enabled: func(c *Cluster) bool { return c.Prometheus },
		Prepare: func(_ context.Context, c *Cluster) error { return c.writePrometheusConfig() },
		Args: func(c *Cluster) []string {
			dir := filepath.Join(c.Dir, "prometheus")
			return flags("config.file", filepath.Join(dir, "prometheus.yml"), "storage.tsdb.path", filepath.Join(dir, "data"),
				"storage.tsdb.retention.time", "2h", "web.listen-address", "127.0.0.1:"+strconv.Itoa(PrometheusPort), "log.level", "info")
		},
		Health:       probeURL(local(PrometheusPort, "/-/ready"), plainHTTP),
		ReadyTimeout: 60 * time.Second, ReadyWhat: "ready",
	}}
	// The real node's processes come after kwok: up starts them after the fake nodes, down
	// stops them before kube-scheduler and kube-controller-manager.
	for i, comp := range all {
		if comp.Name == "kwok" {
			return append(all[:i+1], append(realNodeComponents(), all[i+1:]...)...)
		}
	}
	return all
}

func autoscalerArgs(c *Cluster) []string {
	dir := filepath.Join(c.Dir, "autoscaler")
	args := flags("kubeconfig", filepath.Join(c.Dir, "kubeconfigs", "metricscale-autoscaler.kubeconfig"),
		"bind-address", "127.0.0.1:"+strconv.Itoa(AutoscalerPort), "leader-elect", "true", "leader-elect-namespace", "metricscale")
	args = append(args, "--profiling")
	// Without kube-controller-manager's HPA controller, ours reconciles the native HPAs too.
	if c.HPAController == HPAOff {
		args = append(args, "--hpa-objects", "--hpa-sync-period="+c.HPASyncPeriod)
	}
	// The adapter's change feed, on its secure port, whose certificate the adapter generated
	// (apiserver.crt holds it and its CA); the autoscaler's ServiceAccount token authenticates.
	if c.ChangeFeedURL != "none" {
		args = append(args, "--change-feed-url="+orDefault(c.ChangeFeedURL, secure(AdapterPort, "")),
			"--change-feed-ca-file="+filepath.Join(c.Dir, "adapter", "apiserver.crt"))
	}
	// --record serves recordings on 127.0.0.1:6449 with a certificate kept in dir (record.crt
	// is its own CA: autoscaler record --certificate-authority); --no-record runs the
	// autoscaler as shipped (recording off), for the controller benchmark.
	if c.Record {
		args = append(args, "--record", "--secure-bind-address=127.0.0.1:"+strconv.Itoa(AutoscalerRecPort), "--cert-dir="+dir)
	}
	return append(args, "-v=2")
}

// component returns the component called name.
func (c *Cluster) component(name string) *Component {
	for _, comp := range c.catalog {
		if comp.Name == name {
			return comp
		}
	}
	return nil
}

// componentNames lists every component's name, in order.
func (c *Cluster) componentNames() []string {
	var names []string
	for _, comp := range c.catalog {
		names = append(names, comp.Name)
	}
	return names
}

// selected lists the names of the components up runs with the cluster's options, in order.
func (c *Cluster) selected() []string {
	var names []string
	for _, comp := range c.catalog {
		if comp.Enabled(c) {
			names = append(names, comp.Name)
		}
	}
	return names
}

// withAdapter: the adapter runs unless --kubernetes-only (and when the checkout has one).
func (c *Cluster) withAdapter() bool {
	return !c.KubernetesOnly && fileExists(filepath.Join(c.RepoRoot, "cmd", "adapter", "main.go"))
}

// withAutoscaler: the autoscaler reads the adapter's APIs: it runs when the adapter does.
func (c *Cluster) withAutoscaler() bool {
	return c.withAdapter() && fileExists(filepath.Join(c.RepoRoot, "cmd", "autoscaler", "main.go")) &&
		fileExists(filepath.Join(c.RepoRoot, "manifests", "autoscaler", "crd.yaml"))
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// portsOf formats a component's ports for status.
func (c *Cluster) portsOf(name string) string {
	comp := c.component(name)
	if comp == nil {
		return "-"
	}
	var ps []string
	for _, p := range comp.Ports {
		ps = append(ps, strconv.Itoa(p))
	}
	return strings.Join(ps, ",")
}

// startComponent prepares and starts one component; it does not wait.
func (c *Cluster) startComponent(ctx context.Context, name string) error {
	comp := c.component(name)
	if comp == nil {
		return fmt.Errorf("unknown component %q", name)
	}
	if comp.Prepare != nil {
		if err := comp.Prepare(ctx, c); err != nil {
			return fmt.Errorf("prepare %s: %w", name, err)
		}
	}
	var env []string
	if comp.Env != nil {
		env = comp.Env(c)
	}
	if _, err := c.spawn(name, comp.Binary(c), comp.Args(c), env); err != nil {
		return err
	}
	c.started = appendUnique(c.started, name)
	return nil
}

// waitReady waits until the component is ready (see waitFor).
func (c *Cluster) waitReady(ctx context.Context, name string) error {
	comp := c.component(name)
	return c.waitFor(ctx, name, comp.ReadyTimeout, comp.ReadyWhat, func(ctx context.Context) error { return comp.ready(ctx, c) })
}

// waitFor polls check until it succeeds, for at most timeout, on behalf of component name.
// A component this Cluster started that exits meanwhile is started once more, with the
// reason (exit code or signal) printed; the second time, up fails with it.
func (c *Cluster) waitFor(ctx context.Context, name string, timeout time.Duration, what string, check func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		for _, n := range c.started {
			p := c.procs[n]
			if p == nil {
				continue
			}
			reason := p.exited()
			if reason == "" {
				continue
			}
			msg := fmt.Sprintf("%s %s while waiting for %s to become %s", n, reason, name, what)
			if c.retried[n] {
				return c.errComponent(n, msg+", after it was started once more")
			}
			c.retried[n] = true
			c.warnf("%s; starting it once more", msg)
			c.logTail(n)
			// spawn truncates the log: keep the failed run's.
			_ = os.Rename(c.logFile(n), filepath.Join(c.Dir, "logs", n+".failed.log"))
			delete(c.procs, n)
			if err := c.startComponent(ctx, n); err != nil {
				return err
			}
			deadline = time.Now().Add(timeout)
		}
		if p := c.procs[name]; p == nil && fileExists(c.pidFile(name)) && !c.Alive(name) {
			// Not ours to reap (another process started it): its status is unknown.
			return c.errComponent(name, fmt.Sprintf("%s exited while waiting for it to become %s", name, what))
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(c.Err, "last check said: %s\n", lastLines(err.Error(), 3))
			return c.errComponent(name, fmt.Sprintf("%s did not become %s within %s", name, what, timeout))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func appendUnique(list []string, s string) []string {
	for _, v := range list {
		if v == s {
			return list
		}
	}
	return append(list, s)
}
