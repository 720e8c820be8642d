// Command autoscaler is metricscale's autoscaler. `autoscaler simulate`
// replays a scenario through the decision core.
package main

import (
	"context"
	"fmt"
	"os"
)

func main() {
	ctx := context.Background()
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "simulate" {
		os.Exit(simulate(ctx, args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	fmt.Fprintln(os.Stderr, "Usage: autoscaler simulate -f SCENARIO [-o jsonl|table]")
	os.Exit(2)
}
