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
	opts := app.NewOptions()
	fs := pflag.NewFlagSet("autoscaler", pflag.ContinueOnError)
	opts.AddFlags(fs)
	showVersion := fs.Bool("version", false, "print the version and exit")
	if code, ran := dispatch(context.Background(), os.Args[1:], fs, os.Stdin, os.Stdout, os.Stderr); ran {
		os.Exit(code)
	}
	if code, exit := parseControllerFlags(fs, os.Args[1:], os.Stdout, os.Stderr); exit {
		os.Exit(code)
	}
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
