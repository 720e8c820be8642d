// Package process reads what the development tooling needs about local processes
// (/proc) and keeps our open files from the servers we start.
package process

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// Cmdline reads /proc/PID/cmdline. Right after a spawn the child may still be inside
// execve (Go's parent resumes when the child leaves the shared memory, before the new
// program's arguments are in place), and the file reads empty for a moment: it is read
// again for up to 100 ms. A zombie's stays empty.
func Cmdline(pid int) ([]byte, error) {
	path := fmt.Sprintf("/proc/%d/cmdline", pid)
	for range 50 {
		b, err := os.ReadFile(path)
		if err != nil || len(b) > 0 {
			return b, err
		}
		time.Sleep(2 * time.Millisecond)
	}
	return os.ReadFile(path)
}

// Alive tells whether pid runs (a zombie does not).
func Alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true // no /proc: kill -0 is all there is
	}
	// pid (comm) S ...: the state follows the last ')'
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}

// CloseInheritedFiles marks the descriptors this process inherited (beyond 0-2) close-on-
// exec, so a server outlives us without holding what our caller holds open: the cluster
// state folder's lock, or flock's /tmp/metricscale-cluster.lock. (Go opens its own files
// close-on-exec already.) Called before each start: a descriptor may arrive later (a test).
func CloseInheritedFiles() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}
