package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/metricscale/metricscale/autoscaler/decision"
	"github.com/metricscale/metricscale/autoscaler/scenario"
)

// simulate replays a scenario file through the decision core. Nothing is
// printed on stdout unless the whole replay succeeds.
func simulate(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("simulate", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.StringP("file", "f", "", "scenario file (YAML or JSON); - reads standard input")
	output := fs.StringP("output", "o", "jsonl", "output format: jsonl or table")
	upstream := fs.Bool("upstream-arithmetic", false, "replay kube-controller-manager's int32/int64 overflows and its reading of a negative External sum exactly, instead of saturating, and its reading of a resizing pod's requests from spec instead of status (docs/scenarios.md, Deviations from upstream)")
	kubeVersion := fs.String("kube-version", "", "decide as this kube-controller-manager version, 1.36 or 1.37 (its feature-gate defaults and validation; docs/scenarios.md, Kubernetes versions); default: the scenario's kubeVersion, else 1.37")
	plotFile := fs.String("plot", "", "also draw the timeline (replicas, each metric against its target) as SVG into this file")
	explain := fs.Bool("explain", false, "explain each step: every metric's proposal and how it was made, then the rules the largest went through (stabilization window, policies, min/max) and the one that produced the final count; with -o jsonl, as an \"explanation\" key")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: autoscaler simulate -f SCENARIO [-o jsonl|table] [--explain] [--plot FILE.svg] [--upstream-arithmetic] [--kube-version 1.36|1.37]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0 // --help: the usage is printed
		}
		return 2
	}
	if *file == "" {
		fmt.Fprintln(stderr, "simulate: -f is required")
		return 2
	}
	if *output != "jsonl" && *output != "table" {
		fmt.Fprintf(stderr, "simulate: -o must be jsonl or table, got %q\n", *output)
		return 2
	}
	var version decision.KubeVersion
	if *kubeVersion != "" {
		v, err := decision.ParseKubeVersion(*kubeVersion)
		if err != nil {
			fmt.Fprintf(stderr, "simulate: --kube-version: %v\n", err)
			return 2
		}
		version = v
	}
	var data []byte
	var err error
	if *file == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(*file)
	}
	if err != nil {
		fmt.Fprintf(stderr, "simulate: %v\n", err)
		return 1
	}
	s, err := scenario.ParseAs(data, version)
	if err != nil {
		fmt.Fprintf(stderr, "simulate: %s: %v\n", *file, err)
		return 1
	}
	s.UpstreamArithmetic = *upstream
	results, err := scenario.Replay(ctx, s)
	if err != nil {
		fmt.Fprintf(stderr, "simulate: %s: %v\n", *file, err)
		return 1
	}
	if *plotFile != "" {
		var buf bytes.Buffer
		if err := scenario.Chart(s.Autoscaler.Name+" — "+*file, results).WriteSVG(&buf); err == nil {
			err = os.WriteFile(*plotFile, buf.Bytes(), 0o644)
		}
		if err != nil {
			fmt.Fprintf(stderr, "simulate: writing the plot: %v\n", err)
			return 1
		}
	}
	switch {
	case *output == "table" && *explain:
		err = scenario.WriteExplained(stdout, results)
	case *output == "table":
		err = scenario.WriteTable(stdout, results)
	default:
		enc := json.NewEncoder(stdout)
		for i := range results {
			if *explain {
				results[i].Explanation = scenario.Explain(&results[i])
			}
			if err = enc.Encode(&results[i]); err != nil {
				break
			}
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "simulate: %v\n", err)
		return 1
	}
	return 0
}
