package backends

// What the backends share: where things live, Debian's packages, password files, port
// probes, processes with a pid file, and waiting.

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/metricscale/metricscale/hack/process"
)

// CacheRoot is where Install writes its logs and builds: METRICSCALE_CACHE, else
// $XDG_CACHE_HOME/metricscale, else ~/.cache/metricscale (as hack/cluster.sh).
func CacheRoot() string {
	if v := os.Getenv("METRICSCALE_CACHE"); v != "" {
		return v
	}
	if v := os.Getenv("XDG_CACHE_HOME"); v != "" {
		return filepath.Join(v, "metricscale")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.TempDir()
	}
	return filepath.Join(home, ".cache", "metricscale")
}

// DefaultDir is the cluster state folder when none is named: METRICSCALE_CLUSTER_DIR,
// else CacheRoot()/cluster (as hack/cluster.sh).
func DefaultDir() string {
	if v := os.Getenv("METRICSCALE_CLUSTER_DIR"); v != "" {
		return v
	}
	return filepath.Join(CacheRoot(), "cluster")
}

// absDir is dir made absolute: a server's config and the adapter's name its files.
func absDir(dir string) (string, error) {
	if dir == "" {
		return "", errors.New("no cluster state folder given")
	}
	return filepath.Abs(dir)
}

// mustAbs is absDir for Env, which cannot fail: a relative dir that cannot be made
// absolute (no working directory) stays as given.
func mustAbs(dir string) string {
	if a, err := filepath.Abs(dir); err == nil {
		return a
	}
	return dir
}

// ---------------------------------------------------------------- install

const policyRC = "/usr/sbin/policy-rc.d"

// aptInstall installs Debian's package with apt-get, as root, unless every one of bins
// is there; the output goes to cacheRoot/install-NAME.log. The package's postinst would
// start its service, which takes the package's default port (and without systemd can
// fail): a temporary policy-rc.d that forbids starting services (exit 101) prevents
// that; one that already exists is left alone. A package script that failed only at
// starting the service leaves the binaries usable: then it only warns.
func aptInstall(ctx context.Context, name, pkg, cacheRoot string, log io.Writer, bins ...string) error {
	if allExecutable(bins) {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s is missing; install Debian's package as root (apt-get install --no-install-recommends %s)", missing(bins), pkg)
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("%s is missing and there is no apt-get to install it", missing(bins))
	}
	if err := os.MkdirAll(cacheRoot, 0o755); err != nil {
		return fmt.Errorf("installing %s: %w", pkg, err)
	}
	logPath := filepath.Join(cacheRoot, "install-"+name+".log")
	fmt.Fprintf(log, "    installing Debian's %s package (apt-get; log %s)\n", pkg, logPath)
	out, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("installing %s: %w", pkg, err)
	}
	defer out.Close()
	if _, err := os.Lstat(policyRC); errors.Is(err, os.ErrNotExist) {
		script := fmt.Sprintf("#!/bin/sh\n# written by metricscale hack/backends (%s) while installing %s\nexit 101\n", name, pkg)
		if err := os.WriteFile(policyRC, []byte(script), 0o755); err != nil {
			return fmt.Errorf("writing %s: %w", policyRC, err)
		}
		defer os.Remove(policyRC)
	}
	var rc error
	for _, args := range [][]string{{"update"}, {"install", "-y", "--no-install-recommends", pkg}} {
		cmd := exec.CommandContext(ctx, "apt-get", append([]string{"-o", "DPkg::Lock::Timeout=300"}, args...)...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = out, out
		if rc = cmd.Run(); rc != nil {
			break
		}
	}
	if !allExecutable(bins) {
		return fmt.Errorf("installing %s failed (apt-get: %v; full log: %s):\n%s", pkg, rc, logPath, tail(logPath, 20))
	}
	if rc != nil {
		fmt.Fprintf(log, "warning: apt-get failed while installing %s (%v), but %s is there (see %s)\n", pkg, rc, bins[0], logPath)
	}
	return nil
}

