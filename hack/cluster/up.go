package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Up builds what the cluster's options need, starts the components in order and waits
// until each serves; a cluster already running is left as it is. On failure it stops
// what it started (unless METRICSCALE_KEEP_ON_FAILURE=1) and removes the state file.
func (c *Cluster) Up(ctx context.Context) (err error) {
	c.upStart = time.Now()
	for _, d := range []string{c.Dir, filepath.Join(c.Dir, "run"), filepath.Join(c.Dir, "logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	unlock, err := lockFile(ctx, filepath.Join(c.Dir, ".lock"), 30*time.Minute)
	if err != nil {
		return err
	}
	defer unlock()

	switch state, _ := c.state(); state {
	case "running":
		return c.upAlreadyRunning()
	case "partial":
		hint := ""
		if os.Getenv("METRICSCALE_CLUSTER_DIR") == "" {
			hint = " --dir " + shellQuote(c.Dir)
		}
		return fmt.Errorf("the cluster in %s is partly running (not running: %s); run 'hack/cluster.sh down%s' first, then 'up' again",
			c.Dir, strings.Join(c.deadComponents(), " "), hint)
	}
	defer func() {
		if err != nil {
			c.cleanUpFailedUp(ctx)
		}
	}()

	yes := func() bool { return true }
	steps := []struct {
		run  func(context.Context) error
		when func() bool
	}{
		{c.upBuild, yes},
		{c.upPKI, yes},
		{c.upPrometheus, func() bool { return c.Prometheus }},
		{c.upEtcd, yes},
		{c.upAPIServer, yes},
		{c.upControllers, yes},
		{c.upKwok, yes},
		{c.upRealNode, func() bool { return c.RealNode }},
		{c.upMetricsServer, func() bool { return c.PodStages }},
		{c.upUsable, yes},
		{c.upKEDA, func() bool { return c.KEDA }},
		// upPKI chose the backends.
		{c.upBackends, func() bool { return len(c.running) > 0 }},
		{c.upScrape, func() bool { return c.Prometheus }},
		{c.upAdapter, c.withAdapter},
		{c.upAutoscaler, c.withAutoscaler},
		{c.upScraper, func() bool { return c.Prometheus && c.withAdapter() }},
	}
	for _, s := range steps {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !s.when() {
			continue
		}
		if err := s.run(ctx); err != nil {
			return err
		}
	}
	total := secs(time.Since(c.upStart))
	c.logf("")
	c.logf("%scluster is up%s in %s (state folder %s)", c.green, c.reset, total, c.Dir)
	for _, p := range c.phaseName {
		c.logf("    %s", p)
	}
	c.logf("    %-42s %8s", "total", total)
	c.logf("")
	c.logf("use it with:  eval \"$(hack/cluster.sh env)\"   (KUBECONFIG=%s)", c.Kubeconfig())
	return nil
}

func (c *Cluster) upAlreadyRunning() error {
	st, _ := ReadState(c.Dir)
	c.logf("cluster already running in %s (started %s; components: %s)", c.Dir, st.StartedAt, strings.Join(st.Components, " "))
	// Flags given now that the running cluster does not match: say so, change nothing.
	var differs []string
	o := c.Options
	if o.Explicit("nodes") && st.Nodes != strconv.Itoa(o.Nodes) {
		differs = append(differs, fmt.Sprintf("it runs %s node(s), not %d", st.Nodes, o.Nodes))
	}
	if o.Explicit("hpa-sync-period") && st.HPASyncPeriod != o.HPASyncPeriod {
		differs = append(differs, fmt.Sprintf("its HPA sync period is %s, not %s", st.HPASyncPeriod, o.HPASyncPeriod))
	}
	if o.Explicit("no-hpa-controller") && st.HPAController != HPAOff {
		differs = append(differs, "it runs the HPA controller")
	}
	if o.Explicit("separate-hpa-controller") && st.HPAController != HPASeparate {
		differs = append(differs, "it does not run the HPA controller in a kube-controller-manager of its own")
	}
	if o.Explicit("kubernetes-only") && st.KubernetesOnly == "false" {
		differs = append(differs, "it runs the metricscale components too")
	}
	if o.Explicit("no-prometheus") && st.Prometheus == "true" {
		differs = append(differs, "it runs Prometheus")
	}
	if o.Explicit("no-pod-stages") && orDefault(st.PodStages, "true") == "true" {
		differs = append(differs, "its kwok runs pod stages")
	}
	if o.Explicit("real-node") && st.RealNode != "true" {
		differs = append(differs, "it runs no real node")
	}
	if o.Explicit("keda") && !contains(st.Components, "keda-operator") {
		differs = append(differs, "it runs no KEDA")
	}
	if o.Explicit("keda-api-qps") && st.KEDAAPIQPS != kedaAPIQPSState(o) {
		differs = append(differs, fmt.Sprintf("its KEDA runs with --keda-api-qps %s", orDefault(st.KEDAAPIQPS, "unset (KEDA's defaults)")))
	}
	if o.Explicit("backends") {
		for _, b := range o.BackendNames {
			if !contains(st.Backends, b) {
				differs = append(differs, fmt.Sprintf("it runs no %s backend", b))
			}
		}
	}
	if c.paused("prometheus") {
		c.warnf("its Prometheus is stopped (hack/cluster.sh stop-prometheus); start it again with: hack/cluster.sh start-prometheus")
	}
	for _, d := range differs {
		c.warnf("%s; run 'hack/cluster.sh down' first to change that", d)
	}
	if st.RepoRoot != "" && st.RepoRoot != c.RepoRoot && strings.Contains(strings.Join(st.Components, " "), "metricscale-") {
		c.warnf("its metricscale components were built from another checkout (%s), not %s", st.RepoRoot, c.RepoRoot)
	}
	c.logf("KUBECONFIG=%s", c.Kubeconfig())
	return nil
}

// cleanUpFailedUp stops what a failed or interrupted up started and removes the state file.
func (c *Cluster) cleanUpFailedUp(ctx context.Context) {
	if len(c.started) > 0 && os.Getenv("METRICSCALE_KEEP_ON_FAILURE") == "1" {
		c.warnf("up failed; METRICSCALE_KEEP_ON_FAILURE=1 so the started components stay up (stop them with: hack/cluster.sh down --dir %s)", c.Dir)
		return
	}
	if len(c.started) > 0 {
		if ctx.Err() != nil {
			c.warnf("up was interrupted; stopping the components it started (logs stay in %s)", filepath.Join(c.Dir, "logs"))
		} else {
			c.warnf("up failed; stopping the components it started (logs stay in %s)", filepath.Join(c.Dir, "logs"))
		}
		// ctx may be the interrupted one: the stops get their own.
		stopCtx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for i := len(c.started) - 1; i >= 0; i-- {
			if err := c.stopComponent(stopCtx, c.started[i]); err != nil {
				c.warnf("%v", err)
			}
		}
		if c.RealNode {
			c.cleanUpRealNode()
		}
		// The backends up started (their servers are not components: each backend stops its own).
		for _, b := range c.backends(c.running) {
			_ = b.Stop(stopCtx, c.Dir)
		}
	}
	_ = os.Remove(stateFile(c.Dir))
}

// ---------------------------------------------------------------- the steps of up

func (c *Cluster) upBuild(ctx context.Context) error {
	c.phaseBegin("build binaries (cache: " + c.Bin + ")")
	if err := os.MkdirAll(c.CacheDir, 0o755); err != nil {
		return err
	}
	if c.Prometheus {
		if err := c.InstallPrometheus(ctx); err != nil {
			return err
		}
	}
	if err := c.Build(ctx, c.neededModules()...); err != nil {
		return err
	}
	exporterDone := make(chan error, 1)
	if c.Prometheus {
		c.logf("    building exporter from the working tree (./hack/exporter), next to the other builds")
		go func() { exporterDone <- c.buildWorkTree(ctx, "./hack/exporter", "exporter", "exporter") }()
	} else {
		exporterDone <- nil
	}
	if c.withAdapter() {
		c.logf("    building metricscale-adapter from the working tree (./cmd/adapter)")
		if err := c.buildWorkTree(ctx, "./cmd/adapter", "metricscale-adapter", "adapter"); err != nil {
			<-exporterDone
			return err
		}
	}
	if c.withAutoscaler() {
		c.logf("    building metricscale-autoscaler from the working tree (./cmd/autoscaler)")
		if err := c.buildWorkTree(ctx, "./cmd/autoscaler", "metricscale-autoscaler", "autoscaler"); err != nil {
			<-exporterDone
			return err
		}
	}
	if err := <-exporterDone; err != nil {
		return err
	}
	c.phaseEnd("build")
	return nil
}

func (c *Cluster) upPKI(ctx context.Context) error {
	c.phaseBegin("check ports, write PKI and kubeconfigs")
	var ports []int
	for _, name := range c.selected() {
		ports = append(ports, c.component(name).Ports...)
	}
	if busy := busyPorts(ports); len(busy) > 0 {
		var list []string
		for _, p := range busy {
			list = append(list, strconv.Itoa(p))
		}
		fmt.Fprintf(c.Err, "port(s) needed by the cluster are in use on this machine: %s\n", strings.Join(list, " "))
		for _, p := range list {
			if out, err := run(ctx, "", nil, nil, "ss", "-Hltnp", "sport = :"+p); err == nil {
				for _, l := range splitLines(out) {
					fmt.Fprintf(c.Err, "    %s\n", l)
				}
			}
		}
		fmt.Fprintln(c.Err, "stop whatever listens there (or 'hack/cluster.sh down --dir DIR' for another state folder) and retry")
		return fmt.Errorf("cannot start the cluster: port(s) %s in use", strings.Join(list, " "))
	}
	if _, err := c.clusterutil(ctx, "pki", "-dir", filepath.Join(c.Dir, "pki")); err != nil {
		return fmt.Errorf("writing the PKI to %s failed: %w", filepath.Join(c.Dir, "pki"), err)
	}
	server := secure(APIServerPort, "")
	if _, err := c.clusterutil(ctx, "kubeconfig", "-out", c.Kubeconfig(), "-server", server, "-ca", c.pki("ca.crt"),
		"-cert", c.pki("admin.crt"), "-key", c.pki("admin.key"), "-user", "admin"); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(c.Dir, "kubeconfigs"), 0o755); err != nil {
		return err
	}
	for _, n := range []string{"kube-controller-manager", "kube-scheduler", "kwok", "metrics-server"} {
		if _, err := c.clusterutil(ctx, "kubeconfig", "-out", filepath.Join(c.Dir, "kubeconfigs", n+".kubeconfig"), "-server", server,
			"-ca", c.pki("ca.crt"), "-cert", c.pki(n+".crt"), "-key", c.pki(n+".key"), "-user", n); err != nil {
			return err
		}
	}
	if c.RealNode {
		ip, err := HostIP()
		if err != nil {
			return fmt.Errorf("the real node needs the host's address: %w", err)
		}
		c.NodeIP = ip
		if err := c.realNodePKI(ctx); err != nil {
			return err
		}
	}
	c.phaseEnd("ports, PKI, kubeconfigs")
	// The queue backends feed the adapter's config, which exists only with Prometheus.
	if c.Backends && c.Prometheus && c.withAdapter() {
		names, err := c.backendNames()
		if err != nil {
			return err
		}
		c.running = names
	}
	// The state is written before anything starts, so that down finds what a failed or
	// interrupted up left behind.
	return writeState(c.Dir, &State{
		Version: c.KubeVersion, Nodes: strconv.Itoa(c.Nodes), HPASyncPeriod: c.HPASyncPeriod,
		HPAController: c.HPAController, KubernetesOnly: strconv.FormatBool(c.KubernetesOnly),
		Prometheus: strconv.FormatBool(c.Prometheus), Backends: c.running, Record: strconv.FormatBool(c.Record),
		PodStages: strconv.FormatBool(c.PodStages), Components: c.selected(),
		StartedAt: time.Now().UTC().Format("2006-01-02T15:04:05Z"), RepoRoot: c.RepoRoot,
		RealNode: strconv.FormatBool(c.RealNode), NodeIP: c.NodeIP, KEDAAPIQPS: kedaAPIQPSState(c.Options),
	})
}

// upPrometheus: Prometheus needs nothing else: it starts first and is waited for later.
func (c *Cluster) upPrometheus(ctx context.Context) error {
	c.phaseBegin("start prometheus (ready checked later)")
	if err := os.RemoveAll(filepath.Join(c.Dir, "prometheus")); err != nil {
		return err
	}
	c.prometheusSince = time.Now()
	if err := c.startPrometheus(ctx); err != nil {
		return err
	}
	c.phaseEnd("prometheus started")
	return nil
}

func (c *Cluster) upEtcd(ctx context.Context) error {
	c.phaseBegin("start etcd")
	if err := os.RemoveAll(filepath.Join(c.Dir, "etcd")); err != nil {
		return err
	}
	if err := c.startAndWait(ctx, "etcd"); err != nil {
		return err
	}
	c.phaseEnd("etcd")
	return nil
}

func (c *Cluster) upAPIServer(ctx context.Context) error {
	c.phaseBegin("start kube-apiserver")
	if err := c.startAndWait(ctx, "kube-apiserver"); err != nil {
		return err
	}
	// The exporter watches pods and nodes; it is waited for later.
	if c.Prometheus {
		if err := c.startComponent(ctx, "exporter"); err != nil {
			return err
		}
	}
	c.phaseEnd("kube-apiserver")
	return nil
}

func (c *Cluster) upControllers(ctx context.Context) error {
	c.phaseBegin(fmt.Sprintf("start kube-controller-manager (HPA controller: %s) and kube-scheduler",
		hpaControllerMode(c.HPAController, c.HPASyncPeriod)))
	names := []string{"kube-controller-manager"}
	if c.HPAController == HPASeparate {
		names = append(names, "kube-controller-manager-hpa")
	}
	names = append(names, "kube-scheduler")
	for _, n := range names {
		if err := c.startComponent(ctx, n); err != nil {
			return err
		}
	}
	for _, n := range names {
		if err := c.waitReady(ctx, n); err != nil {
			return err
		}
	}
	c.phaseEnd("kube-controller-manager, kube-scheduler")
	return nil
}

func (c *Cluster) upKwok(ctx context.Context) error {
	c.phaseBegin(fmt.Sprintf("start kwok and create %d fake node(s)", c.Nodes))
	if err := c.startAndWait(ctx, "kwok"); err != nil {
		return err
	}
	var nodes []string
	for i := 0; i < c.Nodes; i++ {
		nodes = append(nodes, nodeYAML(fmt.Sprintf("kwok-node-%d", i)))
	}
	if err := c.apply(ctx, strings.Join(nodes, "---\n")); err != nil {
		return fmt.Errorf("creating the fake nodes failed: %w", err)
	}
	if err := c.waitFor(ctx, "kwok", 60*time.Second, "Ready on all nodes", c.kubectlCheck("wait", "--for=condition=Ready", "node", "--all", "--timeout=5s")); err != nil {
		return err
	}
	c.phaseEnd("kwok, nodes")
	return nil
}

func (c *Cluster) upMetricsServer(ctx context.Context) error {
	c.phaseBegin("start metrics-server and register metrics.k8s.io")
	if err := c.startAndWait(ctx, "metrics-server"); err != nil {
		return err
	}
	manifests := externalNameServiceYAML("kube-system", "metrics-server") +
		apiServiceYAML("v1beta1.metrics.k8s.io", "metrics.k8s.io", "v1beta1", "kube-system", "metrics-server", MetricsServerPort, 100)
	if err := c.apply(ctx, manifests); err != nil {
		return fmt.Errorf("registering metrics.k8s.io failed: %w", err)
	}
	if err := c.waitAPIServices(ctx, "metrics-server", "v1beta1.metrics.k8s.io"); err != nil {
		return err
	}
	c.phaseEnd("metrics-server")
	return nil
}

// upUsable: the cluster is usable once the default ServiceAccount exists.
func (c *Cluster) upUsable(ctx context.Context) error {
	c.phaseBegin("wait until the cluster is usable (default ServiceAccount)")
	if err := c.waitFor(ctx, "kube-controller-manager", 60*time.Second, "done creating the default ServiceAccount",
		c.kubectlCheck("get", "serviceaccount", "default", "--namespace", "default")); err != nil {
		return err
	}
	c.phaseEnd("usable")
	return nil
}

func (c *Cluster) upBackends(ctx context.Context) error {
	c.phaseBegin("start the queue backends (" + strings.Join(c.running, " ") + ")")
	// Install is a no-op when the server is there (it builds kfake when its source changed).
	for _, b := range c.backends(c.running) {
		if err := c.backendAction(ctx, b, "install"); err != nil {
			return err
		}
		if err := c.backendAction(ctx, b, "start"); err != nil {
			return err
		}
	}
	c.phaseEnd("backends")
	return nil
}

func (c *Cluster) upScrape(ctx context.Context) error {
	c.phaseBegin("wait for exporter and prometheus (first scrape)")
	if err := c.waitReady(ctx, "exporter"); err != nil {
		return err
	}
	if err := c.waitPrometheus(ctx, c.prometheusSince); err != nil {
		return err
	}
	c.phaseEnd("exporter, prometheus")
	return nil
}

func (c *Cluster) upAdapter(ctx context.Context) error {
	c.phaseBegin("start metricscale-adapter and register custom/external.metrics.k8s.io")
	if err := c.startAdapter(ctx); err != nil {
		return err
	}
	c.phaseEnd("metricscale-adapter")
	return nil
}

func (c *Cluster) upAutoscaler(ctx context.Context) error {
	c.phaseBegin("start metricscale-autoscaler (MetricAutoscaler CRD, leader election)")
	if err := c.startAutoscaler(ctx); err != nil {
		return err
	}
	c.phaseEnd("metricscale-autoscaler")
	return nil
}

// upScraper gives Prometheus the token it scrapes the adapter and the autoscaler with.
func (c *Cluster) upScraper(ctx context.Context) error {
	c.phaseBegin("prometheus' scraper token (ServiceAccount metricscale-scraper)")
	if err := c.writeScraperToken(ctx); err != nil {
		return err
	}
	c.phaseEnd("scraper token")
	return nil
}

func (c *Cluster) startAndWait(ctx context.Context, name string) error {
	if err := c.startComponent(ctx, name); err != nil {
		return err
	}
	return c.waitReady(ctx, name)
}

// kubectlCheck is a check that runs kubectl.
func (c *Cluster) kubectlCheck(args ...string) func(context.Context) error {
	return func(ctx context.Context) error {
		out, err := c.kubectl(ctx, "", args...)
		if err != nil {
			return fmt.Errorf("%w: %s", err, strings.TrimSpace(out))
		}
		return nil
	}
}

func (c *Cluster) waitAPIServices(ctx context.Context, name string, services ...string) error {
	for _, s := range services {
		if err := c.waitFor(ctx, name, 60*time.Second, "Available as APIService "+s,
			c.kubectlCheck("wait", "--for=condition=Available", "apiservice/"+s, "--timeout=5s")); err != nil {
			return err
		}
	}
	return nil
}

// serviceAccountKubeconfig applies rbac (relative to the checkout) and returns a kubeconfig
// that acts as ServiceAccount ns/sa, so that the component runs with exactly the permissions
// its manifests grant; without that file, the admin kubeconfig.
func (c *Cluster) serviceAccountKubeconfig(ctx context.Context, ns, sa, rbac, dir string) (string, error) {
	if !fileExists(filepath.Join(c.RepoRoot, rbac)) {
		c.logf("    no %s: %s runs with the admin kubeconfig", rbac, sa)
		return c.Kubeconfig(), nil
	}
	c.logf("    applying %s; %s runs as ServiceAccount %s/%s", rbac, sa, ns, sa)
	applog := filepath.Join(c.Dir, "logs", sa+"-rbac.log")
	out, err := c.kubectl(ctx, "", "apply", "-f", filepath.Join(c.RepoRoot, rbac))
	_ = os.WriteFile(applog, []byte(out), 0o644)
	if err != nil {
		fmt.Fprint(c.Err, out)
		return "", fmt.Errorf("applying %s failed: %w", rbac, err)
	}
	return c.serviceAccountToken(ctx, ns, sa, dir)
}

// serviceAccountToken creates ServiceAccount ns/sa if missing, writes a token of it to
// dir/token and returns kubeconfigs/SA.kubeconfig, which presents that token.
func (c *Cluster) serviceAccountToken(ctx context.Context, ns, sa, dir string) (string, error) {
	if _, err := c.kubectl(ctx, "", "-n", ns, "get", "serviceaccount", sa); err != nil {
		if out, err := c.kubectl(ctx, "", "-n", ns, "create", "serviceaccount", sa); err != nil {
			return "", fmt.Errorf("create ServiceAccount %s/%s: %w: %s", ns, sa, err, out)
		}
	}
	token, err := c.kubectlStdout(ctx, "-n", ns, "create", "token", sa, "--duration=24h")
	if err != nil {
		return "", fmt.Errorf("could not create a token for ServiceAccount %s/%s: %w", ns, sa, err)
	}
	tokenFile := filepath.Join(dir, "token")
	if err := writeFileAtomic(tokenFile, []byte(token), 0o600); err != nil {
		return "", err
	}
	kc := filepath.Join(c.Dir, "kubeconfigs", sa+".kubeconfig")
	if _, err := c.clusterutil(ctx, "kubeconfig", "-out", kc, "-server", secure(APIServerPort, ""),
		"-ca", c.pki("ca.crt"), "-token-file", tokenFile, "-user", "system:serviceaccount:"+ns+":"+sa); err != nil {
		return "", err
	}
	return kc, nil
}

// applyFile applies a manifest file of the checkout, appending kubectl's output to logName.
func (c *Cluster) applyFile(ctx context.Context, file, logName string, extra ...string) error {
	out, err := c.kubectl(ctx, "", append(append([]string{"apply"}, extra...), "-f", filepath.Join(c.RepoRoot, file))...)
	logPath := filepath.Join(c.Dir, "logs", logName)
	if f, ferr := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); ferr == nil {
		_, _ = f.WriteString(out)
		f.Close()
	}
	if err != nil {
		return fmt.Errorf("applying %s failed (see %s): %w", file, logPath, err)
	}
	return nil
}

