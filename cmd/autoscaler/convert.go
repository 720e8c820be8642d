package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/convert"
)

// Exit codes of autoscaler convert.
const (
	exitOK           = 0
	exitError        = 1
	exitUsage        = 2
	exitNotConverted = 3 // something did not convert, or not exactly: listed on stderr
)

const convertUsage = `Usage:
  autoscaler convert hpa  [NAME...] [-f FILE]... [-n NS | -A] [-o FILE] [--apply]
  autoscaler convert keda [NAME...] [-f FILE]... [-n NS | -A] [-o FILE] --adapter-config FILE

Without -f, the objects are read from the cluster of the kubeconfig (the named ones, or
every one of the namespace). The MetricAutoscalers go to standard output (or -o FILE).
Objects of other kinds in the files are skipped, each with a note on standard error.
Exit status: 0 converted, 1 error (an object the API server or KEDA would refuse), 2 usage,
3 converted with something to act on (listed on standard error and as comments in the output):
keda: what did not convert, or not exactly; hpa (without --apply): an HPA that Helm, Argo CD or
Flux will recreate.

`

// convertCmd is `autoscaler convert hpa|keda`.
func convertCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "hpa" && args[0] != "keda") {
		fmt.Fprint(stderr, convertUsage)
		return exitUsage
	}
	kind := args[0]
	fs := pflag.NewFlagSet("convert "+kind, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	files := fs.StringArrayP("filename", "f", nil, "read the objects from this file (YAML or JSON, several documents, Lists); - is standard input; repeatable")
	output := fs.StringP("output", "o", "", "write the MetricAutoscalers to this file instead of standard output")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	kubeContext := fs.String("context", "", "kubeconfig context")
	namespace := fs.StringP("namespace", "n", "", "namespace (default: the context's)")
	all := fs.BoolP("all-namespaces", "A", false, "every namespace")
	// hpa
	apply := fs.Bool("apply", false, "hpa: hand each HPA over to its MetricAutoscaler on the cluster (created paused with the HPA's status, HPA deleted, then unpaused)")
	syncPeriod := fs.Duration("sync-period", 0, "hpa: the MetricAutoscalers' spec.syncPeriod (default: unset, 15s)")
	delay := fs.Duration("handover-delay", 3*time.Second, "hpa --apply: wait this long after the HPA is gone before the MetricAutoscaler acts (a reconcile of the HPA begun before the delete finishes)")
	timeout := fs.Duration("handover-timeout", time.Minute, "hpa --apply: how long to wait for a deleted HPA to be gone")
	// keda
	adapterOut := fs.String("adapter-config", "", "keda: write the adapter config serving the converted metrics to this file")
	adapterBase := fs.String("adapter-config-base", "", "keda: the adapter's current config file: the written config is it plus the converted providers and routes (default: the adapter's built-in config, one memory provider)")
	credDir := fs.String("credentials-dir", convert.DefaultCredentialsDir, "keda: where the adapter config expects the credentials convert does not copy (DIR/PROVIDER/FILE)")
	env := fs.StringArray("env", nil, "keda: NAME=VALUE, the value of an environment variable of the workloads that a trigger's *FromEnv names; repeatable")
	paused := fs.Bool("paused", false, "keda: write the MetricAutoscalers paused (apply them, delete the ScaledObjects, then unpause)")
	fs.Usage = func() {
		fmt.Fprint(stderr, convertUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "convert %s: "+format+"\n", append([]any{kind}, a...)...)
		return exitUsage
	}
	names := fs.Args()
	switch {
	case len(*files) > 0 && (len(names) > 0 || *all || *namespace != ""):
		return usage("-f reads files: names, -n and -A select objects of the cluster")
	case *all && len(names) > 0:
		return usage("-A and names: names need one namespace")
	case kind == "hpa" && *apply && len(*files) > 0:
		return usage("--apply hands over the cluster's HPAs: give names or -n/-A, not -f")
	case kind == "hpa" && (*adapterOut != "" || *adapterBase != "" || len(*env) > 0 || *paused):
		return usage("--adapter-config, --adapter-config-base, --env and --paused are for keda")
	case kind == "keda" && (*apply || *syncPeriod != 0):
		return usage("--apply and --sync-period are for hpa")
	case *adapterOut == "-" && (*output == "" || *output == "-"):
		return usage("--adapter-config - and the MetricAutoscalers would both go to standard output: give -o FILE")
	case *syncPeriod != 0 && *syncPeriod < time.Second:
		return usage("--sync-period: at least 1s")
	}
	envs := map[string]string{}
	for _, kv := range *env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return usage("--env %q: want NAME=VALUE", kv)
		}
		envs[k] = v
	}

	var objs []convert.Object
	for _, f := range *files {
		data, err := readInput(f, stdin)
		if err != nil {
			fmt.Fprintf(stderr, "convert %s: %v\n", kind, err)
			return exitError
		}
		o, err := convert.ReadObjects(f, data)
		if err != nil {
			fmt.Fprintf(stderr, "convert %s: %v\n", kind, err)
			return exitError
		}
		objs = append(objs, o...)
	}
	var cl *clusterClients
	sel := convert.Selection{AllNamespaces: *all, Names: names}
	if len(*files) == 0 {
		var err error
		if cl, err = newClusterClients(*kubeconfig, *kubeContext); err != nil {
			fmt.Fprintf(stderr, "convert %s: %v\n", kind, err)
			return exitError
		}
		sel.Namespace = *namespace
		if sel.Namespace == "" {
			sel.Namespace = cl.namespace
		}
	}

	if kind == "hpa" {
		opts := convert.HPAOptions{}
		if *syncPeriod != 0 {
			opts.SyncPeriod = &metav1.Duration{Duration: *syncPeriod}
		}
		if *apply {
			return applyHPAs(ctx, cl, sel, opts, *delay, *timeout, stdout, stderr)
		}
		return printHPAs(ctx, cl, objs, sel, opts, *output, stdout, stderr)
	}
	return printKEDA(ctx, cl, objs, sel, convert.KEDAOptions{Env: envs, CredentialsDir: *credDir, Paused: *paused},
		*output, *adapterOut, *adapterBase, stdout, stderr)
}

