// Command backend runs one development backend of hack/backends for a shell script:
//
//	backend names                  # the backends, one a line
//	backend NAME install           # its server (Debian's package as root, or a Go build)
//	backend NAME start DIR         # start it for the cluster state folder DIR
//	backend NAME stop DIR          # stop it, keeping its data
//	backend NAME env [DIR]         # export lines: eval "$(backend NAME env DIR)"
//	backend pod-address DIR [host|off|IP]  # print, or set, the address the backends also
//	                               # listen on for pods (host: the default route's source)
//
// hack/cluster.sh runs it until the cluster is a Go program that imports the package.
package main

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
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

const usage = "usage: backend names | backend NAME install|start DIR|stop DIR|env [DIR] | backend pod-address DIR [host|off|IP]"

func run(ctx context.Context, args []string) error {
	if len(args) == 1 && args[0] == "names" {
		for _, n := range backends.Names() {
			fmt.Println(n)
		}
		return nil
	}
	if len(args) >= 2 && len(args) <= 3 && args[0] == "pod-address" {
		return podAddress(args[1], args[2:])
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

// podAddress prints the pod address of dir, or sets it: host (HostAddress), off, or an IP.
// The backends listen there from their next start.
func podAddress(dir string, set []string) error {
	if len(set) == 0 {
		if a := backends.PodAddress(dir); a.IsValid() {
			fmt.Println(a)
		}
		return nil
	}
	var addr netip.Addr
	var err error
	switch set[0] {
	case "off":
	case "host":
		addr, err = backends.HostAddress()
	default:
		addr, err = netip.ParseAddr(set[0])
	}
	if err != nil {
		return fmt.Errorf("pod-address %s: %w", set[0], err)
	}
	if err := backends.SetPodAddress(dir, addr); err != nil {
		return err
	}
	if addr.IsValid() {
		fmt.Printf("%s (for %s; start them again to listen there)\n", addr, strings.Join(backends.PodAddressBackends, ", "))
	}
	return nil
}
