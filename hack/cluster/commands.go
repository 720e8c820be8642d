package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/metricscale/metricscale/hack/backends"
)

// state says whether the cluster is "running" (every component of its state file runs or
// is paused), "partial" or "stopped", and returns the state file when there is one.
func (c *Cluster) state() (string, *State) {
	comps := c.componentNames()
	var st *State
	if s, err := ReadState(c.Dir); err == nil {
		st = &s
		comps = s.Components
	}
	anyAlive, all := false, true
	for _, n := range comps {
		if c.Alive(n) {
			anyAlive = true
		} else if !c.paused(n) {
			all = false
		}
	}
	switch {
	case !anyAlive:
		return "stopped", st
	case all && st != nil:
		return "running", st
	}
	return "partial", st
}

// Running reports whether the whole cluster runs (status would exit 0 or 1, not 3).
func (c *Cluster) Running() bool {
	s, _ := c.state()
	return s == "running"
}

func (c *Cluster) deadComponents() []string {
	comps := c.componentNames()
	if st, err := ReadState(c.Dir); err == nil {
		comps = st.Components
	}
	var out []string
	for _, n := range comps {
		if !c.Alive(n) && !c.paused(n) {
			out = append(out, n)
		}
	}
	return out
}

// Down stops exactly the processes up started, and the backends that run from the state
// folder; with Purge it also removes the state folder.
func (c *Cluster) Down(ctx context.Context) error {
	if !fileExists(c.Dir) {
		c.logf("cluster in %s is not running (no state folder)", c.Dir)
		return nil
	}
	unlock, err := lockFile(ctx, filepath.Join(c.Dir, ".lock"), 10*time.Minute)
	if err != nil {
		return err
	}
	defer unlock()
	names := c.componentNames()
	anyAlive := false
	for _, n := range names {
		anyAlive = anyAlive || c.Alive(n)
	}
	if !anyAlive {
		c.logf("cluster in %s is not running", c.Dir)
	} else {
		c.logf("stopping the cluster in %s", c.Dir)
		c.drainRealNode(ctx)
		for i := len(names) - 1; i >= 0; i-- {
			if err := c.stopComponent(ctx, names[i]); err != nil {
				return err
			}
		}
	}
	// What pods of the real node left (mounts, shims), also after a failed up.
	if fileExists(filepath.Join(c.Dir, "containerd")) {
		c.cleanUpRealNode()
	}
	// Every backend knows whether its server runs from this folder: stopping one that does
	// not is a no-op, so a state file lost by a failed up leaves nothing behind.
	for _, b := range backends.All() {
		if err := c.backendAction(ctx, b, "stop"); err != nil {
			return err
		}
	}
	// Nothing of ours may be left listening.
	if anyAlive {
		var ports []int
		for _, comp := range c.catalog {
			if comp.Name != "metricscale-autoscaler" && comp.Name != "kube-controller-manager-hpa" {
				ports = append(ports, comp.Ports...)
			}
		}
		var busy []int
		for i := 0; i < 50; i++ {
			if busy = busyPorts(ports); len(busy) == 0 {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if len(busy) > 0 {
			c.warnf("port(s) %v are still in use after stopping the cluster (by another program?)", busy)
		}
	}
	for _, p := range []string{"run", "etcd", filepath.Join("prometheus", "data"), "cluster.env", ".lock"} {
		_ = os.RemoveAll(filepath.Join(c.Dir, p))
	}
	switch {
	case c.Purge:
		if left := mountsUnder(c.Dir); len(left) > 0 {
			return fmt.Errorf("not removing %s: still mounted there: %s", c.Dir, strings.Join(left, " "))
		}
		if err := os.RemoveAll(c.Dir); err != nil {
			return err
		}
		c.logf("removed the state folder %s", c.Dir)
	case anyAlive:
		c.logf("cluster stopped (logs kept in %s; 'down --purge' removes %s)", filepath.Join(c.Dir, "logs"), c.Dir)
	}
	return nil
}

// stopComponent stops a component, with its clean-up before and after when it ran.
func (c *Cluster) stopComponent(ctx context.Context, name string) error {
	comp := c.component(name)
	alive := c.Alive(name)
	if alive && comp != nil && comp.BeforeStop != nil {
		comp.BeforeStop(c, ctx)
	}
	if err := c.stop(name); err != nil {
		return err
	}
	if alive && comp != nil && comp.AfterStop != nil {
		comp.AfterStop(c, ctx)
	}
	return nil
}

// ExitError is an error with the exit code the command ends with.
type ExitError struct {
	Code  int
	Err   error
	Quiet bool // the command already said why: Main prints nothing more
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// ErrStopped is Status's error when no component runs (exit code 3).
var ErrStopped = errors.New("the cluster is not running")

// Status prints each component's pid, ports, memory and health. Its error is ErrStopped
// (exit code 3) when nothing runs, and an *ExitError with code 1 when a component is
// missing or unhealthy.
func (c *Cluster) Status(ctx context.Context) error {
	s, st := c.state()
	if s == "stopped" {
		c.logf("cluster in %s is not running", c.Dir)
		return &ExitError{Code: 3, Err: ErrStopped, Quiet: true}
	}
	if st == nil {
		st = &State{}
	}
	prom := "off"
	if st.Prometheus == "true" {
		prom = "on"
	}
	stages := ""
	if orDefault(st.PodStages, "true") != "true" {
		stages = "; kwok: node stages only"
	}
	if st.RealNode == "true" {
		stages += "; real node " + RealNodeName + " at " + st.NodeIP
	}
	if st.KEDAAPIQPS != "" {
		if q, err := strconv.Atoi(st.KEDAAPIQPS); err == nil {
			stages += "; KEDA: " + KEDARaisedLimits(q)
		}
	}
	c.logf("%smetricscale local cluster%s — kubernetes %s, state folder %s", c.bold, c.reset, orDefault(st.Version, "?"), c.Dir)
	c.logf("started %s from %s; nodes: %s; HPA controller: %s; Prometheus: %s%s", orDefault(st.StartedAt, "?"), orDefault(st.RepoRoot, "?"),
		orDefault(st.Nodes, "?"), hpaControllerMode(orDefault(st.HPAController, HPAOn), orDefault(st.HPASyncPeriod, "?")), prom, stages)
	c.logf("%-26s %-8s %-11s %-10s %s", "COMPONENT", "PID", "PORT", "RSS", "HEALTH")
	comps := st.Components
	if len(comps) == 0 {
		comps = c.componentNames()
	}
	unhealthy := []string{}
	for _, n := range comps {
		pid, rss, health := "-", "-", ""
		if p, ok := c.PidOf(n); ok {
			pid, rss = fmt.Sprint(p), residentMemory(p)
			health = c.green + "ok" + c.reset
			comp := c.component(n)
			if comp == nil {
				health = c.red + "unknown component" + c.reset
				unhealthy = append(unhealthy, n)
			} else if err := comp.Health(ctx, c); err != nil {
				if n == "metrics-server" && comp.Ready(ctx, c) == nil {
					// Ready only after its first scrape of the nodes (--metric-resolution).
					health = c.green + "ok" + c.reset + " (live; no metrics scraped yet)"
				} else {
					msg := strings.ReplaceAll(err.Error(), "\n", " ")
					if len(msg) > 200 {
						msg = msg[:200]
					}
					health = c.red + "unhealthy" + c.reset + ": " + msg
					unhealthy = append(unhealthy, n)
				}
			}
		} else if c.paused(n) {
			health = c.yellow + "stopped" + c.reset + " by hack/cluster.sh stop-prometheus (start-prometheus starts it again)"
		} else {
			health = fmt.Sprintf("%snot running%s (log: %s)", c.red, c.reset, c.logFile(n))
			unhealthy = append(unhealthy, n)
		}
		c.logf("%-26s %-8s %-11s %-10s %s", n, pid, c.portsOf(n), rss, health)
	}
	if c.Alive("kube-apiserver") {
		c.logf("")
		out, _ := run(ctx, "", nil, nil, c.Kubectl(), "--kubeconfig", c.Kubeconfig(), "--cache-dir",
			filepath.Join(c.Dir, "kubectl-cache"), "get", "nodes", "--request-timeout=5s")
		for _, l := range splitLines(out) {
			c.logf("    %s", l)
		}
	}
	c.logf("")
	c.logf("KUBECONFIG=%s", c.Kubeconfig())
	if len(unhealthy) > 0 {
		return &ExitError{Code: 1, Err: fmt.Errorf("not healthy: %s", strings.Join(unhealthy, " ")), Quiet: true}
	}
	return nil
}

func residentMemory(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "-"
	}
	for _, l := range splitLines(string(data)) {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			var kb int
			if _, err := fmt.Sscan(v, &kb); err == nil {
				return fmt.Sprintf("%dMiB", kb/1024)
			}
		}
	}
	return "-"
}

// EnvVar is one variable of `env`.
type EnvVar struct{ Name, Value string }

// Env returns what `env` exports: the kubeconfig, the state folder, and the address of
// each running part (push endpoint and token, Prometheus, recorder, backends).
func (c *Cluster) Env() ([]EnvVar, error) {
	if !c.Alive("kube-apiserver") {
		return nil, fmt.Errorf("the cluster in %s is not running; start it with: hack/cluster.sh up", c.Dir)
	}
	env := []EnvVar{{"KUBECONFIG", c.Kubeconfig()}, {"METRICSCALE_CLUSTER_DIR", c.Dir}, {"METRICSCALE_KUBECTL", c.Kubectl()}}
	st, stErr := ReadState(c.Dir)
	if stErr == nil {
		env = append(env, EnvVar{"METRICSCALE_HPA_CONTROLLER", st.HPAController}, EnvVar{"METRICSCALE_HPA_SYNC_PERIOD", st.HPASyncPeriod},
			EnvVar{"METRICSCALE_CLUSTER_REPO", st.RepoRoot}, EnvVar{"METRICSCALE_POD_STAGES", orDefault(st.PodStages, "true")})
	}
	if stErr == nil && st.RealNode == "true" {
		// The real node's name: pods for it select kubernetes.io/hostname=$METRICSCALE_REAL_NODE.
		env = append(env, EnvVar{"METRICSCALE_REAL_NODE", RealNodeName}, EnvVar{"METRICSCALE_NODE_IP", st.NodeIP})
	}
	if c.Alive("keda-metrics-server") {
		env = append(env, EnvVar{"METRICSCALE_KEDA_METRICS_SERVER_URL", KEDAMetricsServerURL()})
	}
	if stErr == nil && st.KEDAAPIQPS != "" && contains(st.Components, "keda-operator") {
		// KEDA runs with raised limits (up --keda-api-qps): results must say so.
		env = append(env, EnvVar{"METRICSCALE_KEDA_API_QPS", st.KEDAAPIQPS})
	}
	if c.Alive("metricscale-adapter") {
		token, err := os.ReadFile(filepath.Join(c.Dir, "push-token"))
		if err != nil {
			return nil, fmt.Errorf("push token: %w", err)
		}
		env = append(env, EnvVar{"METRICSCALE_PUSH_URL", local(PushPort, "/push")},
			EnvVar{"METRICSCALE_PUSH_TOKEN", strings.TrimRight(string(token), "\n")})
	}
	if c.Alive("metricscale-autoscaler") {
		// HTTPS: /metrics is authorized by the API server (the admin credentials pass).
		env = append(env, EnvVar{"METRICSCALE_AUTOSCALER_METRICS", secure(AutoscalerPort, "/metrics")})
		if orDefault(st.Record, "true") == "true" {
			// autoscaler record --server "$METRICSCALE_RECORD_SERVER" --certificate-authority "$METRICSCALE_RECORD_CA"
			env = append(env, EnvVar{"METRICSCALE_RECORD_SERVER", secure(AutoscalerRecPort, "")},
				EnvVar{"METRICSCALE_RECORD_CA", filepath.Join(c.Dir, "autoscaler", "record.crt")})
		}
	}
	// Also while Prometheus is stopped by stop-prometheus: that outage is meant to be seen.
	if c.Alive("prometheus") || c.paused("prometheus") {
		env = append(env, EnvVar{"METRICSCALE_PROMETHEUS_URL", local(PrometheusPort, "")})
	}
	if c.Alive("exporter") {
		env = append(env, EnvVar{"METRICSCALE_EXPORTER_URL", local(ExporterPort, "")})
	}
	if len(st.Backends) > 0 {
		env = append(env, EnvVar{"METRICSCALE_BACKENDS", strings.Join(st.Backends, " ")})
		seen := map[string]bool{}
		for _, b := range c.backends(st.Backends) {
			vars := b.Env(c.Dir)
			keys := make([]string, 0, len(vars))
			for k := range vars {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				if !seen[k] {
					seen[k] = true
					env = append(env, EnvVar{k, vars[k]})
				}
			}
		}
	}
	return env, nil
}

// EnvMap is Env as a map.
func (c *Cluster) EnvMap() (map[string]string, error) {
	env, err := c.Env()
	if err != nil {
		return nil, err
	}
	m := make(map[string]string, len(env))
	for _, v := range env {
		m[v.Name] = v.Value
	}
	return m, nil
}

// RestartAutoscaler stops the autoscaler if it runs (e.g. an e2e test killed it) and
// starts it again with the cluster's settings, as its Deployment would restart it;
// changeFeedURL is its --change-feed-url ("" the adapter's, "none" no feed).
func (c *Cluster) RestartAutoscaler(ctx context.Context, changeFeedURL string) error {
	st, err := ReadState(c.Dir)
	if err != nil {
		return fmt.Errorf("no cluster state in %s; start it with: hack/cluster.sh up", c.Dir)
	}
	if !contains(st.Components, "metricscale-autoscaler") {
		return fmt.Errorf("the cluster in %s runs no metricscale-autoscaler", c.Dir)
	}
	c.HPAController, c.HPASyncPeriod = st.HPAController, st.HPASyncPeriod
	c.Record = orDefault(st.Record, "true") == "true"
	c.ChangeFeedURL = changeFeedURL
	if c.Alive("metricscale-autoscaler") {
		if err := c.stop("metricscale-autoscaler"); err != nil {
			return err
		}
	}
	return c.startAutoscaler(ctx)
}

// RestartAdapter stops the adapter if it runs and starts it again with the config file
// as it is now (DIR/adapter/config.yaml, not rewritten): for what a live reload cannot
// change, such as dropping the metrics.k8s.io route and with it the pod and node watches.
func (c *Cluster) RestartAdapter(ctx context.Context) error {
	st, err := ReadState(c.Dir)
	if err != nil {
		return fmt.Errorf("no cluster state in %s; start it with: hack/cluster.sh up", c.Dir)
	}
	if !contains(st.Components, "metricscale-adapter") {
		return fmt.Errorf("the cluster in %s runs no metricscale-adapter", c.Dir)
	}
	c.Prometheus = st.Prometheus == "true"
	if c.Alive("metricscale-adapter") {
		if err := c.stop("metricscale-adapter"); err != nil {
			return err
		}
	}
	if err := c.startAndWait(ctx, "metricscale-adapter"); err != nil {
		return err
	}
	return c.waitAPIServices(ctx, "metricscale-adapter",
		"v1beta2.custom.metrics.k8s.io", "v1beta1.custom.metrics.k8s.io", "v1beta1.external.metrics.k8s.io")
}

// execKubectl runs kubectl against the cluster with args, on the caller's terminal.
func (c *Cluster) execKubectl(args []string, stdout, stderr io.Writer) error {
	if !isExecutable(c.Kubectl()) {
		return errors.New("kubectl is not built yet; run hack/cluster.sh up")
	}
	argv := append([]string{c.Kubectl(), "--kubeconfig", c.Kubeconfig(), "--cache-dir", filepath.Join(c.Dir, "kubectl-cache")}, args...)
	if stdout == os.Stdout && stderr == os.Stderr {
		return syscall.Exec(argv[0], argv, os.Environ())
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	if err := cmd.Run(); err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			return &ExitError{Code: exitErr.ExitCode(), Err: err, Quiet: true}
		}
		return err
	}
	return nil
}