func (c *Cluster) startAdapter(ctx context.Context) error {
	dir := filepath.Join(c.Dir, "adapter")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	pushToken := filepath.Join(c.Dir, "push-token")
	if st, err := os.Stat(pushToken); err != nil || st.Size() == 0 {
		token, err := c.clusterutil(ctx, "token")
		if err != nil {
			return err
		}
		if err := writeFileAtomic(pushToken, []byte(token), 0o600); err != nil {
			return err
		}
	}
	const ns, sa = "metricscale", "metricscale-adapter"
	if err := c.apply(ctx, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+"\n"); err != nil {
		return fmt.Errorf("creating namespace %s failed: %w", ns, err)
	}
	kc, err := c.serviceAccountKubeconfig(ctx, ns, sa, "manifests/adapter/rbac.yaml", dir)
	if err != nil {
		return err
	}
	// The component reads its kubeconfig from kubeconfigs/metricscale-adapter.kubeconfig.
	if want := filepath.Join(c.Dir, "kubeconfigs", sa+".kubeconfig"); kc != want {
		if err := copyFile(kc, want); err != nil {
			return err
		}
	}
	if c.Prometheus {
		// hack/adapter-config.yaml serves metrics.k8s.io: the adapter also watches nodes.
		if err := c.applyFile(ctx, "manifests/metrics-api/rbac.yaml", sa+"-rbac.log"); err != nil {
			return err
		}
		if err := c.writeAdapterConfig(); err != nil {
			return err
		}
	}
	if err := c.startAndWait(ctx, "metricscale-adapter"); err != nil {
		return err
	}
	manifests := externalNameServiceYAML(ns, "metricscale-adapter") +
		apiServiceYAML("v1beta2.custom.metrics.k8s.io", "custom.metrics.k8s.io", "v1beta2", ns, "metricscale-adapter", AdapterPort, 200) +
		apiServiceYAML("v1beta1.custom.metrics.k8s.io", "custom.metrics.k8s.io", "v1beta1", ns, "metricscale-adapter", AdapterPort, 100) +
		apiServiceYAML("v1beta1.external.metrics.k8s.io", "external.metrics.k8s.io", "v1beta1", ns, "metricscale-adapter", AdapterPort, 100)
	if err := c.apply(ctx, manifests); err != nil {
		return fmt.Errorf("registering the adapter's APIServices failed: %w", err)
	}
	return c.waitAPIServices(ctx, "metricscale-adapter",
		"v1beta2.custom.metrics.k8s.io", "v1beta1.custom.metrics.k8s.io", "v1beta1.external.metrics.k8s.io")
}

