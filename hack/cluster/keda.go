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

// KEDA (up --keda): its operator and its metrics server, built from the Go module
// github.com/kedacore/keda/v2 (hack/cluster/build/keda), run as host processes like
// kube-controller-manager, in namespace keda as ServiceAccount keda/keda-operator with
// KEDA's own RBAC and CRDs from that module. The metrics server is not registered: no
// APIService points at it. metricscale keeps v1beta1.external.metrics.k8s.io, and the
// adapter's provider "keda" (hack/keda-adapter-config.yaml) forwards KEDA's metric names
// (s0-<scaler>-..., s1-...) to it. KEDA's admission webhooks are not run.
const (
	// kedaVersion is what build/keda/go.mod requires (a test checks).
	kedaVersion = "v2.21.0"

	KEDANamespace = "keda"
	kedaSA        = "keda-operator"

	KEDAOperatorMetricsPort = 6460 // the operator's /metrics
	KEDAOperatorHealthPort  = 6461 // its /healthz and /readyz
	KEDAOperatorGRPCPort    = 6462 // the metrics service the metrics server reads (mutual TLS)
	KEDAMetricsServerPort   = 6463 // the metrics server's external.metrics.k8s.io (HTTPS)
	// KEDAMetricsServerMetricsPort is the metrics server's own /metrics: KEDA binds it on
	// every interface (its --port takes no address).
	KEDAMetricsServerMetricsPort = 6464

	// kedaRaisedMaxReconciles is the operator's concurrent ScaledObject reconciles with
	// --keda-api-qps (KEDA's default: 5): the value KEDA's maintainers suggest trying first
	// at scale (kedacore/keda#6063); with 5 workers a raised rate limit is not used up.
	kedaRaisedMaxReconciles = 20
)

func withKEDA(c *Cluster) bool { return c.KEDA }

// kedaCertDir holds what both KEDA processes read from their --cert-dir: ca.crt, tls.crt,
// tls.key (KEDA's names). One pair, signed by the cluster CA, for the operator's gRPC
// server, the metrics server's gRPC client (mutual TLS) and the metrics server's HTTPS.
func (c *Cluster) kedaCertDir() string { return filepath.Join(c.Dir, "keda", "certs") }

// KEDAMetricsServerURL is where KEDA's metrics server serves external.metrics.k8s.io.
func KEDAMetricsServerURL() string { return secure(KEDAMetricsServerPort, "") }

// kedaEnv is what both processes read from their environment in a pod.
func kedaEnv(c *Cluster) []string {
	return []string{
		"KUBECONFIG=" + filepath.Join(c.Dir, "kubeconfigs", kedaSA+".kubeconfig"),
		"WATCH_NAMESPACE=", "POD_NAMESPACE=" + KEDANamespace, "KEDA_CLUSTER_OBJECT_NAMESPACE=" + KEDANamespace,
	}
}

// kedaOperatorEnv adds the operator's reconcile concurrency with --keda-api-qps.
func kedaOperatorEnv(c *Cluster) []string {
	env := kedaEnv(c)
	if c.KEDAAPIQPS > 0 {
		env = append(env, "KEDA_SCALEDOBJECT_CTRL_MAX_RECONCILES="+strconv.Itoa(kedaRaisedMaxReconciles))
	}
	return env
}

// kedaRateFlags is the client rate limit both KEDA processes take (the same flag names in
// v2.21.0's cmd/operator and cmd/adapter); none at KEDA's defaults (20 and 30).
func kedaRateFlags(c *Cluster) []string {
	if c.KEDAAPIQPS <= 0 {
		return nil
	}
	return flags("kube-api-qps", strconv.Itoa(c.KEDAAPIQPS), "kube-api-burst", strconv.Itoa(kedaBurst(c.KEDAAPIQPS)))
}

// kedaBurst is 2N: room for a reconcile's requests in a row, as KEDA's 30 is to its 20.
func kedaBurst(qps int) int { return 2 * qps }

// KEDARaisedLimits says what up --keda-api-qps qps sets, for status and results.
func KEDARaisedLimits(qps int) string {
	return fmt.Sprintf("--kube-api-qps %d --kube-api-burst %d, KEDA_SCALEDOBJECT_CTRL_MAX_RECONCILES=%d (KEDA's defaults: 20, 30, 5)",
		qps, kedaBurst(qps), kedaRaisedMaxReconciles)
}

