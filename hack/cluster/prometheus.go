package cluster

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// InstallPrometheus makes sure Debian's prometheus package (its binary /usr/bin/prometheus)
// is installed, installing it with apt-get when it is not (root only). The package's own
// service is never used: up runs its own prometheus process with a generated config.
func (c *Cluster) InstallPrometheus(ctx context.Context) error {
	if isExecutable(c.PrometheusBin) {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s is missing; install Debian's package as root (apt-get install --no-install-recommends prometheus), or use 'up --no-prometheus'", c.PrometheusBin)
	}
	t0 := time.Now()
	ilog := filepath.Join(c.CacheRoot, "install-prometheus.log")
	if err := os.MkdirAll(c.CacheRoot, 0o755); err != nil {
		return err
	}
	c.logf("    installing Debian's prometheus package (apt-get; log %s)", ilog)
	// The package ships a service and its postinst may try to start it: without systemd that
	// can fail, and a running service would take port 9090. A policy-rc.d that forbids
	// starting services (exit 101) prevents both; one that already exists is left alone.
	// A shell is the tool here: the apt-get lines, as a person would type them.
	script := `set -e
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  trap 'rm -f "$policy"' EXIT
  printf '#!/bin/sh\n# written by metricscale hack/cluster.sh while installing prometheus\nexit 101\n' >"$policy"
  chmod 755 "$policy"
fi
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=300 update
apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends prometheus`
	out, err := run(ctx, "", nil, nil, "sh", "-c", script)
	_ = os.WriteFile(ilog, []byte(out), 0o644)
	if !isExecutable(c.PrometheusBin) {
		fmt.Fprintln(c.Err, lastLines(strings.TrimSpace(out), 20))
		return fmt.Errorf("installing prometheus failed (%v; full log: %s)", err, ilog)
	}
	// A package script that failed only at starting the service leaves the binary usable.
	if err != nil {
		c.warnf("apt-get failed while installing prometheus (%v), but %s is there (see %s)", err, c.PrometheusBin, ilog)
	}
	version, _ := run(ctx, "", nil, nil, c.PrometheusBin, "--version")
	first, _, _ := strings.Cut(version, "\n")
	c.logf("    installed %s in %s", first, secs(time.Since(t0)))
	return nil
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// writePrometheusConfig writes DIR/prometheus/prometheus.yml: scrape hack/exporter every
// second and, when they run, the metricscale adapter and autoscaler (scrapeJobs), with
// metricscale's alert rules loaded (alertsFile).
func (c *Cluster) writePrometheusConfig() error {
	dir := filepath.Join(c.Dir, "prometheus")
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return err
	}
	config := `# Written by hack/cluster.sh up: scrape hack/exporter every second.
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
`
	rules, err := c.copyAlertRules(dir)
	if err != nil {
		return err
	}
	if rules != "" {
		config += "rule_files:\n- " + rules + "\n"
	}
	// Until writeScraperToken writes the token, an empty one: the scrapes of the adapter
	// fail (401) instead of the config (which names the file).
	if token := filepath.Join(c.Dir, ScraperTokenFile); c.withAdapter() && !fileExists(token) {
		if err := writeFileAtomic(token, nil, 0o600); err != nil {
			return err
		}
	}
	config += `scrape_configs:
  - job_name: exporter
    # The labels the tests set (and the exporter's pod and node labels) stay as they are.
    honor_labels: true
    static_configs:
      - targets: ['127.0.0.1:` + strconv.Itoa(ExporterPort) + `']
` + c.scrapeJobs(dir)
	return writeFileAtomic(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644)
}

// alertsFile is metricscale's alert rules (the chart's PrometheusRule), which the
// cluster's Prometheus evaluates: the dashboard e2e test checks they evaluate on the
// real series.
const alertsFile = "manifests/chart/files/alerts.yaml"

