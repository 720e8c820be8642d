package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metricscale/metricscale/hack/backends"
)

func getenv(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestParseArgs(t *testing.T) {
	t.Parallel()
	def := DefaultOptions("/cache/cluster")
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		verb    string
		rest    []string
		check   func(o Options) bool
		explain string
		err     string
	}{
		{name: "defaults", args: []string{"up"}, verb: "up",
			check: func(o Options) bool {
				return o.Dir == def.Dir && o.Nodes == 1 && o.HPASyncPeriod == "15s" && o.HPAController == HPAOn &&
					o.Prometheus && o.Backends && o.Record && o.PodStages && o.BackendNames == nil
			}},
		{name: "every up flag", args: []string{"up", "--nodes", "3", "--hpa-sync-period=5s", "--separate-hpa-controller",
			"--kubernetes-only", "--no-prometheus", "--no-backends", "--no-record", "--no-pod-stages"}, verb: "up",
			check: func(o Options) bool {
				return o.Nodes == 3 && o.HPASyncPeriod == "5s" && o.HPAController == HPASeparate && o.KubernetesOnly &&
					!o.Prometheus && !o.Backends && !o.Record && !o.PodStages &&
					o.Explicit("nodes") && o.Explicit("hpa-sync-period") && o.Explicit("no-backends") && !o.Explicit("dir")
			}},
		{name: "no HPA controller", args: []string{"up", "--no-hpa-controller"}, verb: "up",
			check: func(o Options) bool { return o.HPAController == HPAOff }},
		{name: "some backends", args: []string{"up", "--backends", "alpha,beta"}, verb: "up",
			check: func(o Options) bool {
				return o.Backends && reflect.DeepEqual(o.BackendNames, []string{"alpha", "beta"})
			}},
		{name: "relative dir", args: []string{"status", "--dir", "x/y/"}, verb: "status",
			check: func(o Options) bool { return o.Dir == "/work/x/y" }},
		{name: "dir from the environment", args: []string{"down", "--purge"}, env: map[string]string{"METRICSCALE_CLUSTER_DIR": "/elsewhere"},
			verb: "down", check: func(o Options) bool { return o.Dir == "/elsewhere" && o.Purge }},
		{name: "kubectl passes everything but --dir", args: []string{"kubectl", "get", "--dir", "/d", "pods", "-n", "x", "--watch"},
			verb: "kubectl", rest: []string{"get", "pods", "-n", "x", "--watch"}, check: func(o Options) bool { return o.Dir == "/d" }},
		{name: "backend name", args: []string{"stop-backend", "alpha", "--dir=/d"}, verb: "stop-backend", rest: []string{"alpha"},
			check: func(o Options) bool { return o.Dir == "/d" }},
		{name: "real node", args: []string{"up", "--real-node"}, verb: "up",
			check: func(o Options) bool { return o.RealNode && o.Explicit("real-node") }},
		{name: "image archives", args: []string{"load-images", "a.tar", "--dir", "/d", "b/c.tar"}, verb: "load-images",
			rest: []string{"a.tar", "b/c.tar"}, check: func(o Options) bool { return o.Dir == "/d" && !o.RealNode }},
		{name: "build modules", args: []string{"build", "prometheus-adapter", "--dir", "/d", "etcd"}, verb: "build",
			rest: []string{"prometheus-adapter", "etcd"}, check: func(o Options) bool { return !o.ForUp }},
		{name: "build for up", args: []string{"build", "--for-up", "--real-node"}, verb: "build",
			check: func(o Options) bool { return o.ForUp && o.RealNode }},
		{name: "change feed", args: []string{"restart-autoscaler", "--change-feed-url", "none"}, verb: "restart-autoscaler",
			check: func(o Options) bool { return o.ChangeFeedURL == "none" }},
		{name: "help flag", args: []string{"up", "--help"}, verb: "help"},
		{name: "zero nodes", args: []string{"up", "--nodes", "0"}, err: "--nodes must be a positive integer, not '0'"},
		{name: "bad period", args: []string{"up", "--hpa-sync-period", "5"}, err: "--hpa-sync-period must be a duration"},
		{name: "missing value", args: []string{"up", "--nodes"}, err: "--nodes needs a value"},
		{name: "empty value", args: []string{"up", "--dir="}, err: "--dir needs a value"},
		{name: "unknown flag", args: []string{"up", "--fast"}, err: "unknown argument: --fast"},
		{name: "value on a switch", args: []string{"up", "--no-record=yes"}, err: "unknown argument: --no-record=yes"},
		{name: "positional for up", args: []string{"up", "now"}, err: "unknown argument: now"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inv, ok := parseArgsWant(t, tt.args, getenv(tt.env), def.Dir, tt.err)
			if !ok {
				return
			}
			if inv.Verb != tt.verb || !slices.Equal(inv.Args, tt.rest) {
				t.Errorf("verb %q args %q, want %q %q", inv.Verb, inv.Args, tt.verb, tt.rest)
			}
			if tt.check != nil && !tt.check(inv.Options) {
				t.Errorf("options %+v", inv.Options)
			}
		})
	}
}

