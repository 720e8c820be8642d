package backends

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

func TestRegistry(t *testing.T) {
	t.Parallel()
	want := []string{"kafka", "nats", "postgresql", "rabbitmq", "redis"}
	if got := Names(); !slices.Equal(got, want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
	for _, n := range want {
		b, err := Lookup(n)
		if err != nil || b.Name() != n {
			t.Errorf("Lookup(%q) = %v, %v", n, b, err)
		}
	}
	if _, err := Lookup("mqtt"); err == nil || !strings.Contains(err.Error(), "kafka, nats, postgresql, rabbitmq, redis") {
		t.Errorf("Lookup(mqtt) = %v, want an error naming the known backends", err)
	}
}

// TestBackendFiles: each backend's fragment names its own provider with the state folder
// substituted, its env names only its own METRICSCALE_<NAME>_ variables, with the state
// folder made absolute, and its e2e metric is one its fragment serves.
func TestBackendFiles(t *testing.T) {
	t.Parallel()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range All() {
		t.Run(b.Name(), func(t *testing.T) {
			t.Parallel()
			cfg, err := b.AdapterConfig("state")
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(cfg), "@CLUSTER_DIR@") {
				t.Errorf("AdapterConfig left @CLUSTER_DIR@:\n%s", cfg)
			}
			if strings.Contains(string(cfg), "'@") || (strings.Contains(string(cfg), "file:") && !strings.Contains(string(cfg), filepath.Join(wd, "state", b.Name()))) {
				t.Errorf("AdapterConfig names files outside %s:\n%s", filepath.Join(wd, "state", b.Name()), cfg)
			}
			var parsed struct {
				Providers []struct {
					Name    string `json:"name"`
					Options struct {
						Metrics []struct {
							Name string `json:"name"`
						} `json:"metrics"`
					} `json:"options"`
				} `json:"providers"`
			}
			if err := yaml.Unmarshal(cfg, &parsed); err != nil {
				t.Fatal(err)
			}
			if len(parsed.Providers) != 1 || parsed.Providers[0].Name != b.Name() {
				t.Fatalf("AdapterConfig providers %+v, want one named %s", parsed.Providers, b.Name())
			}
			served := false
			for _, m := range parsed.Providers[0].Options.Metrics {
				served = served || m.Name == b.Queue().Metric
			}
			if !served || len(b.Queue().Selector) == 0 {
				t.Errorf("Queue() = %+v: its metric is not one the fragment serves, or it has no selector", b.Queue())
			}
			env := b.Env("state")
			if len(env) == 0 {
				t.Fatal("Env is empty")
			}
			prefix := "METRICSCALE_" + strings.ToUpper(b.Name()) + "_"
			for k, v := range env {
				if !strings.HasPrefix(k, prefix) {
					t.Errorf("Env names %s, want only %s*", k, prefix)
				}
				if strings.HasSuffix(k, "_FILE") && !strings.HasPrefix(v, filepath.Join(wd, "state", b.Name())+"/") {
					t.Errorf("%s = %s, want a file under %s", k, v, filepath.Join(wd, "state", b.Name()))
				}
			}
		})
	}
}

func TestNewPassword(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "password")
	if err := newPassword(f, 24); err != nil {
		t.Fatal(err)
	}
	first, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[A-Za-z0-9]{24}$`).Match(first) {
		t.Errorf("password %q, want 24 letters and digits", first)
	}
	if st, _ := os.Stat(f); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	if err := newPassword(f, 24); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(f); string(again) != string(first) {
		t.Errorf("the second call replaced the password %q with %q", first, again)
	}
}

// TestDaemon: a process started with a pid file is found by its name only, stops on
// SIGTERM, and leaves no pid file.
func TestDaemon(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "sleep.pid")
	d, err := startDaemon(nil, pidfile, filepath.Join(dir, "out"), "sleep", "600")
	if err != nil {
		t.Fatal(err)
	}
	sleepPID := d.pid // d is reused below
	t.Cleanup(func() { signalTerm(sleepPID) })
	if pid, ok := pidfilePID(pidfile, "sleep"); !ok || pid != d.pid {
		t.Fatalf("pidfilePID = %d, %v; want %d, true", pid, ok, d.pid)
	}
	if _, ok := pidfilePID(pidfile, "redis-server"); ok {
		t.Error("pidfilePID found a sleep as redis-server")
	}
	ctx := context.Background()
	// nothing listens on port 1 (privileged, unused here)
	if err := stopPidfile(ctx, pidfile, "sleep", 1, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the process still runs after stopPidfile")
	}
	if _, err := os.Stat(pidfile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the pid file is still there: %v", err)
	}
	// a process that exits at once is seen to exit, not waited for until the timeout
	d, err = startDaemon(nil, "", filepath.Join(dir, "out"), "false")
	if err != nil {
		t.Fatal(err)
	}
	if err := waitStarted(ctx, d, time.Hour, func() bool { return false }); !errors.Is(err, errExited) {
		t.Errorf("waitStarted = %v, want errExited", err)
	}
}

// TestFragmentFiles: hack/cluster.sh lists the backends as the NAME.yaml next to a NAME.go;
// they must be the registered ones.
func TestFragmentFiles(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		name := strings.TrimSuffix(f, ".yaml")
		if _, err := os.Stat(name + ".go"); err == nil {
			names = append(names, name)
		}
	}
	if !slices.Equal(names, Names()) {
		t.Errorf("NAME.yaml with a NAME.go: %v; registered: %v", names, Names())
	}
}