func readInput(name string, stdin io.Reader) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(stdin)
	}
	return os.ReadFile(name)
}

// writeOutput writes to file (atomically enough: a temporary file renamed)
// or to stdout.
func writeOutput(file string, stdout io.Writer, write func(io.Writer) error) error {
	if file == "" || file == "-" {
		return write(stdout)
	}
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(file), "."+filepath.Base(file)+".tmp")
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}

func printHPAs(ctx context.Context, cl *clusterClients, objs []convert.Object, sel convert.Selection, opts convert.HPAOptions, output string, stdout, stderr io.Writer) int {
	var hpas []*autoscalingv2.HorizontalPodAutoscaler
	if cl != nil {
		var err error
		if hpas, err = convert.ReadHPAs(ctx, cl.kube, sel); err != nil {
			fmt.Fprintf(stderr, "convert hpa: %v\n", err)
			return exitError
		}
	}
	objs, notes := convert.HPAObjects(objs)
	for _, n := range notes {
		fmt.Fprintf(stderr, "note: %s\n", n)
	}
	for _, o := range objs {
		h, err := convert.DecodeHPA(o)
		if err != nil {
			fmt.Fprintf(stderr, "convert hpa: %v\n", err)
			return exitError
		}
		hpas = append(hpas, h)
	}
	var mas []*v1alpha1.MetricAutoscaler
	var warnings []string
	for _, h := range hpas {
		ma, err := convert.FromHPA(h, opts)
		if err != nil {
			fmt.Fprintf(stderr, "convert hpa: %v\n", err)
			return exitError
		}
		mas = append(mas, ma)
		warnings = append(warnings, convert.OwnerWarnings(h)...)
	}
	if len(mas) == 0 {
		fmt.Fprintln(stderr, "convert hpa: no HorizontalPodAutoscaler found")
		return exitError
	}
	if err := writeOutput(output, stdout, func(w io.Writer) error { return convert.WriteMetricAutoscalers(w, warnings, mas) }); err != nil {
		fmt.Fprintf(stderr, "convert hpa: %v\n", err)
		return exitError
	}
	for _, w := range warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	if len(warnings) > 0 {
		return exitNotConverted
	}
	return exitOK
}

func applyHPAs(ctx context.Context, cl *clusterClients, sel convert.Selection, opts convert.HPAOptions, delay, timeout time.Duration, stdout, stderr io.Writer) int {
	targets := map[[2]string]bool{}
	var order [][2]string
	addTarget := func(k [2]string) {
		if !targets[k] {
			targets[k] = true
			order = append(order, k)
		}
	}
	if len(sel.Names) > 0 {
		for _, n := range sel.Names {
			addTarget([2]string{sel.Namespace, n})
		}
		for _, n := range sel.Names {
			// one by one: a named HPA already handed over is gone
			hpas, err := convert.ReadHPAs(ctx, cl.kube, convert.Selection{Namespace: sel.Namespace, Names: []string{n}})
			if err != nil {
				continue
			}
			for _, w := range convert.OwnerWarnings(hpas[0]) {
				fmt.Fprintf(stderr, "warning: %s\n", w)
			}
		}
	} else {
		hpas, err := convert.ReadHPAs(ctx, cl.kube, sel)
		if err != nil {
			fmt.Fprintf(stderr, "convert hpa: %v\n", err)
			return exitError
		}
		pending, err := convert.PendingHandovers(ctx, cl.dynamic, sel)
		if err != nil {
			fmt.Fprintf(stderr, "convert hpa: %v\n", err)
			return exitError
		}
		for _, h := range hpas {
			addTarget([2]string{h.Namespace, h.Name})
			for _, w := range convert.OwnerWarnings(h) {
				fmt.Fprintf(stderr, "warning: %s\n", w)
			}
		}
		for _, p := range pending {
			addTarget(p)
		}
	}
	if len(order) == 0 {
		fmt.Fprintln(stderr, "convert hpa: no HorizontalPodAutoscaler found")
		return exitError
	}
	h := &convert.Handover{
		Kube: cl.kube, Dynamic: cl.dynamic, Scales: cl.scales, Mapper: cl.mapper, Clock: clock.RealClock{},
		Delay: delay, Timeout: timeout, Options: opts, Log: stderr,
	}
	code := exitOK
	for _, t := range order {
		res, err := h.Run(ctx, t[0], t[1])
		if err != nil {
			fmt.Fprintf(stderr, "convert hpa: %v\n", err)
			code = exitError
			continue
		}
		for _, n := range res.Notes {
			fmt.Fprintf(stderr, "note: metricautoscaler %s/%s: %s\n", t[0], t[1], n)
		}
		state := "handed over"
		if res.AlreadyDone {
			state = "already handed over"
		}
		fmt.Fprintf(stdout, "metricautoscaler.autoscaling.metricscale.dev/%s %s (namespace %s, %d replicas)\n", t[1], state, t[0], res.Replicas)
	}
	return code
}