// kedaComponents are KEDA's processes, in start order: the metrics server reads the
// operator's metrics service.
func kedaComponents() []*Component {
	return []*Component{{
		Name: "keda-operator", Ports: []int{KEDAOperatorMetricsPort, KEDAOperatorHealthPort, KEDAOperatorGRPCPort},
		Enabled: withKEDA, Binary: cached("keda-operator"), Env: kedaOperatorEnv,
		Args: func(c *Cluster) []string {
			// Certificates from files: no rotation, so it neither writes Secret kedaorg-certs
			// nor patches an APIService or a webhook configuration.
			return append(flags("leader-elect", "false",
				"metrics-bind-address", "127.0.0.1:"+strconv.Itoa(KEDAOperatorMetricsPort),
				"health-probe-bind-address", "127.0.0.1:"+strconv.Itoa(KEDAOperatorHealthPort),
				"metrics-service-bind-address", "127.0.0.1:"+strconv.Itoa(KEDAOperatorGRPCPort),
				"enable-cert-rotation", "false", "enable-webhook-patching", "false", "enable-apiservice-patching", "false",
				"cert-dir", c.kedaCertDir(), "ca-dir", filepath.Join(c.Dir, "keda", "ca"),
				"zap-log-level", "info", "zap-encoder", "console", "zap-time-encoding", "rfc3339"), kedaRateFlags(c)...)
		},
		Health:       probeURL(local(KEDAOperatorHealthPort, "/healthz"), plainHTTP),
		Ready:        probeURL(local(KEDAOperatorHealthPort, "/readyz"), plainHTTP),
		ReadyTimeout: 60 * time.Second, ReadyWhat: "ready",
	}, {
		Name: "keda-metrics-server", Ports: []int{KEDAMetricsServerPort, KEDAMetricsServerMetricsPort},
		Enabled: withKEDA, Binary: cached("keda-metrics-server"), Env: kedaEnv,
		Args: func(c *Cluster) []string {
			kc := filepath.Join(c.Dir, "kubeconfigs", kedaSA+".kubeconfig")
			certs := c.kedaCertDir()
			return append(flags("secure-port", strconv.Itoa(KEDAMetricsServerPort), "bind-address", "127.0.0.1",
				"cert-dir", certs, "tls-cert-file", filepath.Join(certs, "tls.crt"), "tls-private-key-file", filepath.Join(certs, "tls.key"),
				"lister-kubeconfig", kc, "authentication-kubeconfig", kc, "authorization-kubeconfig", kc,
				"metrics-service-address", "127.0.0.1:"+strconv.Itoa(KEDAOperatorGRPCPort),
				"port", strconv.Itoa(KEDAMetricsServerMetricsPort),
				"zap-log-level", "info", "zap-encoder", "console", "zap-time-encoding", "rfc3339"), kedaRateFlags(c)...)
		},
		Health:       probeURL(secure(KEDAMetricsServerPort, "/healthz"), insecureTLS),
		Ready:        probeURL(secure(KEDAMetricsServerPort, "/readyz"), insecureTLS),
		ReadyTimeout: 90 * time.Second, ReadyWhat: "ready",
	}}
}

// kedaManifests are the files of KEDA's module that up applies, relative to its root:
// its namespace, ServiceAccount and RBAC (the operator's, and the metrics server's
// delegated authentication and authorization), and every CRD of config/crd/bases (the
// operator also runs the CloudEventSource controllers).
var kedaManifests = []string{
	"config/general/namespace.yaml",
	"config/service_account/service_account.yaml",
	"config/rbac/role.yaml",
	"config/rbac/role_binding.yaml",
	"config/metrics-server/role.yaml",
	"config/metrics-server/role_binding.yaml",
}

var kedaCRDs = []string{
	"keda.sh_scaledobjects.yaml", "keda.sh_scaledjobs.yaml",
	"keda.sh_triggerauthentications.yaml", "keda.sh_clustertriggerauthentications.yaml",
	"eventing.keda.sh_cloudeventsources.yaml", "eventing.keda.sh_clustercloudeventsources.yaml",
}

// kedaModuleDir is the folder of KEDA's module in the module cache (after the build).
func (c *Cluster) kedaModuleDir(ctx context.Context) (string, error) {
	dir, err := run(ctx, filepath.Join(c.RepoRoot, "hack", "cluster", "build", "keda"), []string{"GOWORK=off", "GOFLAGS=-mod=readonly"}, nil,
		"go", "list", "-m", "-f", "{{.Dir}}", "github.com/kedacore/keda/v2")
	if err != nil {
		return "", fmt.Errorf("cannot find the github.com/kedacore/keda/v2 module folder: %w: %s", err, dir)
	}
	return strings.TrimSpace(dir), nil
}

