// Command cluster is hack/cluster.sh: the local Kubernetes control plane of
// metricscale (see package hack/cluster and `hack/cluster.sh help`). The wrapper script
// builds it into the cache and runs it with METRICSCALE_REPO_ROOT set to the checkout.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/metricscale/metricscale/hack/cluster"
)

func main() {
	root := os.Getenv("METRICSCALE_REPO_ROOT")
	if root == "" {
		var err error
		if root, err = cluster.FindRepoRoot(); err != nil {
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
