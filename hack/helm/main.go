// Command helm renders and lints metricscale's chart (manifests/chart) with
// the Helm library, for users without a helm binary:
//
//	cd hack/helm && go run . template [flags] [CHART]   # CHART: ../../manifests/chart
//	cd hack/helm && go run . lint [flags] [CHART]
//	cd hack/helm && go run . kustomize DIR              # kubectl kustomize DIR
//
// Flags (template, lint): -f FILE (repeatable), --set K=V (repeatable, helm's
// syntax), --namespace NS, --name RELEASE, --kube-version V, and for template
// --kubeconfig FILE so that lookup reads the cluster (the selfSigned
// certificate and the push token are then kept, as helm upgrade keeps them).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/metricscale/metricscale/hack/helm/render"
)

const defaultChart = "../../manifests/chart"

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: helm template|lint [flags] [CHART] | kustomize DIR")
	}
	cmd, args := args[0], args[1:]
	if cmd == "kustomize" {
		if len(args) != 1 {
			return errors.New("usage: kustomize DIR")
		}
		out, err := render.Kustomize(args[0])
		if err != nil {
			return err
		}
		_, err = os.Stdout.Write(out)
		return err
	}
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	var o render.Options
	var files, sets list
	fs.Var(&files, "f", "values file (repeatable)")
	fs.Var(&files, "values", "values file (repeatable)")
	fs.Var(&sets, "set", "value K=V in helm's --set syntax (repeatable)")
	fs.StringVar(&o.Namespace, "namespace", "metricscale", "release namespace")
	fs.StringVar(&o.ReleaseName, "name", "metricscale", "release name")
	fs.StringVar(&o.KubeVersion, "kube-version", "", "Kubernetes version the templates see")
	kubeconfig := fs.String("kubeconfig", "", "template: let lookup read this cluster")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.ValueFiles, o.Set = files, sets
	chartDir := defaultChart
	if fs.NArg() > 0 {
		chartDir = fs.Arg(0)
	}
	switch cmd {
	case "template":
		if *kubeconfig != "" {
			cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
			if err != nil {
				return fmt.Errorf("kubeconfig %s: %w", *kubeconfig, err)
			}
			o.RESTConfig = cfg
		}
		out, err := render.Template(chartDir, o)
		if err != nil {
			return err
		}
		_, err = os.Stdout.Write(out)
		return err
	case "lint":
		msgs, err := render.Lint(chartDir, o)
		for _, m := range msgs {
			fmt.Println(m.Error())
		}
		if err != nil {
			return fmt.Errorf("lint %s: failed", chartDir)
		}
		fmt.Printf("lint %s: no warnings or errors\n", chartDir)
		return nil
	}
	return fmt.Errorf("unknown command %q: want template, lint or kustomize", cmd)
}
