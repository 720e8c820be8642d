// Command backend runs one development backend of hack/backends for a shell script:
//
//	backend names                  # the backends, one a line
//	backend NAME install           # its server (Debian's package as root, or a Go build)
//	backend NAME start DIR         # start it for the cluster state folder DIR
//	backend NAME stop DIR          # stop it, keeping its data
//	backend NAME env [DIR]         # export lines: eval "$(backend NAME env DIR)"
//
// hack/cluster.sh runs it until the cluster is a Go program that imports the package.
package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/metricscale/metricscale/hack/backends"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
}

const usage = "usage: backend names | backend NAME install|start DIR|stop DIR|env [DIR]"

func run(ctx context.Context, args []string) error {
	if len(args) == 1 && args[0] == "names" {
		for _, n := range backends.Names() {
			fmt.Println(n)
		}
		return nil
	}
	if len(args) < 2 || len(args) > 3 {
		return fmt.Errorf("%s", usage)
	}
	b, err := backends.Lookup(args[0])
	if err != nil {
		return err
	}
	verb, dir := args[1], ""
	if len(args) == 3 {
		dir = args[2]
	}
	needDir := func() error {
		if dir == "" {
			return fmt.Errorf("%s needs the cluster state folder: backend %s %s DIR", verb, b.Name(), verb)
		}
		return nil
	}
	switch verb {
	case "install":
		return b.Install(ctx, backends.CacheRoot(), os.Stdout)
	case "start":
		if err := needDir(); err != nil {
			return err
		}
		return b.Start(ctx, dir, os.Stdout)
	case "stop":
		if err := needDir(); err != nil {
			return err
		}
		return b.Stop(ctx, dir)
	case "env":
		if dir == "" {
			dir = backends.DefaultDir()
		}
		env := b.Env(dir)
		for _, k := range slices.Sorted(maps.Keys(env)) {
			fmt.Printf("export %s=%s\n", k, shellQuote(env[k]))
		}
		return nil
	}
	return fmt.Errorf("unknown verb %q; %s", verb, usage)
}

// shellQuote is s single-quoted for a shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
