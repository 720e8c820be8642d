package cluster

import (
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/metricscale/metricscale/adapter/config"
	"github.com/metricscale/metricscale/providers/catalog"
)

func TestKEDAVersionIsTheBuildModules(t *testing.T) {
	t.Parallel()
	gomod, err := os.ReadFile(filepath.Join("build", "keda", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(gomod), "require github.com/kedacore/keda/v2 "+kedaVersion+"\n") {
		t.Errorf("build/keda/go.mod does not require KEDA %s:\n%.400s", kedaVersion, gomod)
	}
	// Go applies replace and exclude only in the main module: the build module repeats KEDA's.
	for _, line := range []string{
		"replace github.com/nexus-rpc/nexus-proto-annotations v0.1.0 => github.com/nexus-rpc/nexus-proto-annotations v0.1.1-0.20260629224316-835bd8d49cb4",
		"exclude github.com/go-chi/chi/v5 v5.2.3",
	} {
		if !strings.Contains(string(gomod), line+"\n") {
			t.Errorf("build/keda/go.mod lacks KEDA's %q", line)
		}
	}
}

func TestKEDAOption(t *testing.T) {
	t.Parallel()
	inv, err := ParseArgs([]string{"up", "--keda"}, func(string) string { return "" }, "/cache/cluster", "/work")
	if err != nil || !inv.Options.KEDA || !inv.Options.Explicit("keda") {
		t.Fatalf("up --keda: %+v %v; want KEDA on, explicit", inv.Options, err)
	}
	for _, withKEDA := range []bool{false, true} {
		o := DefaultOptions("")
		o.KEDA = withKEDA
		c := newTestCluster(t, true, o)
		comps, mods := c.selected(), c.neededModules()
		if got := slices.Contains(comps, "keda-operator") && slices.Contains(comps, "keda-metrics-server"); got != withKEDA {
			t.Errorf("KEDA=%v: components %v", withKEDA, comps)
		}
		if got := slices.Contains(mods, "keda"); got != withKEDA {
			t.Errorf("KEDA=%v: modules %v", withKEDA, mods)
		}
		if withKEDA {
			// After metrics-server (the cluster is usable), before the adapter reads them.
			i, j, k := slices.Index(comps, "metrics-server"), slices.Index(comps, "keda-operator"), slices.Index(comps, "metricscale-adapter")
			if i < 0 || !(i < j && j < k) || comps[j+1] != "keda-metrics-server" {
				t.Errorf("component order %v", comps)
			}
		}
	}
	// A plain build leaves it out (an hour cold); build --keda builds it.
	if slices.Contains(AllModules(), "keda") {
		t.Errorf("AllModules() %v has keda", AllModules())
	}
	for _, withKEDA := range []bool{false, true} {
		o := DefaultOptions("")
		o.KEDA = withKEDA
		c := newTestCluster(t, false, o)
		if got := slices.Contains(c.buildModules(), "keda"); got != withKEDA {
			t.Errorf("build with KEDA=%v: modules %v", withKEDA, c.buildModules())
		}
	}
}

// TestKEDAArgs: every address KEDA takes one for is loopback; the metrics server reads the
// operator's metrics service and the certificate folder both use.
func TestKEDAArgs(t *testing.T) {
	t.Parallel()
	o := DefaultOptions("")
	o.KEDA = true
	c := newTestCluster(t, true, o)
	op, ms := c.component("keda-operator"), c.component("keda-metrics-server")
	opArgs, msArgs := strings.Join(op.Args(c), " "), strings.Join(ms.Args(c), " ")
	for _, want := range []string{"--metrics-bind-address=127.0.0.1:6460", "--health-probe-bind-address=127.0.0.1:6461",
		"--metrics-service-bind-address=127.0.0.1:6462", "--enable-cert-rotation=false", "--leader-elect=false",
		"--cert-dir=" + c.kedaCertDir()} {
		if !strings.Contains(opArgs, want) {
			t.Errorf("operator args lack %s: %s", want, opArgs)
		}
	}
	for _, want := range []string{"--bind-address=127.0.0.1", "--secure-port=6463", "--metrics-service-address=127.0.0.1:6462",
		"--cert-dir=" + c.kedaCertDir(), "--tls-cert-file=" + filepath.Join(c.kedaCertDir(), "tls.crt")} {
		if !strings.Contains(msArgs, want) {
			t.Errorf("metrics server args lack %s: %s", want, msArgs)
		}
	}
	env := strings.Join(kedaEnv(c), " ")
	for _, want := range []string{"WATCH_NAMESPACE= ", "POD_NAMESPACE=keda", "KUBECONFIG=" + filepath.Join(c.Dir, "kubeconfigs", "keda-operator.kubeconfig")} {
		if !strings.Contains(env+" ", want) {
			t.Errorf("env lacks %q: %s", want, env)
		}
	}
}

func TestCRDName(t *testing.T) {
	t.Parallel()
	for file, want := range map[string]string{
		"keda.sh_scaledobjects.yaml":              "scaledobjects.keda.sh",
		"eventing.keda.sh_cloudeventsources.yaml": "cloudeventsources.eventing.keda.sh",
	} {
		if got := crdName(file); got != want {
			t.Errorf("crdName(%s) = %s, want %s", file, got, want)
		}
	}
}

// TestKEDAAdapterConfig: the cluster's adapter config with the keda fragment is valid and
// sends KEDA's metric names, and only those, to the provider keda.
func TestKEDAAdapterConfig(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	base, err := os.ReadFile(filepath.Join(root, "hack", "adapter-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	frag, err := os.ReadFile(filepath.Join(root, "hack", "keda-adapter-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(AdapterConfig("/state", base, frag), catalog.Factories())
	if err != nil {
		t.Fatalf("the merged config: %v", err)
	}
	route := func(metric string) string {
		for _, r := range cfg.Routes {
			if r.Kind != "" && r.Kind != config.KindExternal {
				continue
			}
			if ok, _ := path.Match(r.Metric, metric); ok {
				return r.Provider
			}
		}
		return ""
	}
	for metric, want := range map[string]string{
		"s0-redis-keda-jobs":    "keda",
		"s12-rabbitmq-orders":   "keda",
		"redis_e2e_jobs_length": "memory", // the redis backend's fragment is not merged here
		"e2e_pushed":            "memory",
		"fed_queue_depth":       "federated",
		"scaled_jobs":           "memory",
	} {
		if got := route(metric); got != want {
			t.Errorf("%s is routed to %q, want %q", metric, got, want)
		}
	}
}

// TestKEDAAPIQPS: up --keda-api-qps N raises both processes' client rate limit and the
// operator's reconciles, keeps it in the state for env and a restart; unset leaves KEDA's
// defaults (no flag, no variable); a bad value is refused naming the flag.
func TestKEDAAPIQPS(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		args      []string
		wantArgs  []string // in both processes' args
		wantEnv   string   // in the operator's env; "" for none of KEDA_SCALEDOBJECT_*
		wantState string
		err       string
	}{
		{name: "unset: KEDA's defaults", args: []string{"up", "--keda"}},
		{name: "200", args: []string{"up", "--keda", "--keda-api-qps", "200"},
			wantArgs: []string{"--kube-api-qps=200", "--kube-api-burst=400"},
			wantEnv:  "KEDA_SCALEDOBJECT_CTRL_MAX_RECONCILES=20", wantState: "200"},
		{name: "with =", args: []string{"up", "--keda-api-qps=50", "--keda"},
			wantArgs: []string{"--kube-api-qps=50", "--kube-api-burst=100"},
			wantEnv:  "KEDA_SCALEDOBJECT_CTRL_MAX_RECONCILES=20", wantState: "50"},
		{name: "zero", args: []string{"up", "--keda", "--keda-api-qps", "0"}, err: "--keda-api-qps must be a positive integer up to 100000, not '0'"},
		{name: "not a number", args: []string{"up", "--keda", "--keda-api-qps", "fast"}, err: "--keda-api-qps must be a positive integer"},
		{name: "fraction", args: []string{"up", "--keda", "--keda-api-qps", "20.5"}, err: "--keda-api-qps must be a positive integer"},
		{name: "too large", args: []string{"up", "--keda", "--keda-api-qps", "100001"}, err: "--keda-api-qps must be a positive integer up to 100000"},
		{name: "missing value", args: []string{"up", "--keda", "--keda-api-qps"}, err: "--keda-api-qps needs a value"},
		{name: "without --keda", args: []string{"up", "--keda-api-qps", "200"}, err: "--keda-api-qps needs --keda"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inv, ok := parseArgsWant(t, tt.args, func(string) string { return "" }, "/cache/cluster", tt.err)
			if !ok {
				return
			}
			if got := inv.Options.Explicit("keda-api-qps"); got != (tt.wantState != "") {
				t.Errorf("Explicit(keda-api-qps) = %v", got)
			}
			c := newTestCluster(t, true, inv.Options)
			for _, name := range []string{"keda-operator", "keda-metrics-server"} {
				args := c.component(name).Args(c)
				var rate []string
				for _, a := range args {
					if strings.HasPrefix(a, "--kube-api-") {
						rate = append(rate, a)
					}
				}
				if !slices.Equal(rate, tt.wantArgs) {
					t.Errorf("%s: rate flags %q, want %q", name, rate, tt.wantArgs)
				}
			}
			var reconciles []string
			for _, e := range c.component("keda-operator").Env(c) {
				if strings.HasPrefix(e, "KEDA_SCALEDOBJECT_") {
					reconciles = append(reconciles, e)
				}
			}
			if want := slices.DeleteFunc([]string{tt.wantEnv}, func(s string) bool { return s == "" }); !slices.Equal(reconciles, want) {
				t.Errorf("operator env %q, want %q", reconciles, want)
			}
			if ms := strings.Join(c.component("keda-metrics-server").Env(c), " "); strings.Contains(ms, "KEDA_SCALEDOBJECT_") {
				t.Errorf("metrics server env: %s", ms)
			}
			// Kept in the state file, as env and the metrics server's restart read it.
			st, err := ParseState((&State{KEDAAPIQPS: kedaAPIQPSState(inv.Options)}).Marshal())
			if err != nil || st.KEDAAPIQPS != tt.wantState {
				t.Errorf("state KEDAAPIQPS %q (%v), want %q", st.KEDAAPIQPS, err, tt.wantState)
			}
		})
	}
}
