package cluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPrometheusConfig checks the jobs and rules of the generated Prometheus config, and
// has promtool (Debian's prometheus package; CI installs it) check it.
func TestPrometheusConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name            string
		withMetricscale bool
		set             func(o *Options)
		jobs            []string
		rules           bool
	}{
		{"everything", true, func(*Options) {}, []string{"exporter", "metricscale-adapter", "metricscale-autoscaler"}, true},
		{"kubernetes only", true, func(o *Options) { o.KubernetesOnly = true }, []string{"exporter"}, false},
		{"a checkout without the adapter", false, func(*Options) {}, []string{"exporter"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := DefaultOptions("")
			tt.set(&o)
			c := newTestCluster(t, tt.withMetricscale, o)
			rules := filepath.Join(c.RepoRoot, alertsFile)
			if err := os.MkdirAll(filepath.Dir(rules), 0o755); err != nil {
				t.Fatal(err)
			}
			real, err := os.ReadFile(filepath.Join("..", "..", alertsFile))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(rules, real, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := c.writePrometheusConfig(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(c.Dir, "prometheus", "prometheus.yml")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			config := string(b)
			if n := strings.Count(config, "job_name:"); n != len(tt.jobs) {
				t.Errorf("%d jobs, want %v:\n%s", n, tt.jobs, config)
			}
			for _, j := range tt.jobs {
				if !strings.Contains(config, "job_name: "+j+"\n") {
					t.Errorf("no job %s:\n%s", j, config)
				}
			}
			if tt.rules != strings.Contains(config, "rule_files:") {
				t.Errorf("rule_files in the config: %v, want %v:\n%s", !tt.rules, tt.rules, config)
			}
			if tt.withMetricscale && tt.jobs[len(tt.jobs)-1] == "metricscale-autoscaler" {
				if !strings.Contains(config, "credentials_file: "+filepath.Join(c.Dir, ScraperTokenFile)+"\n") {
					t.Errorf("the adapter's job presents no scraper token:\n%s", config)
				}
				if !strings.Contains(config, "scheme: https\n    authorization:\n      credentials_file: "+filepath.Join(c.Dir, ScraperTokenFile)+"\n    tls_config:\n      insecure_skip_verify: true\n    static_configs:\n      - targets: ['127.0.0.1:6446']") {
					t.Errorf("the autoscaler's job does not scrape its --bind-address over HTTPS with the token:\n%s", config)
				}
			}
			promtool, err := exec.LookPath("promtool")
			if err != nil {
				if os.Getenv("CI") != "" {
					t.Fatal("promtool not found and CI is set: .ci/run installs Debian's prometheus package (hack/cluster.sh install-prometheus), which ships it")
				}
				t.Skip("promtool not found (apt-get install prometheus): the config was not checked")
			}
			if out, err := exec.Command(promtool, "check", "config", path).CombinedOutput(); err != nil {
				t.Errorf("promtool check config: %v\n%s\n%s", err, out, config)
			}
		})
	}
}