func executable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

func allExecutable(bins []string) bool { return missing(bins) == "" }

// missing names the first of bins that is not an executable file, or "".
func missing(bins []string) string {
	for _, b := range bins {
		if !executable(b) {
			return b
		}
	}
	return ""
}

// needBins fails naming the first missing binary and how to install it.
func needBins(name string, bins ...string) error {
	if m := missing(bins); m != "" {
		return fmt.Errorf("%s is missing: install the %s backend first (hack/cluster.sh install-backends, as root)", m, name)
	}
	return nil
}

// ---------------------------------------------------------------- secrets

const passwordChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// newPassword writes a random password (n letters and digits, mode 0600) to file, once:
// an existing one is kept, so clients keep theirs across restarts.
func newPassword(file string, n int) error {
	if st, err := os.Stat(file); err == nil && st.Size() > 0 {
		return nil
	}
	if err := writeFileAtomic(file, []byte(randomString(passwordChars, n)), 0o600); err != nil {
		return fmt.Errorf("writing password file %s: %w", file, err)
	}
	return nil
}

// randomString is n characters of alphabet, uniformly.
func randomString(alphabet string, n int) string {
	out := make([]byte, 0, n)
	buf := make([]byte, 64)
	for len(out) < n {
		_, _ = rand.Read(buf) // never fails (crypto/rand panics instead)
		for _, b := range buf {
			// reject the tail of the byte range, so every character is equally likely
			if int(b) < 256-256%len(alphabet) && len(out) < n {
				out = append(out, alphabet[int(b)%len(alphabet)])
			}
		}
	}
	return string(out)
}

// writeFileAtomic writes data to a temporary file next to path, then renames it over path.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, perm); err != nil {
		return err
	}
	if err := os.Chmod(tmp, perm); err != nil { // WriteFile keeps an existing file's mode
		return err
	}
	return os.Rename(tmp, path)
}

