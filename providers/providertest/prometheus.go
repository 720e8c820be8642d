package providertest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metricscale/metricscale/hack/freeport"
)

// PrometheusBinary is Debian's Prometheus, which the integration tests run.
const PrometheusBinary = "/usr/bin/prometheus"

// NeedPrometheus skips the test when Debian's Prometheus is not installed.
func NeedPrometheus(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(PrometheusBinary); err != nil {
		t.Skipf("%s is absent (install Debian's prometheus package to run this test): %v", PrometheusBinary, err)
	}
}

// StartPrometheus runs Debian's Prometheus with config (prometheus.yml's
// text) on a free loopback port until the test ends, and returns its URL;
// its log is printed when the test failed. files (name → content) are
// written next to the config first, mode 0600, for the config to name as
// $DIR/name (a token's credentials_file, say).
func StartPrometheus(t testing.TB, config string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(strings.ReplaceAll(config, "$DIR", dir)), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freeport.For(t)
	cmd := exec.Command(PrometheusBinary,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port),
		"--log.level=warn")
	logs, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logs.Name())
			t.Logf("prometheus log:\n%s", b)
		}
	})
	return fmt.Sprintf("http://127.0.0.1:%d", port)
}