// writeAdapterConfig writes DIR/adapter/config.yaml: hack/adapter-config.yaml (the memory
// provider for pushes, a prometheus provider for prom_*) and the running backends'
// fragments. It is a copy, so that the running config stays as read until something
// rewrites the copy: the adapter reloads it (TestConfigReload does).
func (c *Cluster) writeAdapterConfig() error {
	base, err := os.ReadFile(filepath.Join(c.RepoRoot, "hack", "adapter-config.yaml"))
	if err != nil {
		return fmt.Errorf("hack/adapter-config.yaml is missing: %w", err)
	}
	var fragments [][]byte
	for _, b := range c.backends(c.running) {
		f, err := b.AdapterConfig(c.Dir)
		if err != nil {
			return fmt.Errorf("adapter config of the %s backend: %w", b.Name(), err)
		}
		fragments = append(fragments, f)
	}
	if c.KEDA {
		f, err := c.kedaAdapterConfig()
		if err != nil {
			return err
		}
		fragments = append(fragments, f)
	}
	path := filepath.Join(c.Dir, "adapter", "config.yaml")
	if err := writeFileAtomic(path, AdapterConfig(c.Dir, base, fragments...), 0o644); err != nil {
		return err
	}
	extra := ""
	if len(c.running) > 0 {
		extra = " + " + strings.Join(c.running, " ")
	}
	c.logf("    adapter config: %s (memory + prometheus at 127.0.0.1:%d%s)", path, PrometheusPort, extra)
	return nil
}

