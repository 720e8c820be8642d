// Package cluster is metricscale's local Kubernetes control plane without Docker: it
// builds etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok and
// metrics-server once (the Go modules under hack/cluster/build, cached per Kubernetes
// version), runs them on 127.0.0.1 with a generated PKI and fake kwok nodes, and, from
// the working tree, the metricscale adapter and autoscaler, Prometheus scraping
// hack/exporter, and the queue backends of hack/backends.
//
// hack/cluster.sh is its entry point for people and scripts (it runs the command in
// cmd/cluster); the e2e suite and the demo call this package directly. Each process it
// runs is a Component value; the state folder (run/NAME.pid, logs/NAME.log, cluster.env)
// is what `down`, `status` and `env` read, so each verb can run in a new process.
package cluster

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Usage is the help text of hack/cluster.sh.
const Usage = `hack/cluster.sh — a local Kubernetes control plane for metricscale, without Docker.

  hack/cluster.sh up [--nodes N] [--hpa-sync-period 15s] [--no-hpa-controller | --separate-hpa-controller]
                     [--kubernetes-only] [--no-prometheus] [--no-backends | --backends NAME,...]
                     [--no-record] [--no-pod-stages] [--real-node] [--keda [--keda-api-qps N]]
                     [--dir DIR]
  hack/cluster.sh down [--purge] [--dir DIR]
  hack/cluster.sh status [--dir DIR]
  hack/cluster.sh env [--dir DIR]            # eval "$(hack/cluster.sh env)"
  hack/cluster.sh kubectl [--dir DIR] ARGS   # kubectl against the cluster
  hack/cluster.sh build [MODULE...]          # only build (or check) the cached binaries
  hack/cluster.sh build --for-up [UP FLAGS]  # only what up with those flags runs
  hack/cluster.sh load-images FILE...        # import image archives into the real node's containerd
  hack/cluster.sh restart-autoscaler [--change-feed-url URL|none]
                                             # stop (if running) and start the autoscaler again
  hack/cluster.sh stop-prometheus            # stop only Prometheus (an outage, for e2e tests)
  hack/cluster.sh start-prometheus           # start it again, with the same data
  hack/cluster.sh install-prometheus         # install Debian's prometheus package if missing
  hack/cluster.sh install-backends           # install (or build) every queue backend's server
  hack/cluster.sh stop-backend NAME          # stop one queue backend (an outage, for e2e tests)
  hack/cluster.sh start-backend NAME         # start it again, with the same data

'up' builds etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok
and metrics-server once (Go modules under hack/cluster/build, cached in
~/.cache/metricscale/<kubernetes version>/bin), then runs them on 127.0.0.1 with a
generated PKI, fake kwok nodes and metrics.k8s.io. It builds only what it runs: 'build'
also builds prometheus-adapter v0.12 (for the parity and federation e2e and the adapter
benchmark); 'build MODULE...' builds those modules of hack/cluster/build only, and
'build --for-up' what up with the same flags runs. Builds of different modules run side
by side; a second build of one module waits for the first and finds its binaries.
Unless --kubernetes-only, it also builds and runs the metricscale adapter and autoscaler
from the working tree (the autoscaler with --hpa-objects when kube-controller-manager runs
without its HPA controller; --separate-hpa-controller runs the HPA controller alone in a
second kube-controller-manager, with its own lease, so that its CPU and memory are the HPA
controller's: for benchmarks; the autoscaler subscribes to the adapter's change feed,
https://127.0.0.1:6444/changes, unless --change-feed-url names another URL, or none; it
records every MetricAutoscaler's reconciles for 'autoscaler record' on 127.0.0.1:6449
unless --no-record).
--no-pod-stages gives kwok its node stages only: no pod lifecycle (pods stay Pending unless
something writes their status) and no resource metrics, so no metrics-server either. For
benchmarks that write pod status themselves: at tens of thousands of pods, kwok with its pod
stages and metrics-server's scrapes otherwise takes most of a core.
--real-node adds one real node, metricscale-node, beside the kwok nodes (which keep their
taint): containerd 2.4 (with Debian's runc and containernetworking-plugins), a kubelet,
kube-proxy (iptables) and CoreDNS, all host processes built from Go modules under
hack/cluster/build like the rest (their cold build took 45 min on this shared 2-core
machine; about 230 MiB more memory; 2 s more of up). Pods on it are real containers on a CNI bridge (10.244.77.0/24); the API server
then also listens on the host's address (the default route's) for them, behind the
kubernetes Service, and kube-dns (10.0.0.10) resolves cluster names. Nothing is pulled:
'load-images FILE...' imports image archives (make images writes them to _output/images),
and pods use imagePullPolicy Never or IfNotPresent. The host runs cgroup v1, which the
kubelet refuses unless failCgroupV1 is false: set for this development node only. It needs
root, runc, /usr/lib/cni, iptables and conntrack.
--keda also runs KEDA v2.21 (built from its Go module like the rest, by up --keda or
build --keda; a plain build leaves it out): its operator and its metrics server as host processes in namespace keda, as
ServiceAccount keda/keda-operator with KEDA's RBAC and CRDs from the module, certificates
from the cluster CA in DIR/keda/certs (no rotation, no webhooks). Its metrics server
(https://127.0.0.1:6463) is not registered: metricscale keeps external.metrics.k8s.io and
its provider keda (hack/keda-adapter-config.yaml) forwards KEDA's metric names (s0-...)
there, once metricscale's ServiceAccount may read it: kubectl apply -f
manifests/federation/remote-rbac.yaml (not applied by up: TestFederation checks the refusal
without it).
--keda-api-qps N (with --keda) departs from KEDA's defaults for benchmarks with many
ScaledObjects: both KEDA processes get --kube-api-qps N --kube-api-burst 2N (KEDA: 20 and
30) and the operator KEDA_SCALEDOBJECT_CTRL_MAX_RECONCILES=20 (KEDA: 5), the settings KEDA
documents for throttling at scale (kedacore/keda#3810: status PATCHes waiting on the
client's rate limit). Without it KEDA runs at its defaults.
Unless --no-prometheus, it also runs Prometheus (Debian's package, installed with apt-get
when missing) scraping hack/exporter every second: series set by the tests and cAdvisor
series of the pods on the fake nodes; the adapter then runs with hack/adapter-config.yaml
(its memory provider for pushes, a prometheus provider for the prom_* metrics).
Unless --no-backends, it also runs the queue backends of hack/backends (all of them, or
those --backends names), each on its fixed 127.0.0.1 port, and adds each one's provider
to the adapter's config (so only with Prometheus and the adapter).
A component that exits while 'up' waits for it is started once more, with the reason
(exit code or signal) printed.
Everything lives in the state folder (--dir, $METRICSCALE_CLUSTER_DIR, default
~/.cache/metricscale/cluster); 'down' stops exactly the processes 'up' started.

Environment: METRICSCALE_CLUSTER_DIR (state folder), METRICSCALE_CACHE (cache root),
METRICSCALE_KEEP_ON_FAILURE=1 (leave components running when 'up' fails),
METRICSCALE_PROMETHEUS_BIN (default /usr/bin/prometheus).
`

