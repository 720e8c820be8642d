package render

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// theirDir holds a values file in the prometheus-community prometheus-adapter
// chart's layout and that chart's render of it.
const theirDir = "../../../adapter/dropin/testdata/prometheus-community-chart"

// fromPrometheusAdapter is the README's mapping ("Coming from
// prometheus-adapter") of that chart's values to this chart's, for the keys
// of theirDir's values file: "" keeps the key where it is.
var fromPrometheusAdapter = map[string]string{
	"prometheus":            "",
	"metricsRelistInterval": "",
	"rules":                 "",
	"replicas":              "adapter.replicas",
	"logLevel":              "adapter.logLevel",
	"resources":             "adapter.resources",
}

// translate maps a values file of that chart to this chart's values, with
// the push endpoint off as the README says.
func translate(t *testing.T, theirs map[string]any) map[string]any {
	t.Helper()
	ours := map[string]any{"adapter": map[string]any{"push": map[string]any{"enabled": false}}}
	for k, v := range theirs {
		to, ok := fromPrometheusAdapter[k]
		if !ok {
			t.Fatalf("values key %q has no mapping in the README's table", k)
		}
		if to == "" {
			ours[k] = v
			continue
		}
		path := strings.Split(to, ".")
		m := ours
		for _, p := range path[:len(path)-1] {
			m = m[p].(map[string]any)
		}
		m[path[len(path)-1]] = v
	}
	return ours
}

// rulesFile is prometheus-adapter's rules file, and the prometheus
// provider's options that hold the same rules.
type rulesFile struct {
	URL            string `json:"url,omitempty"`
	RelistInterval string `json:"relistInterval,omitempty"`
	Rules          any    `json:"rules,omitempty"`
	ExternalRules  any    `json:"externalRules,omitempty"`
	ResourceRules  any    `json:"resourceRules,omitempty"`
}

var spaces = regexp.MustCompile(`\s+`)

// normalized turns v into plain values with every string's white space
// collapsed: the same PromQL folded or not by a YAML encoder compares equal.
func normalized(t *testing.T, v any) any {
	t.Helper()
	data, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := yaml.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	var walk func(any) any
	walk = func(v any) any {
		switch v := v.(type) {
		case string:
			return strings.TrimSpace(spaces.ReplaceAllString(v, " "))
		case []any:
			for i := range v {
				v[i] = walk(v[i])
			}
		case map[string]any:
			for k := range v {
				v[k] = walk(v[k])
			}
		}
		return v
	}
	return walk(out)
}

// flag returns the value of --name=value in args.
func flag(t *testing.T, args []string, name string) string {
	t.Helper()
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	t.Fatalf("no %s in %q", name, args)
	return ""
}

// TestPrometheusAdapterValues renders this chart with a values file written
// for the prometheus-community prometheus-adapter chart, mapped as the
// README says, and checks the result against that chart's render of the
// same file: the config passes `adapter check-config` and holds the same
// Prometheus URL, relist interval and rules (rules.default included), and the
// Deployment the same replicas, resources and log level.
func TestPrometheusAdapterValues(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(theirDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var theirValues map[string]any
	if err := yaml.Unmarshal(data, &theirValues); err != nil {
		t.Fatal(err)
	}
	theirRender, err := os.ReadFile(filepath.Join(theirDir, "render.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	theirObjs := parse(t, "their render", theirRender)
	theirDeploy := as[appsv1.Deployment](t, theirObjs, "Deployment/monitoring/prometheus-adapter")
	theirContainer := theirDeploy.Spec.Template.Spec.Containers[0]
	var theirRules rulesFile
	if err := yaml.UnmarshalStrict([]byte(as[corev1.ConfigMap](t, theirObjs, "ConfigMap/monitoring/prometheus-adapter").Data["config.yaml"]), &theirRules); err != nil {
		t.Fatal(err)
	}

	objs := objects(t, Options{Values: translate(t, theirValues)})
	var config string
	for k := range objs {
		if strings.HasPrefix(k, "ConfigMap/metricscale/metricscale-adapter-config") {
			config = as[corev1.ConfigMap](t, objs, k).Data["config.yaml"]
		}
	}
	var ours struct {
		Providers []struct {
			Name, Type string
			Options    rulesFile
		}
		Routes []map[string]string
	}
	if err := yaml.Unmarshal([]byte(config), &ours); err != nil {
		t.Fatalf("config.yaml: %v\n%s", err, config)
	}
	if len(ours.Providers) != 1 || ours.Providers[0].Name != "prometheus" || ours.Providers[0].Type != "prometheus" {
		t.Fatalf("providers %+v, want one prometheus provider named prometheus", ours.Providers)
	}
	opts := ours.Providers[0].Options
	if want := flag(t, theirContainer.Args, "--prometheus-url"); opts.URL != want {
		t.Errorf("url %q, want their --prometheus-url %q", opts.URL, want)
	}
	if want := flag(t, theirContainer.Args, "--metrics-relist-interval"); opts.RelistInterval != want {
		t.Errorf("relistInterval %q, want their --metrics-relist-interval %q", opts.RelistInterval, want)
	}
	opts.URL, opts.RelistInterval = "", ""
	if diff := cmp.Diff(normalized(t, theirRules), normalized(t, opts)); diff != "" {
		t.Errorf("rules differ from their rules file (-theirs +ours):\n%s", diff)
	}
	wantRoutes := []map[string]string{{"metric": "*", "provider": "prometheus"}, {"metric": "*", "provider": "prometheus", "kind": "resource"}}
	if diff := cmp.Diff(wantRoutes, ours.Routes); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
	if !slices.Contains(apiServiceNames(objs), "v1beta1.metrics.k8s.io") {
		t.Errorf("APIServices %v: resource rules serve metrics.k8s.io, as that chart registers it", apiServiceNames(objs))
	}

	d := as[appsv1.Deployment](t, objs, "Deployment/metricscale/metricscale-adapter")
	c := d.Spec.Template.Spec.Containers[0]
	if *d.Spec.Replicas != *theirDeploy.Spec.Replicas {
		t.Errorf("replicas %d, want %d", *d.Spec.Replicas, *theirDeploy.Spec.Replicas)
	}
	if diff := cmp.Diff(theirContainer.Resources, c.Resources); diff != "" {
		t.Errorf("resources (-theirs +ours):\n%s", diff)
	}
	if want := "-v=" + flag(t, theirContainer.Args, "--v"); !slices.Contains(c.Args, want) {
		t.Errorf("args %q, want %s", c.Args, want)
	}
	if slices.Contains(c.Args, "--push-port=6445") {
		t.Errorf("args %q: the push endpoint is on", c.Args)
	}

	// The adapter itself accepts the rendered config.
	dir := t.TempDir()
	file := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(file, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "adapter")
	build := exec.Command("go", "build", "-o", bin, "./cmd/adapter")
	build.Dir = "../../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/adapter: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "check-config", "-f", file).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "valid (1 providers, 2 routes, 0 warnings)") {
		t.Errorf("adapter check-config: %v\n%s\nwant valid (1 providers, 2 routes, 0 warnings)", err, out)
	}
}
