package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommandLine builds the adapter and runs it as hack/cluster.sh and an
// operator would, without a cluster: check-config, and flag errors.
func TestCommandLine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "adapter")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("providers:\n- name: a\n  type: memory\n- name: b\n  type: foo\nroutes: [{metric: '*', provider: a}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		args     []string
		code     int
		contains string
	}{
		{"valid config", []string{"check-config", "-f", "../../manifests/adapter/config.yaml"}, 0, "valid (1 providers, 1 routes, 0 warnings)"},
		{"invalid config", []string{"check-config", "-f", bad}, 1, `providers[1].type: unknown "foo"`},
		{"check-config without -f", []string{"check-config"}, 2, "-f FILE is required"},
		{"unknown flag", []string{"--no-such-flag"}, 2, "unknown flag"},
		{"push without token", []string{"--push-port=6445", "--secure-port=0"}, 1, "--push-token-file: required"},
		{"help", []string{"--help"}, 0, "--push-token-file"},
		{"prometheus-adapter's leading program name", []string{"/adapter", "--help"}, 0, "--push-token-file"},
		{"another argument", []string{"serve"}, 2, `unexpected argument "serve"`},
		{"version", []string{"--version"}, 0, "metricscale-adapter dev (commit "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := exec.Command(bin, tc.args...).CombinedOutput()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code || !strings.Contains(string(out), tc.contains) {
				t.Errorf("adapter %v: exit %d, output:\n%s\nwant exit %d containing %q", tc.args, code, out, tc.code, tc.contains)
			}
		})
	}
}