// parseArgsWant runs ParseArgs and checks its error against wantErr (a part of
// the message; "" for none); ok is false when there is no Invocation to check.
func parseArgsWant(t *testing.T, args []string, getenv func(string) string, defaultDir, wantErr string) (inv Invocation, ok bool) {
	t.Helper()
	inv, err := ParseArgs(args, getenv, defaultDir, "/work")
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("error %v, want one with %q", err, wantErr)
		}
		return inv, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return inv, true
}

func TestStateRoundTrip(t *testing.T) {
	t.Parallel()
	want := State{
		Version: "v1.37.2", Nodes: "2", HPASyncPeriod: "5s", HPAController: HPASeparate, KubernetesOnly: "false",
		Prometheus: "true", Backends: []string{"beta", "alpha"}, Record: "true", PodStages: "false",
		Components: []string{"etcd", "kube-apiserver"}, StartedAt: "2026-11-27T00:00:00Z", RepoRoot: "/work/a b's/c,d",
		RealNode: "true", NodeIP: "192.0.2.2", KEDAAPIQPS: "200",
	}
	data := want.Marshal()
	// The line the e2e suite reads, quoted as bash's printf %q quotes.
	if !strings.Contains(string(data), "\nSTATE_BACKENDS=beta\\ alpha\n") {
		t.Errorf("STATE_BACKENDS line not as the script wrote it:\n%s", data)
	}
	got, err := ParseState(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
	}
	// An empty list is '' (what the script wrote without backends), read back as none.
	empty := State{}
	if !strings.Contains(string(empty.Marshal()), "STATE_BACKENDS=''\n") {
		t.Errorf("empty backends: %s", empty.Marshal())
	}
	if got, err := ParseState(empty.Marshal()); err != nil || got.Backends != nil {
		t.Errorf("empty backends read back as %q, %v", got.Backends, err)
	}
	// Bash itself must read the file the same way.
	if _, err := exec.LookPath("bash"); err == nil {
		file := filepath.Join(t.TempDir(), "cluster.env")
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("bash", "-c", `source "$1"; printf '%s|%s' "$STATE_BACKENDS" "$STATE_REPO_ROOT"`, "_", file).Output()
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != "beta alpha|/work/a b's/c,d" {
			t.Errorf("bash read %q", out)
		}
	}
}

func TestParseStateErrors(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"STATE_NODES", "STATE_REPO_ROOT='/x"} {
		if _, err := ParseState([]byte(in + "\n")); err == nil {
			t.Errorf("ParseState(%q) succeeded", in)
		}
	}
}

