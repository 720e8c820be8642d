package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/metricscale/metricscale/hack/process"
)

// Process bookkeeping: run/NAME.pid holds two lines, the pid and the argv[0] the process
// was started with. A process is ours only while /proc/PID/cmdline still starts with that
// argv[0]: a recycled pid is never signalled. Each process runs in its own session
// (setsid), detached from the caller's terminal, logging to logs/NAME.log.

// proc is a process this Cluster started: while it lives, its exit status is known.
type proc struct {
	name  string
	pid   int
	done  chan struct{}
	state *os.ProcessState // set before done closes
}

// exited reports why the process ended, or "" while it runs.
func (p *proc) exited() string {
	select {
	case <-p.done:
		return exitReason(p.state)
	default:
		return ""
	}
}

// exitReason says how a process ended: its exit code or the signal that killed it.
func exitReason(st *os.ProcessState) string {
	if st == nil {
		return "exited (status unknown)"
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("killed by signal %s (%d)", signalName(ws.Signal()), int(ws.Signal()))
	}
	return fmt.Sprintf("exited with code %d", st.ExitCode())
}

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGABRT:
		return "SIGABRT"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGPIPE:
		return "SIGPIPE"
	}
	return s.String()
}

func (c *Cluster) pidFile(name string) string { return filepath.Join(c.Dir, "run", name+".pid") }
func (c *Cluster) logFile(name string) string { return filepath.Join(c.Dir, "logs", name+".log") }

// PidOf returns the pid of component name when the process its pid file names still runs.
func (c *Cluster) PidOf(name string) (int, bool) {
	data, err := os.ReadFile(c.pidFile(name))
	if err != nil {
		return 0, false
	}
	lines := strings.SplitN(string(data), "\n", 3)
	if len(lines) < 2 {
		return 0, false
	}
	pid, err := strconv.Atoi(lines[0])
	if err != nil || pid <= 0 {
		return 0, false
	}
	cmdline, err := process.Cmdline(pid)
	if err != nil {
		return 0, false
	}
	argv0, _, _ := bytes.Cut(cmdline, []byte{0})
	if string(argv0) != lines[1] {
		return 0, false
	}
	return pid, true
}

// Alive reports whether component name runs.
func (c *Cluster) Alive(name string) bool {
	_, ok := c.PidOf(name)
	return ok
}

// paused reports whether the component was stopped on purpose (stop-prometheus).
func (c *Cluster) paused(name string) bool {
	_, err := os.Stat(filepath.Join(c.Dir, "run", name+".paused"))
	return err == nil
}

// spawn starts a component's process in its own session, its output in logs/NAME.log
// (truncated), and records its pid file.
func (c *Cluster) spawn(name, binary string, args, env []string) (*proc, error) {
	pidFile := c.pidFile(name)
	_ = os.Remove(pidFile)
	logf, err := os.OpenFile(c.logFile(name), os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	defer logf.Close()
	// Components outlive us: without this they kept flock's lock on
	// /tmp/metricscale-cluster.lock held for as long as the cluster ran.
	process.CloseInheritedFiles()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", name, binary, err)
	}
	p := &proc{name: name, pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() {
		// Reaps it while this process lives, and keeps its exit status for `up`'s messages.
		_ = cmd.Wait()
		p.state = cmd.ProcessState
		close(p.done)
	}()
	record := fmt.Sprintf("%d\n%s\n", p.pid, binary)
	if err := os.WriteFile(pidFile+".tmp", []byte(record), 0o644); err != nil {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	if err := os.Rename(pidFile+".tmp", pidFile); err != nil {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c.procs[name] = p
	c.logf("    started %s (pid %d, log %s)", name, p.pid, c.logFile(name))
	return p, nil
}

// stop sends SIGTERM, then SIGKILL after 15 s, and waits until the process is gone.
func (c *Cluster) stop(name string) error {
	pid, ok := c.PidOf(name)
	if !ok {
		_ = os.Remove(c.pidFile(name))
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	if !c.waitGone(name, 15*time.Second) {
		c.warnf("%s (pid %d) did not exit within 15s of SIGTERM; sending SIGKILL", name, pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		if !c.waitGone(name, 5*time.Second) {
			return fmt.Errorf("%s (pid %d) is still running after SIGKILL", name, pid)
		}
	}
	_ = os.Remove(c.pidFile(name))
	delete(c.procs, name)
	c.logf("    stopped %s (pid %d)", name, pid)
	return nil
}

func (c *Cluster) waitGone(name string, timeout time.Duration) bool {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if !c.Alive(name) {
			return true
		}
	}
	return !c.Alive(name)
}

// logTail prints the last lines of a component's log to standard error.
func (c *Cluster) logTail(name string) {
	data, err := os.ReadFile(c.logFile(name))
	if err != nil || len(data) == 0 {
		return
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 25 {
		lines = lines[len(lines)-25:]
	}
	fmt.Fprintf(c.Err, "%s--- last lines of %s ---%s\n%s\n%s--- end of %s ---%s\n",
		c.bold, c.logFile(name), c.reset, strings.Join(lines, "\n"), c.bold, c.logFile(name), c.reset)
}

// errComponent is the error of a failed component: its message names the full log.
func (c *Cluster) errComponent(name, msg string) error {
	c.logTail(name)
	return fmt.Errorf("%s (full log: %s)", msg, c.logFile(name))
}

var errNotRunning = errors.New("not running")