// upKEDA applies KEDA's namespace, RBAC and CRDs, writes its certificates and kubeconfig,
// and starts its operator, then its metrics server.
func (c *Cluster) upKEDA(ctx context.Context) error {
	c.phaseBegin("start KEDA " + kedaVersion + " (operator, metrics server: unregistered, behind metricscale's provider keda)")
	mod, err := c.kedaModuleDir(ctx)
	if err != nil {
		return err
	}
	var docs []string
	for _, f := range kedaManifests {
		data, err := os.ReadFile(filepath.Join(mod, f))
		if err != nil {
			return fmt.Errorf("KEDA's module has no %s: %w", f, err)
		}
		docs = append(docs, string(data))
	}
	if err := c.apply(ctx, strings.Join(docs, "\n---\n")); err != nil {
		return fmt.Errorf("applying KEDA's namespace and RBAC failed: %w", err)
	}
	args := []string{"apply", "--server-side"}
	var crds []string
	for _, f := range kedaCRDs {
		args = append(args, "-f", filepath.Join(mod, "config", "crd", "bases", f))
		crds = append(crds, crdName(f))
	}
	if out, err := c.kubectl(ctx, "", args...); err != nil {
		return fmt.Errorf("applying KEDA's CRDs failed: %w: %s", err, strings.TrimSpace(out))
	}
	if err := c.waitCRDsEstablished(ctx, crds...); err != nil {
		return fmt.Errorf("KEDA's CRDs: %w", err)
	}
	dir := filepath.Join(c.Dir, "keda")
	for _, d := range []string{c.kedaCertDir(), filepath.Join(dir, "ca")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := c.writeKEDACerts(); err != nil {
		return err
	}
	if _, err := c.serviceAccountToken(ctx, KEDANamespace, kedaSA, dir); err != nil {
		return err
	}
	if err := c.startAndWait(ctx, "keda-operator"); err != nil {
		return err
	}
	if err := c.startAndWait(ctx, "keda-metrics-server"); err != nil {
		return err
	}
	c.phaseEnd("KEDA operator, metrics server")
	return nil
}

// crdName is the CRD's name from its file in config/crd/bases: GROUP_PLURAL.yaml.
func crdName(file string) string {
	group, plural, _ := strings.Cut(strings.TrimSuffix(file, ".yaml"), "_")
	return plural + "." + group
}

// writeKEDACerts writes KEDA's certificate folder from the cluster CA: one pair for server
// and client use, for 127.0.0.1 and localhost (and the Service names KEDA would use).
func (c *Cluster) writeKEDACerts() error {
	r := certRequest{name: "keda", cn: kedaSA, client: true, server: true,
		dns: []string{"localhost", "keda-operator", "keda-operator.keda.svc", "keda-operator.keda.svc.cluster.local",
			"keda-metrics-apiserver", "keda-metrics-apiserver.keda.svc", "keda-metrics-apiserver.keda.svc.cluster.local"},
		ips: []string{"127.0.0.1"}}
	if err := ensureCert(filepath.Join(c.Dir, "pki"), r); err != nil {
		return fmt.Errorf("KEDA's certificate: %w", err)
	}
	for from, to := range map[string]string{"ca.crt": "ca.crt", "keda.crt": "tls.crt", "keda.key": "tls.key"} {
		if err := copyFile(c.pki(from), filepath.Join(c.kedaCertDir(), to)); err != nil {
			return err
		}
	}
	return nil
}

// kedaAdapterConfig is the adapter config fragment of the provider "keda".
func (c *Cluster) kedaAdapterConfig() ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(c.RepoRoot, "hack", "keda-adapter-config.yaml"))
	if err != nil {
		return nil, fmt.Errorf("hack/keda-adapter-config.yaml: %w", err)
	}
	return data, nil
}

// RestartKEDAMetricsServer stops KEDA's metrics server (if it runs), runs during (when not
// nil) while it is stopped, starts it again, as its Deployment would restart it, and waits
// until it is ready. during's error is returned after the restart.
func (c *Cluster) RestartKEDAMetricsServer(ctx context.Context, during func(context.Context) error) error {
	st, err := ReadState(c.Dir)
	if err != nil {
		return fmt.Errorf("no cluster state in %s; start it with: hack/cluster.sh up --keda", c.Dir)
	}
	if !contains(st.Components, "keda-metrics-server") {
		return fmt.Errorf("the cluster in %s runs no KEDA (hack/cluster.sh up --keda)", c.Dir)
	}
	// The restarted process keeps the rate limit up gave it.
	c.KEDAAPIQPS, _ = strconv.Atoi(st.KEDAAPIQPS)
	if c.Alive("keda-metrics-server") {
		if err := c.stop("keda-metrics-server"); err != nil {
			return err
		}
	}
	var duringErr error
	if during != nil {
		duringErr = during(ctx)
	}
	if err := c.startAndWait(ctx, "keda-metrics-server"); err != nil {
		return err
	}
	return duringErr
}

// kedaAPIQPSState is --keda-api-qps as the state file keeps it: empty when unset.
func kedaAPIQPSState(o Options) string {
	if o.KEDAAPIQPS <= 0 || !o.KEDA {
		return ""
	}
	return strconv.Itoa(o.KEDAAPIQPS)
}