// copyAlertRules copies alertsFile into dir and returns the copy's path, or "" when the
// checkout has none or the cluster runs no adapter.
func (c *Cluster) copyAlertRules(dir string) (string, error) {
	src := filepath.Join(c.RepoRoot, alertsFile)
	if !c.withAdapter() || !fileExists(src) {
		return "", nil
	}
	dst := filepath.Join(dir, "alerts.yaml")
	data, err := os.ReadFile(src)
	if err != nil {
		return "", err
	}
	return dst, writeFileAtomic(dst, data, 0o644)
}

// ScraperTokenFile is the bearer token Prometheus presents to the adapter and the
// autoscaler (in the state folder): ServiceAccount metricscale/metricscale-scraper's,
// bound to the scraper ClusterRole of manifests/monitoring (writeScraperToken).
const ScraperTokenFile = "prometheus/scraper-token"

// scrapeJobs are the scrape jobs of the metricscale adapter and autoscaler, named as
// their Services in manifests/ (the jobs the alert rules select): every 5 s, with the
// scraper's token. The adapter serves /metrics on its secure port, behind delegated
// authentication and authorization; the autoscaler as its flags say (autoscalerMetrics).
// Both certificates are self-signed by the processes on 127.0.0.1, which is what
// insecure_skip_verify trusts here: the loopback address of this machine. Prometheus
// reads the token file at each scrape.
func (c *Cluster) scrapeJobs(dir string) string {
	token := filepath.Join(dir, "scraper-token")
	job := func(name, scheme, target string) string {
		s := `  - job_name: ` + name + `
    scrape_interval: 5s
    scrape_timeout: 4s
    scheme: ` + scheme + `
`
		if scheme == "https" {
			s += `    authorization:
      credentials_file: ` + token + `
    tls_config:
      insecure_skip_verify: true
`
		}
		return s + `    static_configs:
      - targets: ['` + target + `']
`
	}
	var jobs string
	if c.withAdapter() {
		jobs += job("metricscale-adapter", "https", "127.0.0.1:"+strconv.Itoa(AdapterPort))
	}
	if c.withAutoscaler() {
		scheme, target := c.autoscalerMetrics()
		jobs += job("metricscale-autoscaler", scheme, target)
	}
	return jobs
}

// autoscalerMetrics returns the scheme and address of the autoscaler's /metrics, from the
// flags it runs with: HTTPS with delegated authentication and authorization on
// --bind-address, plain HTTP with --insecure-metrics.
func (c *Cluster) autoscalerMetrics() (scheme, addr string) {
	scheme, addr = "https", "127.0.0.1:"+strconv.Itoa(AutoscalerPort)
	for _, a := range autoscalerArgs(c) {
		if v, ok := strings.CutPrefix(a, "--bind-address="); ok {
			addr = v
		}
		if a == "--insecure-metrics" || a == "--insecure-metrics=true" {
			scheme = "http"
		}
	}
	return scheme, addr
}

// writeScraperToken creates ServiceAccount metricscale/metricscale-scraper, binds it to
// the scraper ClusterRole of manifests/monitoring (Kubernetes' system:monitoring in a
// checkout without it) and writes a token of it to ScraperTokenFile.
func (c *Cluster) writeScraperToken(ctx context.Context) error {
	const ns, sa = "metricscale", "metricscale-scraper"
	role := "system:monitoring" // Kubernetes' own: GET on /metrics, /livez, /readyz
	if fileExists(filepath.Join(c.RepoRoot, scraperRBAC)) {
		if err := c.applyFile(ctx, scraperRBAC, "metricscale-scraper-rbac.log"); err != nil {
			return err
		}
		role = scraperClusterRole
	}
	manifests := `apiVersion: v1
kind: ServiceAccount
metadata:
  name: ` + sa + `
  namespace: ` + ns + `
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: ` + sa + `
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: ` + role + `
subjects:
- kind: ServiceAccount
  name: ` + sa + `
  namespace: ` + ns + `
`
	if err := c.apply(ctx, manifests); err != nil {
		return fmt.Errorf("the scraper's ServiceAccount and binding: %w", err)
	}
	token, err := c.kubectlStdout(ctx, "-n", ns, "create", "token", sa, "--duration=24h")
	if err != nil {
		return fmt.Errorf("could not create a token for ServiceAccount %s/%s: %w", ns, sa, err)
	}
	return writeFileAtomic(filepath.Join(c.Dir, ScraperTokenFile), []byte(token), 0o600)
}