func (c *Cluster) startAutoscaler(ctx context.Context) error {
	dir := filepath.Join(c.Dir, "autoscaler")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := c.applyFile(ctx, "manifests/autoscaler/crd.yaml", "autoscaler-crd.log", "--server-side"); err != nil {
		return err
	}
	if err := c.waitCRDsEstablished(ctx, "metricautoscalers.autoscaling.metricscale.dev"); err != nil {
		return fmt.Errorf("the MetricAutoscaler CRD: %w", err)
	}
	const sa = "metricscale-autoscaler"
	kc, err := c.serviceAccountKubeconfig(ctx, "metricscale", sa, "manifests/autoscaler/rbac.yaml", dir)
	if err != nil {
		return err
	}
	if want := filepath.Join(c.Dir, "kubeconfigs", sa+".kubeconfig"); kc != want {
		if err := copyFile(kc, want); err != nil {
			return err
		}
	}
	// Recording (autoscaler record): its delegated authentication and RBAC, as manifests/record.
	if err := c.applyFile(ctx, "manifests/record/rbac.yaml", sa+"-rbac.log"); err != nil {
		return err
	}
	return c.startAndWait(ctx, sa)
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return writeFileAtomic(to, data, 0o600)
}

// kubectlStdout runs kubectl and returns its standard output only.
func (c *Cluster) kubectlStdout(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.Kubectl(), append([]string{"--kubeconfig", c.Kubeconfig(), "--cache-dir",
		filepath.Join(c.Dir, "kubectl-cache"), kubectlTimeoutFlag}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}
