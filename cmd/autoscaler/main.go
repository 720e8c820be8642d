// Command autoscaler is metricscale's autoscaler controller; `autoscaler
// simulate` replays a scenario through the same decision core.
package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/metricscale/metricscale/autoscaler/app"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "simulate" {
		os.Exit(simulate(context.Background(), os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}

	opts := app.NewOptions()
	fs := pflag.NewFlagSet("autoscaler", pflag.ExitOnError)
	opts.AddFlags(fs)
	klogFlags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	_ = fs.Parse(os.Args[1:])
	if err := opts.Validate(); err != nil {
		klog.ErrorS(err, "Invalid flags")
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := app.Run(ctx, opts); err != nil {
		klog.ErrorS(err, "Autoscaler stopped")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}