func printKEDA(ctx context.Context, cl *clusterClients, objs []convert.Object, sel convert.Selection, opts convert.KEDAOptions, output, adapterOut, adapterBase string, stdout, stderr io.Writer) int {
	if cl != nil {
		read, err := convert.ReadScaledObjects(ctx, cl.dynamic, sel)
		if err != nil {
			fmt.Fprintf(stderr, "convert keda: %v\n", err)
			return exitError
		}
		objs = append(read, objs...)
	}
	if len(objs) == 0 {
		fmt.Fprintln(stderr, "convert keda: no ScaledObject found")
		return exitError
	}
	res, err := convert.FromKEDA(objs, opts)
	if err != nil {
		fmt.Fprintf(stderr, "convert keda: %v\n", err)
		return exitError
	}
	for _, n := range res.Notes {
		fmt.Fprintf(stderr, "note: %s\n", n)
	}
	if len(res.MetricAutoscalers) == 0 && len(res.Issues) == 0 {
		fmt.Fprintln(stderr, "convert keda: no ScaledObject found")
		return exitError
	}
	var lines []string
	for _, i := range res.Issues {
		lines = append(lines, i.String())
	}
	if res.Adapter != nil && adapterOut == "" {
		fmt.Fprintln(stderr, "convert keda: --adapter-config FILE is required: the converted metrics are served by the adapter providers and routes written there")
		return exitUsage
	}
	var comments []string
	if len(lines) > 0 {
		comments = append([]string{"Written by autoscaler convert keda. What did not convert exactly:"}, lines...)
	}
	if res.Adapter != nil {
		var base []byte
		if adapterBase != "" {
			if base, err = os.ReadFile(adapterBase); err != nil {
				fmt.Fprintf(stderr, "convert keda: %v\n", err)
				return exitError
			}
		}
		merged, err := convert.MergeAdapterConfig(base, res.Adapter)
		if err != nil {
			fmt.Fprintf(stderr, "convert keda: %v\n", err)
			return exitError
		}
		header := []string{"The adapter config serving the MetricAutoscalers converted by autoscaler convert keda",
			"(check it with: adapter check-config -f FILE)."}
		if err := writeOutput(adapterOut, stdout, func(w io.Writer) error { return convert.WriteAdapterConfig(w, header, merged) }); err != nil {
			fmt.Fprintf(stderr, "convert keda: %v\n", err)
			return exitError
		}
	}
	if err := writeOutput(output, stdout, func(w io.Writer) error { return convert.WriteMetricAutoscalers(w, comments, res.MetricAutoscalers) }); err != nil {
		fmt.Fprintf(stderr, "convert keda: %v\n", err)
		return exitError
	}
	for _, l := range lines {
		fmt.Fprintln(stderr, l)
	}
	if len(res.Issues) > 0 {
		return exitNotConverted
	}
	return exitOK
}

// clusterClients are the clients of the kubeconfig's cluster.
type clusterClients struct {
	namespace string
	kube      kubernetes.Interface
	dynamic   dynamic.Interface
	scales    scale.ScalesGetter
	mapper    *restmapper.DeferredDiscoveryRESTMapper
}

func newClusterClients(kubeconfig, kubeContext string) (*clusterClients, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "metricscale-autoscaler-convert"
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	cached := memory.NewMemCacheClient(kube.Discovery())
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(cached)
	scales, err := scale.NewForConfig(cfg, mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(cached))
	if err != nil {
		return nil, err
	}
	return &clusterClients{namespace: ns, kube: kube, dynamic: dyn, scales: scales, mapper: mapper}, nil
}