// HPA controller modes of kube-controller-manager (the state file's STATE_HPA_CONTROLLER).
const (
	HPAOn       = "true"     // in kube-controller-manager
	HPAOff      = "false"    // not at all: the autoscaler reconciles the HPAs (--hpa-objects)
	HPASeparate = "separate" // alone in kube-controller-manager-hpa
)

// Options are the flags of the verbs.
type Options struct {
	Dir            string // state folder, absolute
	Nodes          int
	HPASyncPeriod  string
	HPAController  string // HPAOn, HPAOff or HPASeparate
	KubernetesOnly bool
	Prometheus     bool
	Backends       bool
	// BackendNames limits the backends to these (--backends); nil means all.
	BackendNames []string
	Record       bool
	PodStages    bool
	// RealNode adds one real kubelet node (RealNodeName) with containerd, kube-proxy and
	// CoreDNS beside the kwok nodes (--real-node).
	RealNode bool
	// KEDA runs KEDA's operator and metrics server, unregistered, behind the adapter's
	// provider keda (--keda).
	KEDA bool
	// KEDAAPIQPS, when not 0, raises KEDA's client rate limit and ScaledObject reconciles
	// (--keda-api-qps); 0 is KEDA's defaults.
	KEDAAPIQPS    int
	Purge         bool
	ChangeFeedURL string // "" for the adapter's feed, "none" for no feed
	// ForUp: build builds only what up with the same flags runs (build --for-up).
	ForUp bool

	// explicit holds the flags given on the command line, to compare with a running cluster.
	explicit map[string]bool
}

// DefaultOptions are the flags' defaults; dir is the state folder.
func DefaultOptions(dir string) Options {
	return Options{
		Dir: dir, Nodes: 1, HPASyncPeriod: "15s", HPAController: HPAOn,
		Prometheus: true, Backends: true, Record: true, PodStages: true,
	}
}

// Invocation is a parsed command line: a verb, its options and its other arguments
// (kubectl's arguments, a backend's name).
type Invocation struct {
	Verb    string
	Options Options
	Args    []string
}

// maxKEDAAPIQPS bounds --keda-api-qps.
const maxKEDAAPIQPS = 100000

var (
	positiveInt = regexp.MustCompile(`^[1-9][0-9]*$`)
	shortPeriod = regexp.MustCompile(`^[0-9]+(ms|s|m)$`)
)