// TestAdapterConfigClusterDir: the base's own @CLUSTER_DIR@ (the federation
// provider's token and CA) is the state folder too, not only the fragments'.
func TestAdapterConfigClusterDir(t *testing.T) {
	t.Parallel()
	base := "providers:\n- name: fed\n  options:\n    tokenFile: '@CLUSTER_DIR@/adapter/token'\nroutes:\n- metric: '*'\n  provider: fed\n"
	frag := "providers:\n- name: q\n  options:\n    password:\n      file: '@CLUSTER_DIR@/q/password'\nroutes:\n- metric: 'q_*'\n  provider: q\n"
	got := string(AdapterConfig("/state", []byte(base), []byte(frag)))
	if strings.Contains(got, "@CLUSTER_DIR@") {
		t.Errorf("a mark is left:\n%s", got)
	}
	for _, want := range []string{"tokenFile: '/state/adapter/token'", "file: '/state/q/password'"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}

func TestMergeAdapterConfig(t *testing.T) {
	t.Parallel()
	base := `# header comment, left out
providers:
- name: memory
  type: memory
# a comment among providers

- name: prom
  type: prometheus
routes:
- metric: 'prom_*'
  provider: prom
- metric: '*'
  provider: memory
watch: true
`
	alpha := `# alpha fragment
providers:
- name: alpha
  type: alpha
routes:
- metric: 'alpha_*'
  provider: alpha
`
	beta := `providers:
- name: beta
  type: beta
routes:
- metric: 'beta_*'
  provider: beta
ignored: true
`
	want := `watch: true
providers:
- name: memory
  type: memory
# a comment among providers

- name: prom
  type: prometheus
- name: alpha
  type: alpha
- name: beta
  type: beta
routes:
- metric: 'alpha_*'
  provider: alpha
- metric: 'beta_*'
  provider: beta
- metric: 'prom_*'
  provider: prom
- metric: '*'
  provider: memory
`
	if got := string(MergeAdapterConfig([]byte(base), []byte(alpha), []byte(beta))); got != want {
		t.Errorf("merged:\n%s\nwant:\n%s", got, want)
	}
	// Without fragments, base's providers and routes as they are.
	if got := string(MergeAdapterConfig([]byte(base))); !strings.HasSuffix(got, "routes:\n- metric: 'prom_*'\n  provider: prom\n- metric: '*'\n  provider: memory\n") {
		t.Errorf("no fragments:\n%s", got)
	}
}

// newTestCluster is a Cluster on a checkout that has the adapter and autoscaler (or not).
func newTestCluster(t *testing.T, withMetricscale bool, opts Options) *Cluster {
	t.Helper()
	root := t.TempDir()
	files := []string{"hack/cluster/build/kubernetes/go.mod"}
	if withMetricscale {
		files = append(files, "cmd/adapter/main.go", "cmd/autoscaler/main.go", "manifests/autoscaler/crd.yaml")
	}
	for _, f := range files {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("module x\n\nrequire k8s.io/kubernetes v1.37.2\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if opts.Dir == "" {
		opts.Dir = filepath.Join(root, "state")
	}
	c, err := New(root, filepath.Join(root, "cache"), opts, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSelectedComponents(t *testing.T) {
	t.Parallel()
	all := func(o *Options) {}
	tests := []struct {
		name       string
		metricscal bool
		set        func(o *Options)
		want       string
		modules    string
	}{
		{"everything", true, all,
			"etcd kube-apiserver kube-controller-manager kube-scheduler kwok metrics-server metricscale-adapter metricscale-autoscaler exporter prometheus",
			"clusterutil kubernetes etcd kwok metrics-server"},
		{"separate HPA controller, no pod stages, no prometheus", true, func(o *Options) {
			o.HPAController, o.PodStages, o.Prometheus = HPASeparate, false, false
		}, "etcd kube-apiserver kube-controller-manager kube-controller-manager-hpa kube-scheduler kwok metricscale-adapter metricscale-autoscaler",
			"clusterutil kubernetes etcd kwok"},
		{"kubernetes only", true, func(o *Options) { o.KubernetesOnly, o.Prometheus = true, false },
			"etcd kube-apiserver kube-controller-manager kube-scheduler kwok metrics-server", "clusterutil kubernetes etcd kwok metrics-server"},
		{"a checkout without the adapter", false, all,
			"etcd kube-apiserver kube-controller-manager kube-scheduler kwok metrics-server exporter prometheus",
			"clusterutil kubernetes etcd kwok metrics-server"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := DefaultOptions("")
			tt.set(&o)
			c := newTestCluster(t, tt.metricscal, o)
			if got := strings.Join(c.selected(), " "); got != tt.want {
				t.Errorf("components %q, want %q", got, tt.want)
			}
			if got := strings.Join(c.neededModules(), " "); got != tt.modules {
				t.Errorf("modules %q, want %q", got, tt.modules)
			}
		})
	}
}

func TestComponentCatalog(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, true, DefaultOptions(""))
	seenPorts := map[int]string{}
	for _, comp := range components() {
		if comp.Health == nil || comp.Binary == nil || comp.Args == nil || comp.Enabled == nil || comp.ReadyTimeout <= 0 || comp.ReadyWhat == "" {
			t.Errorf("%s lacks a field: %+v", comp.Name, comp)
		}
		for _, p := range comp.Ports {
			if other, ok := seenPorts[p]; ok {
				t.Errorf("port %d of both %s and %s", p, other, comp.Name)
			}
			seenPorts[p] = comp.Name
		}
		if len(comp.Args(c)) == 0 {
			t.Errorf("%s has no arguments", comp.Name)
		}
	}
	if got := c.portsOf("metricscale-adapter"); got != "6444,6445" {
		t.Errorf("adapter ports %q", got)
	}
}

func TestAutoscalerArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		set           func(o *Options)
		want, wantNot []string
	}{
		{"defaults", func(*Options) {}, []string{"--change-feed-url=https://127.0.0.1:6444", "--record"}, []string{"--hpa-objects"}},
		{"no HPA controller", func(o *Options) { o.HPAController, o.HPASyncPeriod = HPAOff, "5s" },
			[]string{"--hpa-objects", "--hpa-sync-period=5s"}, nil},
		{"no feed, no record", func(o *Options) { o.ChangeFeedURL, o.Record = "none", false }, nil,
			[]string{"--record", "--change-feed-url=https://127.0.0.1:6444"}},
		{"another feed", func(o *Options) { o.ChangeFeedURL = "https://x" }, []string{"--change-feed-url=https://x"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := DefaultOptions("/d")
			tt.set(&o)
			args := autoscalerArgs(newTestCluster(t, true, o))
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
		})
	}
}

