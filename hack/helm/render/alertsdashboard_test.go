package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// The observability pack's sources: the chart's files are the originals,
// manifests/monitoring holds the same for kustomize users.
const (
	alertsFile        = chartDir + "/files/alerts.yaml"
	dashboardFile     = chartDir + "/files/grafana-dashboard.json"
	alertsManifest    = manifestsDir + "/monitoring/prometheusrule.yaml"
	dashboardManifest = manifestsDir + "/monitoring/grafana-dashboard.json"
	alertsUnitTests   = "testdata/alerts_test.yaml"
)

// promtool returns the path of Prometheus' promtool (Debian's prometheus
// package ships it; .ci/run installs it with hack/cluster.sh
// install-prometheus). Without it the test skips, but fails under CI.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool not found and CI is set: .ci/run installs Debian's prometheus package (hack/cluster.sh install-prometheus), which ships it")
		}
		t.Skip("promtool not found (apt-get install prometheus): the alert rules and dashboard queries were not checked")
	}
	return p
}

func runPromtool(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
}

func readYAML(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// TestAlertRules checks the rules file and runs its unit tests, every alert
// firing and not: promtool check rules and promtool test rules.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	abs, err := filepath.Abs(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	runPromtool(t, ".", "check", "rules", abs)
	runPromtool(t, "testdata", "test", "rules", filepath.Base(alertsUnitTests))

	// Every alert of the file has a unit test that expects it to fire.
	rules := readYAML(t, alertsFile)
	tests := readYAML(t, alertsUnitTests)
	fired := map[string]bool{}
	for _, tc := range tests["tests"].([]any) {
		for _, at := range tc.(map[string]any)["alert_rule_test"].([]any) {
			at := at.(map[string]any)
			if exp, _ := at["exp_alerts"].([]any); len(exp) > 0 {
				fired[at["alertname"].(string)] = true
			}
		}
	}
	n := 0
	for _, g := range rules["groups"].([]any) {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			name, _ := r.(map[string]any)["alert"].(string)
			n++
			if !fired[name] {
				t.Errorf("alert %s: %s has no case where it fires", name, alertsUnitTests)
			}
		}
	}
	if n == 0 {
		t.Fatalf("%s has no rules", alertsFile)
	}
}

// TestAlertsDashboardManifests keeps manifests/monitoring equal to the chart's
// files, and the chart's renders equal to both.
func TestAlertsDashboardManifests(t *testing.T) {
	t.Parallel()
	groups := readYAML(t, alertsFile)["groups"]
	pr := readYAML(t, alertsManifest)
	if diff := cmp.Diff(groups, pr["spec"].(map[string]any)["groups"]); diff != "" {
		t.Errorf("%s's groups differ from %s (edit the chart's file, then copy its groups there) (-chart +manifests):\n%s", alertsManifest, alertsFile, diff)
	}
	dash, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	if cp, err := os.ReadFile(dashboardManifest); err != nil || !bytes.Equal(cp, dash) {
		t.Errorf("%s differs from %s (%v): cp %[2]s %[1]s", dashboardManifest, dashboardFile, err)
	}

	// kustomize build manifests/monitoring: the PrometheusRule and the
	// dashboard's ConfigMap, as the chart renders them.
	out, err := Kustomize(manifestsDir + "/monitoring")
	if err != nil {
		t.Fatal(err)
	}
	mon := parse(t, "kustomize build manifests/monitoring", out)
	kpr := as[unstructured.Unstructured](t, mon, "PrometheusRule/metricscale/metricscale")
	if diff := cmp.Diff(pr["spec"], kpr.Object["spec"]); diff != "" {
		t.Errorf("kustomize build manifests/monitoring's PrometheusRule differs from %s (-file +build):\n%s", alertsManifest, diff)
	}
	kcm := as[corev1.ConfigMap](t, mon, "ConfigMap/metricscale/metricscale-dashboard")
	if kcm.Data["metricscale.json"] != string(dash) || kcm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("kustomize build manifests/monitoring's dashboard ConfigMap: labels %v, metricscale.json %d bytes, want %s (%d bytes)", kcm.Labels, len(kcm.Data["metricscale.json"]), dashboardFile, len(dash))
	}

	// The chart with both on and the defaults: the kustomize base's
	// PrometheusRule, with Helm's labels, and the dashboard as is.
	objs := objects(t, Options{Set: []string{"prometheusRule.enabled=true", "grafanaDashboard.enabled=true"}})
	got := as[unstructured.Unstructured](t, objs, "PrometheusRule/metricscale/metricscale")
	if diff := cmp.Diff(pr["spec"], got.Object["spec"]); diff != "" {
		t.Errorf("the chart's PrometheusRule differs from %s (-manifests +chart):\n%s", alertsManifest, diff)
	}
	cm := as[corev1.ConfigMap](t, objs, "ConfigMap/metricscale/metricscale-dashboard")
	if got := cm.Data["metricscale.json"]; got != strings.TrimRight(string(dash), "\n") {
		t.Errorf("the dashboard ConfigMap's metricscale.json is not %s", dashboardFile)
	}
	if cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap labels %v: want the sidecar's grafana_dashboard=1", cm.Labels)
	}
}

