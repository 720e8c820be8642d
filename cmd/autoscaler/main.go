// Command autoscaler is metricscale's autoscaler controller; `autoscaler
// simulate` replays a scenario through the same decision core, `autoscaler
// record` fetches a live object's recent reconciles as one, and `autoscaler
// convert hpa|keda` turns HPAs and KEDA ScaledObjects into MetricAutoscalers.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/component-base/logs"
	"k8s.io/klog/v2"

	"github.com/metricscale/metricscale/autoscaler/app"
	"github.com/metricscale/metricscale/cmd/internal/version"
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "simulate":
			os.Exit(simulate(context.Background(), os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
		case "record":
			os.Exit(recordCommand(context.Background(), os.Args[2:], os.Stdout, os.Stderr))
		case "convert":
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			code := convertCmd(ctx, os.Args[2:], os.Stdin, os.Stdout, os.Stderr)
			stop()
			os.Exit(code)
		}
	}

	opts := app.NewOptions()
	fs := pflag.NewFlagSet("autoscaler", pflag.ExitOnError)
	opts.AddFlags(fs)
	showVersion := fs.Bool("version", false, "print the version and exit")
	_ = fs.Parse(os.Args[1:])
	if *showVersion {
		fmt.Println(version.String("metricscale-autoscaler"))
		return
	}
	defer logs.FlushLogs()
	// Validate applies the logging flags (component-base, as the adapter).
	if err := opts.Validate(); err != nil {
		klog.ErrorS(err, "Invalid flags")
		logs.FlushLogs()
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := app.Run(ctx, opts); err != nil {
		klog.ErrorS(err, "Autoscaler stopped")
		logs.FlushLogs()
		os.Exit(1)
	}
}
