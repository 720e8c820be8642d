//go:build e2e && (benchcontroller || kedabench)

package e2e

// What the benchmarks share (hack/bench-controller.sh, make bench-keda): the
// cluster's processes (pid, CPU seconds, RSS, command line, restart with
// other flags), their /metrics read with the admin credentials, and
// creating many objects a few at a time.

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// The HPA-only kube-controller-manager of `hack/cluster.sh up --separate-hpa-controller`,
// and metricscale's processes, as the benchmarks read them.
const (
	kcmHPA       = "kube-controller-manager-hpa"
	kcmHPAAddr   = "https://127.0.0.1:10258"
	oursAddr     = "https://127.0.0.1:6446"
	adapterAddr  = "https://127.0.0.1:6444"
	kcmCounter   = "horizontal_pod_autoscaler_controller_reconciliations_total"
	kcmDuration  = "horizontal_pod_autoscaler_controller_reconciliation_duration_seconds"
	oursCounter  = "metricscale_autoscaler_reconciliations_total"
	oursDuration = "metricscale_autoscaler_reconciliation_duration_seconds"
	restRequests = "rest_client_requests_total"
)

// stopPid stops a process (SIGTERM, SIGKILL after 30 s) and waits until it is gone.
func stopPid(t *testing.T, pid int) {
	t.Helper()
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for i := 0; i < 300; i++ {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

// hostCPU is the machine's busy and total CPU seconds (/proc/stat, every core).
func hostCPU(t *testing.T) [2]float64 {
	t.Helper()
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	var busy, total float64
	for i := 1; i < len(f) && i <= 8; i++ {
		v, _ := strconv.ParseFloat(f[i], 64)
		total += v
		if i != 4 && i != 5 {
			busy += v
		}
	}
	return [2]float64{busy, total}
}

// cmdline is a process's command line.
func cmdline(t *testing.T, pid int) []string {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatalf("reading the command line of pid %d: %v", pid, err)
	}
	return strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
}

// withFlags is args with some --flag=value arguments replaced.
func withFlags(args []string, flags map[string]string) []string {
	out := slices.Clone(args)
	for i, a := range out {
		if name, _, ok := strings.Cut(a, "="); ok {
			if v, replace := flags[name]; replace {
				out[i] = name + "=" + v
			}
		}
	}
	return out
}

// startComponent starts a component of hack/cluster.sh with args, in its own
// session, logging where the script logs it and with its pid file
// rewritten, so that `hack/cluster.sh down` stops it.
func startComponent(t *testing.T, component string, args []string) int {
	t.Helper()
	logFile, err := os.OpenFile(filepath.Join(cluster.Dir, "logs", component+".log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s again: %v", component, err)
	}
	pid := cmd.Process.Pid
	// Reaped when it exits: a zombie still answers kill(pid, 0), and
	// stopProcess would wait its whole 30 s for it.
	go func() { _ = cmd.Wait() }()
	pidPath := filepath.Join(cluster.Dir, "run", component+".pid")
	if err := os.WriteFile(pidPath+".tmp", []byte(fmt.Sprintf("%d\n%s\n", pid, args[0])), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(pidPath+".tmp", pidPath); err != nil {
		t.Fatal(err)
	}
	return pid
}

// componentPid is the pid hack/cluster.sh recorded for a component, 0 when none.
func componentPid(component string) (int, error) {
	data, err := os.ReadFile(filepath.Join(cluster.Dir, "run", component+".pid"))
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(string(data), "\n")
	return strconv.Atoi(strings.TrimSpace(first))
}

func cpuOf(t *testing.T, pid int) float64 {
	if pid == 0 {
		return 0
	}
	return cpuSeconds(t, pid)
}

// cpuSeconds is a process's user+system CPU time from /proc/PID/stat.
func cpuSeconds(t *testing.T, pid int) float64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command name, which is in parentheses.
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // USER_HZ
}

func rssKiB(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			v, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			return v
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// adminGet reads a URL of a local component, over HTTPS with the admin
// credentials (kube-controller-manager authorizes /metrics and /debug/pprof).
func adminGet(url string) (string, error) { return adminGetTimeout(url, 30*time.Second) }

func adminGetTimeout(url string, timeout time.Duration) (string, error) {
	var transport http.RoundTripper = http.DefaultTransport
	if strings.HasPrefix(url, "https://") {
		cfg := rest.CopyConfig(cluster.Config)
		cfg.TLSClientConfig.Insecure, cfg.TLSClientConfig.CAData, cfg.TLSClientConfig.CAFile = true, nil, ""
		var err error
		if transport, err = rest.TransportFor(cfg); err != nil {
			return "", err
		}
	}
	resp, err := (&http.Client{Transport: transport, Timeout: timeout}).Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	return string(body), nil
}

// sumSeries sums the samples of a counter whose labels contain match.
func sumSeries(body, name, match string) int {
	total := 0.0
	for _, line := range strings.Split(body, "\n") {
		if (strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ")) && strings.Contains(line, match) {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			total += v
		}
	}
	return int(total)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// create runs each(0..n-1) with a few requests in flight.
func create(t *testing.T, n int, each func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := each(i); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// saveProfile saves the profile at url (a /debug/pprof URL) as path.
func saveProfile(t *testing.T, url, path string) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Errorf("profile %s: %v", path, err)
		return
	}
	body, err := adminGetTimeout(url, 10*time.Minute)
	if err == nil {
		err = os.WriteFile(path, []byte(body), 0o644)
	}
	if err != nil {
		t.Errorf("profile %s: %v", path, err)
		return
	}
	t.Logf("saved %s", path)
}