// ParseArgs parses hack/cluster.sh's arguments as the script did: getenv supplies
// METRICSCALE_CLUSTER_DIR, defaultDir is the state folder without it, and cwd makes a
// relative --dir absolute.
func ParseArgs(args []string, getenv func(string) string, defaultDir, cwd string) (Invocation, error) {
	inv := Invocation{}
	if len(args) > 0 {
		inv.Verb, args = args[0], args[1:]
	}
	dir := getenv("METRICSCALE_CLUSTER_DIR")
	if dir == "" {
		dir = defaultDir
	}
	o := DefaultOptions(dir)
	o.explicit = map[string]bool{}
	nodes, kedaQPS := "1", ""
	for len(args) > 0 {
		arg := args[0]
		// kubectl takes every argument but --dir; NAME of the *-backend verbs is positional.
		passthrough := (inv.Verb == "kubectl" || inv.Verb == "load-images" || inv.Verb == "build" || strings.HasSuffix(inv.Verb, "-backend")) && !strings.HasPrefix(arg, "--") ||
			inv.Verb == "kubectl" && arg != "--dir" && !strings.HasPrefix(arg, "--dir=")
		if passthrough {
			inv.Args = append(inv.Args, arg)
			args = args[1:]
			continue
		}
		name, value, hasValue := strings.Cut(arg, "=")
		if !strings.HasPrefix(arg, "--") {
			name, hasValue = arg, false
		}
		args = args[1:]
		needValue := func() (string, error) {
			if hasValue {
				if value == "" {
					return "", fmt.Errorf("%s needs a value", name)
				}
				return value, nil
			}
			if len(args) == 0 || args[0] == "" {
				return "", fmt.Errorf("%s needs a value", name)
			}
			v := args[0]
			args = args[1:]
			return v, nil
		}
		noValue := func() error {
			if hasValue {
				return fmt.Errorf("unknown argument: %s (see hack/cluster.sh --help)", arg)
			}
			return nil
		}
		var err error
		switch name {
		case "--dir":
			o.Dir, err = needValue()
		case "--nodes":
			nodes, err = needValue()
		case "--hpa-sync-period":
			o.HPASyncPeriod, err = needValue()
		case "--change-feed-url":
			o.ChangeFeedURL, err = needValue()
		case "--backends":
			var v string
			if v, err = needValue(); err == nil {
				o.BackendNames = strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' })
				o.Backends = len(o.BackendNames) > 0
			}
		case "--no-hpa-controller":
			o.HPAController, err = HPAOff, noValue()
		case "--separate-hpa-controller":
			o.HPAController, err = HPASeparate, noValue()
		case "--kubernetes-only":
			o.KubernetesOnly, err = true, noValue()
		case "--no-prometheus":
			o.Prometheus, err = false, noValue()
		case "--no-backends":
			o.Backends, err = false, noValue()
		case "--no-record":
			o.Record, err = false, noValue()
		case "--no-pod-stages":
			o.PodStages, err = false, noValue()
		case "--real-node":
			o.RealNode, err = true, noValue()
		case "--keda":
			o.KEDA, err = true, noValue()
		case "--keda-api-qps":
			kedaQPS, err = needValue()
		case "--purge":
			o.Purge, err = true, noValue()
		case "--for-up":
			o.ForUp, err = true, noValue()
		case "-h", "--help":
			inv.Verb = "help"
		default:
			return inv, fmt.Errorf("unknown argument: %s (see hack/cluster.sh --help)", arg)
		}
		if err != nil {
			return inv, err
		}
		if name != "--dir" && name != "--purge" && name != "--change-feed-url" {
			o.explicit[strings.TrimPrefix(name, "--")] = true
		}
	}
	if !positiveInt.MatchString(nodes) {
		return inv, fmt.Errorf("--nodes must be a positive integer, not '%s'", nodes)
	}
	o.Nodes, _ = strconv.Atoi(nodes)
	if !shortPeriod.MatchString(o.HPASyncPeriod) {
		return inv, fmt.Errorf("--hpa-sync-period must be a duration such as 5s or 1m, not '%s'", o.HPASyncPeriod)
	}
	if kedaQPS != "" {
		// The cap keeps the burst, 2N, far from overflowing.
		if o.KEDAAPIQPS, _ = strconv.Atoi(kedaQPS); !positiveInt.MatchString(kedaQPS) || o.KEDAAPIQPS > maxKEDAAPIQPS {
			return inv, fmt.Errorf("--keda-api-qps must be a positive integer up to %d, not '%s'", maxKEDAAPIQPS, kedaQPS)
		}
		if !o.KEDA {
			return inv, errors.New("--keda-api-qps needs --keda")
		}
	}
	if !filepath.IsAbs(o.Dir) {
		o.Dir = filepath.Join(cwd, o.Dir)
	}
	o.Dir = filepath.Clean(o.Dir)
	inv.Options = o
	return inv, nil
}

// Explicit reports whether flag (without its dashes) was given on the command line.
func (o Options) Explicit(flag string) bool { return o.explicit[flag] }

// hpaControllerMode says how kube-controller-manager's HPA controller runs, for logs.
func hpaControllerMode(mode, period string) string {
	switch mode {
	case HPAOn:
		return "on, sync period " + period
	case HPASeparate:
		return "alone in kube-controller-manager-hpa, sync period " + period
	}
	return "off"
}