// TestAlertsDashboardValues checks the prometheusRule and grafanaDashboard values.
func TestAlertsDashboardValues(t *testing.T) {
	t.Parallel()
	t.Run("off by default", func(t *testing.T) {
		t.Parallel()
		for k := range objects(t, Options{}) {
			if strings.HasPrefix(k, "PrometheusRule/") || k == "ConfigMap/metricscale/metricscale-dashboard" {
				t.Errorf("the defaults render %s", k)
			}
		}
	})
	t.Run("release names, namespaces, labels", func(t *testing.T) {
		t.Parallel()
		objs := objects(t, Options{ReleaseName: "prod", Set: []string{
			"prometheusRule.enabled=true", "prometheusRule.namespace=monitoring", "prometheusRule.labels.release=kube-prometheus-stack",
			"prometheusRule.annotations.team=platform",
			"grafanaDashboard.enabled=true", "grafanaDashboard.namespace=grafana", "grafanaDashboard.labels.grafana_dashboard=yes",
			"grafanaDashboard.annotations.grafana_folder=Autoscaling", "commonLabels.owner=sre",
		}})
		pr := as[unstructured.Unstructured](t, objs, "PrometheusRule/monitoring/prod-metricscale")
		if l := pr.GetLabels(); l["release"] != "kube-prometheus-stack" || l["owner"] != "sre" || l["app.kubernetes.io/instance"] != "prod" {
			t.Errorf("PrometheusRule labels %v", l)
		}
		if a := pr.GetAnnotations(); a["team"] != "platform" {
			t.Errorf("PrometheusRule annotations %v", a)
		}
		exprs := alertExprs(t, pr)
		for _, job := range []string{`job="prod-metricscale-adapter"`, `job="prod-metricscale-autoscaler"`} {
			if !slices.ContainsFunc(exprs, func(e string) bool { return strings.Contains(e, job) }) {
				t.Errorf("no alert selects %s: %q", job, exprs)
			}
		}
		for _, e := range exprs {
			if strings.Contains(e, `job="metricscale-`) {
				t.Errorf("expr %q keeps the kustomize base's job", e)
			}
		}
		cm := as[corev1.ConfigMap](t, objs, "ConfigMap/grafana/prod-metricscale-dashboard")
		if cm.Labels["grafana_dashboard"] != "yes" || cm.Labels["owner"] != "sre" || cm.Annotations["grafana_folder"] != "Autoscaling" {
			t.Errorf("dashboard ConfigMap labels %v annotations %v", cm.Labels, cm.Annotations)
		}
	})
	t.Run("jobs", func(t *testing.T) {
		t.Parallel()
		objs := objects(t, Options{Set: []string{"prometheusRule.enabled=true", "prometheusRule.adapterJob=metricscale/adapter", "prometheusRule.autoscalerJob=metricscale/autoscaler"}})
		exprs := alertExprs(t, as[unstructured.Unstructured](t, objs, "PrometheusRule/metricscale/metricscale"))
		for _, want := range []string{`up{job="metricscale/adapter"} == 0`, `absent(up{job="metricscale/autoscaler"} == 1)`} {
			if !slices.Contains(exprs, want) {
				t.Errorf("no alert expr %s: %q", want, exprs)
			}
		}
	})
	t.Run("unknown keys refused", func(t *testing.T) {
		t.Parallel()
		for _, set := range []string{"prometheusRule.enable=true", "grafanaDashboard.label.x=y"} {
			if _, err := Template(chartDir, Options{Set: []string{set}}); err == nil {
				t.Errorf("--set %s: rendered, want a schema error", set)
			}
		}
	})
}

func alertExprs(t *testing.T, pr *unstructured.Unstructured) []string {
	t.Helper()
	groups, _, _ := unstructured.NestedSlice(pr.Object, "spec", "groups")
	var exprs []string
	for _, g := range groups {
		rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, r := range rules {
			e, _, _ := unstructured.NestedString(r.(map[string]any), "expr")
			exprs = append(exprs, strings.TrimSpace(e))
		}
	}
	if len(exprs) == 0 {
		t.Fatal("the PrometheusRule has no rules")
	}
	return exprs
}

// dashboard is the part of a Grafana dashboard the tests read.
type dashboard struct {
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int     `json:"id"`
	Type       string  `json:"type"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"` // a collapsed row's
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
}

var dashboardVar = regexp.MustCompile(`\$\{?(\w+)\}?`)

// TestDashboard checks the dashboard's structure, and that every panel query
// is valid PromQL once its variables are substituted (promtool check rules of
// a recording rule each). The e2e suite (TestDashboardPanels) runs them on
// the local cluster's Prometheus.
func TestDashboard(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.UID == "" {
		t.Error("the dashboard has no uid")
	}
	vars := map[string]bool{"__rate_interval": true, "__interval": true, "__range": true}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	var rules []map[string]string
	ids := map[int]string{}
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if prev, dup := ids[p.ID]; dup {
				t.Errorf("panels %q and %q share id %d", prev, p.Title, p.ID)
			}
			ids[p.ID] = p.Title
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			if p.Title == "" || len(p.Targets) == 0 {
				t.Errorf("panel %d (%q): want a title and queries", p.ID, p.Title)
			}
			if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: datasource %+v, want the ${datasource} variable", p.Title, p.Datasource)
			}
			for _, tg := range p.Targets {
				for _, m := range dashboardVar.FindAllStringSubmatch(tg.Expr, -1) {
					if !vars[m[1]] {
						t.Errorf("panel %q query %s: no variable %s", p.Title, tg.RefID, m[0])
					}
				}
				expr := dashboardVar.ReplaceAllStringFunc(tg.Expr, func(v string) string {
					if strings.HasPrefix(strings.Trim(v, "${}"), "__") {
						return "1m"
					}
					return ".*"
				})
				rules = append(rules, map[string]string{"record": fmt.Sprintf("panel_%d_%s", p.ID, tg.RefID), "expr": expr})
			}
		}
	}
	walk(d.Panels)
	if len(rules) == 0 {
		t.Fatal("the dashboard has no queries")
	}
	out, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "dashboard-queries.yaml")
	if err := os.WriteFile(file, out, 0o644); err != nil {
		t.Fatal(err)
	}
	runPromtool(t, ".", "check", "rules", file)
}
