package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/metricscale/metricscale/autoscaler/record"
	"github.com/metricscale/metricscale/autoscaler/recordclient"
	"github.com/metricscale/metricscale/autoscaler/replay"
)

// recordCommand fetches a MetricAutoscaler's recording from the leading
// autoscaler as a scenario file, and checks that its replay makes the
// recorded decisions. Exit codes: 0 done, 1 failed, 2 bad usage, 3 the
// file was written but its replay decides otherwise somewhere.
func recordCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("record", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	o := recordclient.Options{Port: 8443, LeaseNamespace: "metricscale", LeaseName: "metricscale-autoscaler", Timeout: time.Minute}
	fs.StringVarP(&o.Namespace, "namespace", "n", "", "the MetricAutoscaler's namespace (default: the kubeconfig context's)")
	fs.DurationVar(&o.Last, "last", 0, "only the reconciles of this last period (e.g. 30m); all that is kept when 0")
	output := fs.StringP("output", "o", "-", "scenario file to write; - is standard output")
	decisions := fs.String("decisions", "", "also write the recorded decisions there, as JSON Lines (at, time, replicas, rescaled, currentReplicas, desiredReplicas, error, rule)")
	check := fs.Bool("check", true, "replay the scenario and compare it with the recorded decisions (exit 3 when they differ)")
	fs.StringVar(&o.Server, "server", "", "the autoscaler's HTTPS URL (an autoscaler outside the cluster, or one already port-forwarded); empty: a port-forward through the API server to the pod the leader Lease names")
	fs.IntVar(&o.Port, "port", o.Port, "the autoscaler pod's --secure-bind-address port, for the port-forward")
	fs.StringVar(&o.LeaseNamespace, "lease-namespace", o.LeaseNamespace, "namespace of the autoscaler's leader Lease (and of its pods)")
	fs.StringVar(&o.LeaseName, "lease-name", o.LeaseName, "name of the leader Lease")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig whose credentials are presented (default: $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&o.Context, "context", "", "kubeconfig context")
	fs.StringVar(&o.CAFile, "certificate-authority", "", "CA of the autoscaler's serving certificate (with --cert-dir, the generated record.crt)")
	fs.StringVar(&o.ServerName, "tls-server-name", "", "name to verify the autoscaler's certificate for, when not the URL's host")
	fs.BoolVar(&o.Insecure, "insecure-skip-tls-verify", false, "do not verify the autoscaler's certificate (the credentials are still sent)")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "give up after this long")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: autoscaler record [-n NAMESPACE] NAME [--last 30m] [-o FILE] [--server URL]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0 // --help: the usage is printed
		}
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "record: one MetricAutoscaler name is required")
		fs.Usage()
		return 2
	}
	o.Name = fs.Arg(0)
	if o.Last < 0 {
		fmt.Fprintf(stderr, "record: --last must not be negative, got %s\n", o.Last)
		return 2
	}
	if o.Namespace == "" {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = o.Kubeconfig
		ns, _, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.Context}).Namespace()
		if err != nil {
			fmt.Fprintf(stderr, "record: %v\n", err)
			return 1
		}
		o.Namespace = ns
	}

	rec, err := recordclient.Fetch(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "record: %s/%s: %v\n", o.Namespace, o.Name, err)
		return 1
	}
	data, err := replay.YAML(rec)
	if err != nil {
		fmt.Fprintf(stderr, "record: %v\n", err)
		return 1
	}
	if err := writeOut(*output, data, stdout); err != nil {
		fmt.Fprintf(stderr, "record: %v\n", err)
		return 1
	}
	if *decisions != "" {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		for _, d := range rec.Recorded {
			_ = enc.Encode(d)
		}
		if err := os.WriteFile(*decisions, []byte(b.String()), 0o644); err != nil {
			fmt.Fprintf(stderr, "record: %v\n", err)
			return 1
		}
	}
	for _, w := range rec.Warnings {
		fmt.Fprintf(stderr, "record: warning: %s\n", w)
	}
	summary := fmt.Sprintf("%d reconciles of %s/%s (%s to %s, %d rescales)", len(rec.Recorded), o.Namespace, o.Name,
		rec.Recorded[0].Time, rec.Recorded[len(rec.Recorded)-1].Time, rescales(rec.Recorded))
	if !*check {
		fmt.Fprintf(stderr, "record: %s\n", summary)
		return 0
	}
	diffs, err := replay.Check(ctx, rec, data)
	if err != nil {
		fmt.Fprintf(stderr, "record: the recording does not replay: %v\n", err)
		return 3
	}
	if len(diffs) > 0 {
		fmt.Fprintf(stderr, "record: %s; the replay decides otherwise at %d step(s):\n  %s\n", summary, len(diffs), strings.Join(diffs, "\n  "))
		return 3
	}
	fmt.Fprintf(stderr, "record: %s; the replay makes every recorded decision\n", summary)
	return 0
}

func rescales(ds []record.Decision) int {
	n := 0
	for _, d := range ds {
		if d.Rescaled {
			n++
		}
	}
	return n
}

func writeOut(path string, data []byte, stdout io.Writer) error {
	if path == "-" {
		_, err := stdout.Write(data)
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