// startPrometheus starts Prometheus on the data in DIR/prometheus/data (kept by
// stop-prometheus and start-prometheus, removed by up and down); it does not wait.
func (c *Cluster) startPrometheus(ctx context.Context) error {
	_ = os.Remove(filepath.Join(c.Dir, "run", "prometheus.paused"))
	return c.startComponent(ctx, "prometheus")
}

// waitPrometheus waits until Prometheus is ready and done with a successful scrape of the
// exporter after since: a restarted Prometheus still answers with the samples from before.
func (c *Cluster) waitPrometheus(ctx context.Context, since time.Time) error {
	if err := c.waitReady(ctx, "prometheus"); err != nil {
		return err
	}
	// (timestamp() of a plain selector is the sample's time, of an expression the query's.)
	query := fmt.Sprintf(`timestamp(up{job="exporter"}) > %.3f and on(instance) up{job="exporter"} == 1`,
		float64(since.UnixMilli())/1000)
	u := local(PrometheusPort, "/api/v1/query?query="+url.QueryEscape(query))
	return c.waitFor(ctx, "prometheus", 30*time.Second, "done with a scrape of the exporter", func(ctx context.Context) error {
		out, err := c.probe(ctx, u, plainHTTP)
		if err != nil {
			return err
		}
		if !strings.Contains(out, `"result":[{`) {
			return fmt.Errorf("no successful scrape of the exporter yet (%s): %s", query, out)
		}
		return nil
	})
}

// prometheusCommand checks that the cluster runs Prometheus and takes the state folder's lock.
func (c *Cluster) prometheusCommand(ctx context.Context) (func(), error) {
	st, err := ReadState(c.Dir)
	if err != nil {
		return nil, fmt.Errorf("no cluster state in %s; start it with: hack/cluster.sh up", c.Dir)
	}
	if st.Prometheus != "true" {
		return nil, fmt.Errorf("the cluster in %s runs no Prometheus (started with --no-prometheus?)", c.Dir)
	}
	return lockFile(ctx, filepath.Join(c.Dir, ".lock"), 2*time.Minute)
}

// StopPrometheus stops only Prometheus: an outage, for e2e tests. The state folder
// remembers the stop (run/prometheus.paused), so that status and up see a paused
// component, not a failed one.
func (c *Cluster) StopPrometheus(ctx context.Context) error {
	unlock, err := c.prometheusCommand(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if c.Alive("prometheus") {
		if err := c.stop("prometheus"); err != nil {
			return err
		}
	} else {
		c.logf("prometheus is not running")
	}
	return os.WriteFile(filepath.Join(c.Dir, "run", "prometheus.paused"), nil, 0o644)
}

// StartPrometheus starts Prometheus again on the same data (the samples from before the
// outage stay) and returns once it has scraped the exporter again.
func (c *Cluster) StartPrometheus(ctx context.Context) error {
	unlock, err := c.prometheusCommand(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if pid, ok := c.PidOf("prometheus"); ok {
		_ = os.Remove(filepath.Join(c.Dir, "run", "prometheus.paused"))
		c.logf("prometheus is already running (pid %d)", pid)
		return nil
	}
	t0 := time.Now()
	// spawn truncates the log: keep the one of the run before the outage.
	if fileExists(c.logFile("prometheus")) {
		_ = os.Rename(c.logFile("prometheus"), filepath.Join(c.Dir, "logs", "prometheus.before-restart.log"))
	}
	if err := c.startPrometheus(ctx); err != nil {
		return err
	}
	if err := c.waitPrometheus(ctx, t0); err != nil {
		return err
	}
	c.logf("    prometheus ready in %s", secs(time.Since(t0)))
	return nil
}

// The scraper's RBAC: manifests/monitoring's ClusterRole that may GET /metrics (the file
// also binds it to kube-prometheus' ServiceAccount, absent here).
const (
	scraperRBAC        = "manifests/monitoring/scraper-rbac.yaml"
	scraperClusterRole = "metricscale-metrics-scraper"
)