// readSecret reads a password file Start wrote, named by env[key].
func readSecret(env map[string]string, key string) (string, error) {
	file := env[key]
	if file == "" {
		return "", fmt.Errorf("%s is not set (does the cluster run this backend?)", key)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("reading the password of %s: %w", key, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// need returns env[key], or an error naming it when it is empty.
func need(env map[string]string, key string) (string, error) {
	if v := env[key]; v != "" {
		return v, nil
	}
	return "", fmt.Errorf("%s is not set (does the cluster run this backend?)", key)
}

// ---------------------------------------------------------------- ports and waiting

// portOpen tells whether something accepts connections on 127.0.0.1:port.
func portOpen(port int) bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// portsFree fails naming the first of ports another process listens on.
func portsFree(what string, ports ...int) error {
	for _, p := range ports {
		if portOpen(p) {
			return fmt.Errorf("port %d on 127.0.0.1 is in use by another process; %s cannot start", p, what)
		}
	}
	return nil
}

var errTimeout = errors.New("timed out")

// waitUntil runs check every 100 ms until it returns true; errTimeout after timeout.
func waitUntil(ctx context.Context, timeout time.Duration, check func() bool) error {
	deadline := time.Now().Add(timeout)
	for !check() {
		if time.Now().After(deadline) {
			return errTimeout
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// waitPortsClosed waits until nothing listens on any of ports.
func waitPortsClosed(ctx context.Context, timeout time.Duration, ports ...int) error {
	return waitUntil(ctx, timeout, func() bool {
		for _, p := range ports {
			if portOpen(p) {
				return false
			}
		}
		return true
	})
}

// ---------------------------------------------------------------- processes

// pidfilePID returns the pid in pidfile when that process is alive and runs name (its
// command line holds name: a recycled pid is not ours).
func pidfilePID(pidfile, name string) (int, bool) {
	b, err := os.ReadFile(pidfile)
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 || !process.Alive(pid) {
		return 0, false
	}
	cmdline, err := process.Cmdline(pid)
	if err != nil || !bytes.Contains(cmdline, []byte(name)) {
		return 0, false
	}
	return pid, true
}

// command is exec.Command with env added to ours and our inherited files kept from it.
func command(ctx context.Context, env []string, name string, args ...string) *exec.Cmd {
	process.CloseInheritedFiles()
	cmd := exec.CommandContext(ctx, name, args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	return cmd
}

// run runs a command and returns its combined output, the error naming the command.
func run(ctx context.Context, env []string, stdin io.Reader, name string, args ...string) ([]byte, error) {
	cmd := command(ctx, env, name, args...)
	cmd.Stdin = stdin
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", filepath.Base(name), strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return out, nil
}

// daemon is a server process started in its own session.
type daemon struct {
	pid    int
	exited chan struct{} // closed once it exited (while we run: we reap it)
}

// startDaemon starts argv in its own session (it outlives us and our caller's process
// group), input /dev/null, output appended to out; with pidfile, its pid goes there.
func startDaemon(env []string, pidfile, out string, argv ...string) (*daemon, error) {
	f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// not CommandContext: the server must outlive the context of its start
	cmd := command(context.Background(), env, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	d := &daemon{pid: cmd.Process.Pid, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(d.exited) }()
	if pidfile != "" {
		if err := os.WriteFile(pidfile, []byte(strconv.Itoa(d.pid)+"\n"), 0o644); err != nil {
			_ = cmd.Process.Kill()
			return nil, fmt.Errorf("writing %s: %w", pidfile, err)
		}
	}
	return d, nil
}

// errExited says the server exited while we waited for it.
var errExited = errors.New("exited")

// waitStarted runs check every 100 ms until it returns true; errExited when the process
// exits first, errTimeout after timeout.
func waitStarted(ctx context.Context, d *daemon, timeout time.Duration, check func() bool) error {
	err := waitUntil(ctx, timeout, func() bool {
		select {
		case <-d.exited:
			return true
		default:
		}
		return check()
	})
	select {
	case <-d.exited:
		return errExited
	default:
		return err
	}
}

// stopPidfile stops the name process of pidfile if it runs (TERM, then KILL with a
// warning when it is still there after timeout), removes pidfile, and waits until port
// is closed (timeout more at most).
func stopPidfile(ctx context.Context, pidfile, name string, port int, timeout time.Duration) error {
	if pid, ok := pidfilePID(pidfile, name); ok {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		if waitUntil(ctx, timeout, func() bool { return !process.Alive(pid) }) != nil {
			klog.InfoS("Warning: the server did not stop on SIGTERM; killing it", "server", name, "pid", pid, "after", timeout)
			_ = syscall.Kill(pid, syscall.SIGKILL)
			_ = waitUntil(ctx, timeout, func() bool { return !process.Alive(pid) })
		}
	}
	_ = os.Remove(pidfile)
	if err := waitPortsClosed(ctx, timeout, port); err != nil {
		return fmt.Errorf("port %d is still open after stopping %s: %w", port, name, err)
	}
	return nil
}

// tail is the last n lines of file, for an error message.
func tail(file string, n int) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// adapterConfig is a backend's embedded config fragment with dir, made absolute, in place
// of @CLUSTER_DIR@ (the files its Start wrote under the state folder).
func adapterConfig(fragment []byte, dir string) ([]byte, error) {
	d, err := absDir(dir)
	if err != nil {
		return nil, err
	}
	return bytes.ReplaceAll(fragment, []byte("@CLUSTER_DIR@"), []byte(d)), nil
}

// envOr is the environment variable key, or def when it is empty.
func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// signalTerm asks pid to stop.
func signalTerm(pid int) { _ = syscall.Kill(pid, syscall.SIGTERM) }
