// Command sandbox is the process of the real node's pod sandbox image: it holds the pod's
// namespaces open, reaps the children that end up with it (it is PID 1 when the pod shares
// its process namespace) and exits on SIGTERM or SIGINT. No registry is reachable from the
// development machine, so the cluster builds this image itself instead of pulling "pause".
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("metricscale sandbox")
		return
	}
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap waits for every child that has exited, without blocking.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
