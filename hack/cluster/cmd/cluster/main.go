// Command cluster is hack/cluster.sh: the local Kubernetes control plane of
// metricscale (see package hack/cluster and `hack/cluster.sh help`). The wrapper script
// builds it into the cache and runs it with METRICSCALE_REPO_ROOT set to the checkout.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/metricscale/metricscale/hack/cluster"
)

func main() {
	root := os.Getenv("METRICSCALE_REPO_ROOT")
	if root == "" {
		var err error
		if root, err = findRepoRoot(); err != nil {
			fmt.Fprintf(os.Stderr, "error: %v\n", err)
			os.Exit(1)
		}
	}
	// An interrupted up stops what it started (130 and 143, as the script's traps exited).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cluster.Main(ctx, root, os.Args[1:], os.Stdout, os.Stderr)
	interrupted := ctx.Err() != nil
	stop()
	if interrupted && code != 0 {
		code = 130
	}
	os.Exit(code)
}

// findRepoRoot is the folder above the working directory that holds hack/cluster.sh.
func findRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "hack", "cluster.sh")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no hack/cluster.sh above %s; set METRICSCALE_REPO_ROOT", dir)
		}
	}
}