func TestKubeLdflags(t *testing.T) {
	t.Parallel()
	got := kubeLdflags("v1.37.2")
	for _, w := range []string{"gitVersion=v1.37.2", "gitMajor=1 ", "gitMinor=37 "} {
		if !strings.Contains(got, w) {
			t.Errorf("%q lacks %q", got, w)
		}
	}
}

func TestShellQuote(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"", "plain", "a b", "it's", `back\slash`, "a,b", "$HOME", "tab\tx", "é"} {
		got, err := shellUnquote(shellQuote(v))
		if err != nil || got != v {
			t.Errorf("shellUnquote(shellQuote(%q)) = %q, %v", v, got, err)
		}
	}
	if got := singleQuote("it's"); got != `'it'\''s'` {
		t.Errorf("singleQuote: %s", got)
	}
}

// TestProcessBookkeeping starts real processes: the pid file, argv[0] check, stop and the
// exit reasons up prints.
func TestProcessBookkeeping(t *testing.T) {
	t.Parallel()
	c, sleep := newSpawnCluster(t)
	p, err := c.spawn("sleeper", sleep, []string{"60"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pid, ok := c.PidOf("sleeper")
	if !ok || pid != p.pid {
		t.Fatalf("PidOf = %d, %v; want %d", pid, ok, p.pid)
	}
	if sid := sessionOf(t, pid); sid != pid {
		t.Errorf("not in its own session: sid %d, pid %d", sid, pid)
	}
	// A pid file naming another program (a recycled pid) is not ours.
	if err := os.WriteFile(c.pidFile("other"), []byte(strings.Replace(string(must(os.ReadFile(c.pidFile("sleeper")))), sleep, "/bin/other", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if c.Alive("other") {
		t.Error("a pid file with another argv[0] counts as alive")
	}
	if err := c.stop("sleeper"); err != nil {
		t.Fatal(err)
	}
	<-p.done
	if c.Alive("sleeper") || fileExists(c.pidFile("sleeper")) {
		t.Error("sleeper still recorded after stop")
	}
	if got := p.exited(); got != "killed by signal SIGTERM (15)" {
		t.Errorf("reason %q", got)
	}
	q, err := c.spawn("failer", "/bin/sh", []string{"-c", "echo boom; exit 3"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-q.done:
	case <-time.After(30 * time.Second):
		t.Fatal("sh did not exit")
	}
	if got := q.exited(); got != "exited with code 3" {
		t.Errorf("reason %q", got)
	}
	if log := string(must(os.ReadFile(c.logFile("failer")))); log != "boom\n" {
		t.Errorf("log %q", log)
	}
}

// sessionOf reads the session id of pid from /proc/PID/stat.
func sessionOf(t *testing.T, pid int) int {
	t.Helper()
	stat := string(must(os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))))
	fields := strings.Fields(stat[strings.LastIndexByte(stat, ')')+1:])
	sid, err := strconv.Atoi(fields[3])
	if err != nil {
		t.Fatal(err)
	}
	return sid
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// flakyCluster is a Cluster whose only component is a shell script (real processes):
// up's wait for it is what is tested.
func flakyCluster(t *testing.T, script string, args ...string) (*Cluster, *bytes.Buffer) {
	t.Helper()
	c := newTestCluster(t, false, DefaultOptions(""))
	for _, d := range []string{"run", "logs"} {
		if err := os.MkdirAll(filepath.Join(c.Dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ready := filepath.Join(c.Dir, "ready")
	c.catalog = []*Component{{
		Name: "flaky", Enabled: always,
		Binary: func(*Cluster) string { return "/bin/sh" },
		Args:   func(*Cluster) []string { return append([]string{"-c", script, "sh", ready}, args...) },
		Health: func(context.Context, *Cluster) error {
			if fileExists(ready) {
				return nil
			}
			return errors.New("no ready file yet")
		},
		ReadyTimeout: 30 * time.Second, ReadyWhat: "ready",
	}}
	var errOut bytes.Buffer
	c.Err = &errOut
	t.Cleanup(func() { _ = c.stop("flaky") })
	return c, &errOut
}

func TestWaitStartsADeadComponentOnceMore(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "ran-once")
	// The first run dies with exit code 7; the second becomes ready and stays.
	c, errOut := flakyCluster(t, `if [ -e "$2" ]; then touch "$1"; trap 'exit 0' TERM; while :; do sleep 1 & wait; done; fi
touch "$2"; echo dying; exit 7`, marker)
	ctx := context.Background()
	if err := c.startComponent(ctx, "flaky"); err != nil {
		t.Fatal(err)
	}
	if err := c.waitReady(ctx, "flaky"); err != nil {
		t.Fatalf("waitReady: %v\n%s", err, errOut)
	}
	want := "flaky exited with code 7 while waiting for flaky to become ready; starting it once more"
	if !strings.Contains(errOut.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, errOut)
	}
	if log := string(must(os.ReadFile(filepath.Join(c.Dir, "logs", "flaky.failed.log")))); log != "dying\n" {
		t.Errorf("failed run's log %q", log)
	}
	if !c.Alive("flaky") {
		t.Error("the second run is not alive")
	}
}

func TestWaitFailsWhenAComponentDiesTwice(t *testing.T) {
	t.Parallel()
	c, errOut := flakyCluster(t, `echo going; kill -9 $$`)
	ctx := context.Background()
	if err := c.startComponent(ctx, "flaky"); err != nil {
		t.Fatal(err)
	}
	err := c.waitReady(ctx, "flaky")
	if err == nil {
		t.Fatal("waitReady succeeded for a component that always dies")
	}
	want := "flaky killed by signal SIGKILL (9) while waiting for flaky to become ready, after it was started once more"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q lacks %q", err, want)
	}
	if !strings.Contains(errOut.String(), "starting it once more") || !strings.Contains(errOut.String(), "going") {
		t.Errorf("output lacks the first death and the log tail:\n%s", errOut)
	}
}

func TestBackendNames(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, true, DefaultOptions(""))
	all, err := c.backendNames()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(all, backends.Names()) {
		t.Errorf("without --backends: %q, want every backend %q", all, backends.Names())
	}
	c.BackendNames = []string{"no-such-backend"}
	if _, err := c.backendNames(); err == nil || !strings.Contains(err.Error(), "no-such-backend") {
		t.Errorf("an unknown --backends name: %v", err)
	}
	if len(all) > 0 {
		c.BackendNames = []string{all[0], all[0]}
		if got, err := c.backendNames(); err != nil || !slices.Equal(got, all[:1]) {
			t.Errorf("--backends %s,%s: %q, %v", all[0], all[0], got, err)
		}
	}
}

// A component must not keep what our caller holds open: flock's lock file was held by
// the whole cluster, so every other `flock ... cluster.sh up` waited until `down`.
func TestComponentsDoNotInheritDescriptors(t *testing.T) {
	t.Parallel()
	c, sleep := newSpawnCluster(t)
	lock := filepath.Join(t.TempDir(), "inherited.lock")
	fd, err := syscall.Open(lock, syscall.O_CREAT|syscall.O_RDWR, 0o644) // no O_CLOEXEC, as flock's
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	p, err := c.spawn("holder", sleep, []string{"60"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.stop("holder") }()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range fds {
		if target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", p.pid, e.Name())); target == lock {
			t.Errorf("the component holds the caller's %s open (fd %s)", lock, e.Name())
		}
	}
}

// newSpawnCluster is a cluster whose state folder can hold pid files and logs, and the
// path of sleep to spawn as a component.
func newSpawnCluster(t *testing.T) (*Cluster, string) {
	t.Helper()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	c := newTestCluster(t, false, DefaultOptions(""))
	for _, d := range []string{"run", "logs"} {
		if err := os.MkdirAll(filepath.Join(c.Dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return c, sleep
}

func TestReuseBuilt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		oldStamp  string
		oldOutput bool
		want      bool
	}{
		{"same module files", "abc", true, true},
		{"other module files", "def", true, false},
		{"binary missing", "abc", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newTestCluster(t, false, Options{})
			old := filepath.Join(c.CacheRoot, "v1.36.3", "bin")
			if err := os.MkdirAll(old, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(c.Bin, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(old, ".keda.stamp"), []byte(tt.oldStamp+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if tt.oldOutput {
				for _, o := range []string{"keda-operator", "keda-metrics-server"} {
					if err := os.WriteFile(filepath.Join(old, o), []byte("binary "+o), 0o755); err != nil {
						t.Fatal(err)
					}
				}
			}
			var keda module
			for _, m := range modules() {
				if m.name == "keda" {
					keda = m
				}
			}
			from, err := c.reuseBuilt(keda, "abc")
			if err != nil {
				t.Fatal(err)
			}
			if got := from != ""; got != tt.want {
				t.Fatalf("reused from %q, want reuse %v", from, tt.want)
			}
			data, err := os.ReadFile(filepath.Join(c.Bin, "keda-operator"))
			if tt.want && string(data) != "binary keda-operator" {
				t.Errorf("keda-operator %q, %v", data, err)
			}
			if !tt.want && err == nil {
				t.Errorf("keda-operator copied: %q", data)
			}
			stamp, _ := os.ReadFile(filepath.Join(c.Bin, ".keda.stamp"))
			if tt.want != (string(stamp) == "abc\n") {
				t.Errorf("stamp %q", stamp)
			}
		})
	}
}

func TestKubeModulesAreNotReused(t *testing.T) {
	t.Parallel()
	for _, m := range modules() {
		// Only these carry the cluster's version (kubeLdflags, k8s.io/kubernetes).
		if want := m.name == "kubernetes" || m.name == "kubernetes-node"; m.kube != want {
			t.Errorf("module %s: kube %v, want %v", m.name, m.kube, want)
		}
	}
}

// TestBuildLocksEachModule: a build waits only for a build of the same module, so
// that .ci/run's build of prometheus-adapter does not hold up the suite's up.
func TestBuildLocksEachModule(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, false, Options{})
	// clusterutil's binary as a finished build leaves it: Build has nothing to do.
	src := filepath.Join(c.RepoRoot, "hack", "cluster", "build", "clusterutil")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module clusterutil\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stamp, err := moduleStamp(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(c.Bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.Bin, "clusterutil"), []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.Bin, ".clusterutil.stamp"), []byte(stamp+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hold := func(name string) {
		unlock, err := lockFile(context.Background(), filepath.Join(c.CacheDir, ".build-"+name+".lock"), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(unlock)
	}

	hold("prometheus-adapter") // another module's build runs
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Build(ctx, "clusterutil"); err != nil {
		t.Fatalf("build clusterutil while prometheus-adapter builds: %v", err)
	}

	hold("clusterutil") // the same module's build runs: Build waits for it
	ctx, cancel = context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := c.Build(ctx, "clusterutil"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("build clusterutil while another build of it runs: %v, want it to wait until the context ends", err)
	}
}

func TestBuildRefusesAnUnknownModule(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, false, Options{})
	err := c.Build(context.Background(), "etcd", "prometheus")
	if err == nil || !strings.Contains(err.Error(), `unknown build module "prometheus"`) || !strings.Contains(err.Error(), "prometheus-adapter") {
		t.Fatalf("error %v, want one naming the unknown module and the valid ones", err)
	}
}
