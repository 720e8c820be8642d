package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/component-base/logs"
	"k8s.io/klog/v2"

	"github.com/metricscale/metricscale/adapter/dropin"
	"github.com/metricscale/metricscale/providers/prometheus"
)

const usage = `metricscale adapter: serves custom.metrics.k8s.io and external.metrics.k8s.io
from pluggable providers, fed by a push endpoint.

Usage:
  adapter [flags]                 serve
  adapter check-config -f FILE    validate a config file without serving

Flags:
`

// Main runs the adapter with the command-line arguments (without the
// program name) and returns the exit code.
func Main(args []string) int {
	if len(args) > 0 && args[0] == "check-config" {
		return checkConfig(args[1:], os.Stdout, os.Stderr)
	}
	fs := pflag.NewFlagSet("adapter", pflag.ContinueOnError)
	o := NewOptions(fs)
	fs.Usage = func() {
		fmt.Fprint(os.Stderr, usage)
		fs.PrintDefaults()
	}
	if err := o.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	logs.InitLogs()
	defer logs.FlushLogs()

	ctx := genericapiserver.SetupSignalContext()
	if err := o.Run(ctx); err != nil {
		klog.ErrorS(err, "Adapter failed")
		return 1
	}
	return 0
}

// Parse parses the serving command line into o's flag set. A leading
// program name ("/adapter", as prometheus-adapter's chart passes it) is
// dropped and logged at start; any other argument that is not a flag is
// refused.
func (o *Options) Parse(args []string) error {
	args, o.programName = dropin.TrimProgramName(args)
	if err := o.FlagSet.Parse(args); err != nil {
		return err
	}
	if o.FlagSet.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", o.FlagSet.Arg(0))
	}
	return nil
}

// checkConfig implements "adapter check-config -f FILE".
func checkConfig(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("check-config", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.StringP("file", "f", "", "config file to validate")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *file == "" {
		fmt.Fprintln(stderr, "check-config: -f FILE is required")
		return 2
	}
	data, err := os.ReadFile(*file)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	// The adapter's own decoder; a rules file needs a Prometheus URL to
	// validate, which check-config does not reach.
	c, _, err := dropin.Decode(data, dropin.Flags{PrometheusURL: "http://prometheus.invalid"}, Factories())
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", *file, err)
		return 1
	}
	warnings := c.Warnings(map[string]func(string, json.RawMessage) []string{prometheus.Type: prometheus.Warnings})
	for _, w := range warnings {
		fmt.Fprintf(stderr, "%s: warning: %s\n", *file, w)
	}
	fmt.Fprintf(stdout, "%s: valid (%d providers, %d routes, %d warnings)\n", *file, len(c.Providers), len(c.Routes), len(warnings))
	return 0
}
