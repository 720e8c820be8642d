//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// The observability pack (manifests/chart/files): the dashboard whose every panel query
// must return series, and the alert rules the cluster's Prometheus loads.
const (
	dashboardJSON = "manifests/chart/files/grafana-dashboard.json"
	alertRules    = "manifests/chart/files/alerts.yaml"
)

// grafanaDashboard is the part of the dashboard the test reads.
type grafanaDashboard struct {
	Panels     []grafanaPanel `json:"panels"`
	Templating struct {
		List []grafanaVariable `json:"list"`
	} `json:"templating"`
}

type grafanaPanel struct {
	Type    string         `json:"type"`
	Title   string         `json:"title"`
	Panels  []grafanaPanel `json:"panels"` // a collapsed row's
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
}

type grafanaVariable struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	AllValue string `json:"allValue"`
	// A query variable's is {"query": ...}; a data source variable's, its type.
	Query json.RawMessage `json:"query"`
}

// panelQuery is one query of one panel.
type panelQuery struct {
	panel, refID, expr string
}

var (
	// label_values(metric{selector}, label), a query variable's query.
	labelValues = regexp.MustCompile(`^label_values\((.*),\s*(\w+)\)$`)
	dashVar     = regexp.MustCompile(`\$\{?(\w+)\}?`)
	// The metrics a query reads: metricscale's own, the API server's, up.
	metricName = regexp.MustCompile(`\b(metricscale_\w+|apiserver_\w+|up)\b`)
)

// TestDashboardPanels runs every panel query of the Grafana dashboard on the cluster's
// Prometheus, which scrapes the cluster's adapter and autoscaler as the chart's
// ServiceMonitors do (HTTPS with a scraper ServiceAccount's token for the adapter), with
// the dashboard's variables set to all their values, while a MetricAutoscaler scales: each
// must return at least one series (no empty panel). Every metric a panel or an alert reads
// must exist, and the alert rules, loaded in that Prometheus, must evaluate without error.
func TestDashboardPanels(t *testing.T) {
	cluster.RequirePrometheus(t)
	needAutoscaler(t)
	ctx := context.Background()

	// The scrapes: the alerts' "down" rules select these jobs.
	for _, job := range []string{"metricscale-adapter", "metricscale-autoscaler"} {
		q := fmt.Sprintf(`up{job=%q} == 1`, job)
		Eventually(t, 60*time.Second, time.Second, "a successful scrape of job "+job, func(ctx context.Context) (bool, string, error) {
			s, err := cluster.QueryPrometheus(ctx, fmt.Sprintf(`up{job=%q}`, job))
			if err != nil {
				return false, "", err
			}
			if len(s) == 0 {
				return false, "Prometheus has no such job (a cluster started before hack/cluster scraped the adapter? hack/cluster.sh down && hack/cluster.sh up)", nil
			}
			up, err := cluster.QueryPrometheus(ctx, q)
			return err == nil && len(up) > 0, fmt.Sprintf("%v (the target's lastError: %s)", s, scrapeError(ctx, job)), err
		})
	}

	// A MetricAutoscaler that scales 1 → 3: series for replicas, metrics, conditions and
	// the last scale time.
	ns := cluster.CreateNamespace(t, "dashboard")
	queue := "dashboard-" + ns
	pushDepth(t, queue, 10)
	cluster.CreateDeployment(t, KwokDeployment(ns, "workers", 1, "100m", "10m"))
	createMA(t, newMA(ns, "workers", 1, 5, time.Second, queueSpec(queue, "10")))
	waitReplicas(t, ns, "workers", 1, 30*time.Second)
	pushDepth(t, queue, 30)
	waitReplicas(t, ns, "workers", 3, 30*time.Second)
	// A read of a metric no provider has: the adapter counts a failed query
	// (metricscale_adapter_backend_errors_total), which an alert reads.
	missing := "/apis/external.metrics.k8s.io/v1beta1/namespaces/" + ns + "/e2e_dashboard_no_such_metric"
	if _, err := cluster.Client.Discovery().RESTClient().Get().AbsPath(missing).DoRaw(ctx); err == nil {
		t.Fatalf("GET %s answered; want an error for a metric no provider has", missing)
	}

	d := readDashboard(t)
	queries, vars := dashboardQueries(t, d)

	// The variables: each, as Grafana's "All", from Prometheus' answer to its query.
	values := map[string]string{"__rate_interval": "1m", "__interval": "15s", "__range": "5m"}
	for _, v := range vars {
		if v.Type != "query" {
			continue
		}
		var query struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &query); err != nil {
			t.Fatalf("variable %s: query %s: %v", v.Name, v.Query, err)
		}
		m := labelValues.FindStringSubmatch(query.Query)
		if m == nil {
			t.Fatalf("variable %s: query %q is not label_values(metric, label)", v.Name, query.Query)
		}
		selector, label := substitute(m[1], values), m[2]
		// Earlier tests' MetricAutoscalers may still have series: wait for this one's
		// (the autoscaler is scraped every 5 s), not merely for any value.
		want := map[string]string{"namespace": ns, "name": "workers"}[v.Name]
		var got []string
		Eventually(t, 30*time.Second, time.Second, "values of variable "+v.Name+" including "+want, func(ctx context.Context) (bool, string, error) {
			s, err := cluster.QueryPrometheus(ctx, fmt.Sprintf("group by (%s) (%s)", label, selector))
			if err != nil {
				return false, "", err
			}
			got = got[:0]
			for _, e := range s {
				got = append(got, e.Labels[label])
			}
			sort.Strings(got)
			return len(got) > 0 && (want == "" || slices.Contains(got, want)), fmt.Sprintf("%q", got), nil
		})
		quoted := make([]string, len(got))
		for i, g := range got {
			quoted[i] = regexp.QuoteMeta(g)
		}
		values[v.Name] = "(" + strings.Join(quoted, "|") + ")"
		if v.AllValue != "" {
			values[v.Name] = v.AllValue
		}
		t.Logf("variable %s = %s (values %q)", v.Name, values[v.Name], got)
	}

	// Every panel query returns series. The rate windows need two scrapes after the
	// scale: wait for all, then name the panels still empty.
	var empty []string
	err := Poll(ctx, 60*time.Second, 2*time.Second, func(ctx context.Context) (bool, string, error) {
		empty = empty[:0]
		for _, q := range queries {
			s, err := cluster.QueryPrometheus(ctx, substitute(q.expr, values))
			if err != nil {
				return false, "", fmt.Errorf("panel %q query %s: %w", q.panel, q.refID, err)
			}
			if len(s) == 0 {
				empty = append(empty, fmt.Sprintf("panel %q query %s: %s", q.panel, q.refID, substitute(q.expr, values)))
			}
		}
		return len(empty) == 0, fmt.Sprintf("%d of %d queries empty", len(empty), len(queries)), nil
	})
	if err != nil {
		t.Errorf("%v; the empty ones:\n  %s", err, strings.Join(empty, "\n  "))
	}
	t.Logf("%d panel queries of %d panels returned series", len(queries), countPanels(d.Panels))

	// Every metric a panel or an alert reads exists in what Prometheus scraped.
	rules := readRules(t)
	names := map[string]bool{}
	for _, q := range queries {
		for _, n := range metricName.FindAllString(q.expr, -1) {
			names[n] = true
		}
	}
	for _, r := range rules {
		for _, n := range metricName.FindAllString(r.Expr, -1) {
			names[n] = true
		}
	}
	for _, n := range slices.Sorted(maps.Keys(names)) {
		s, err := cluster.QueryPrometheus(ctx, fmt.Sprintf(`count({__name__=%q})`, n))
		if err != nil {
			t.Fatal(err)
		}
		if len(s) == 0 {
			t.Errorf("no series of %s, which the dashboard or an alert reads", n)
		}
	}

	// The alert rules, loaded by the cluster's Prometheus, evaluate on the real series.
	Eventually(t, 30*time.Second, time.Second, "every alert rule evaluated without error", func(ctx context.Context) (bool, string, error) {
		health, err := ruleHealth(ctx)
		if err != nil {
			return false, "", err
		}
		var bad []string
		for _, r := range rules {
			if h, ok := health[r.Alert]; !ok {
				bad = append(bad, r.Alert+": not loaded")
			} else if h != "ok" {
				bad = append(bad, r.Alert+": "+h)
			}
		}
		return len(bad) == 0, strings.Join(bad, "; "), nil
	})
}

func readDashboard(t *testing.T) grafanaDashboard {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cluster.RepoRoot, dashboardJSON))
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardJSON, err)
	}
	return d
}

// dashboardQueries lists every panel query, rows' panels included, and the variables.
func dashboardQueries(t *testing.T, d grafanaDashboard) ([]panelQuery, []grafanaVariable) {
	t.Helper()
	var out []panelQuery
	var walk func([]grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				out = append(out, panelQuery{panel: p.Title, refID: tg.RefID, expr: tg.Expr})
			}
		}
	}
	walk(d.Panels)
	if len(out) == 0 {
		t.Fatal("the dashboard has no panel queries")
	}
	return out, d.Templating.List
}

func countPanels(ps []grafanaPanel) int {
	n := 0
	for _, p := range ps {
		if p.Type != "row" {
			n++
		}
		n += countPanels(p.Panels)
	}
	return n
}

// substitute replaces $var and ${var} with their values; unknown ones stay.
func substitute(expr string, values map[string]string) string {
	return dashVar.ReplaceAllStringFunc(expr, func(v string) string {
		if val, ok := values[strings.Trim(v, "${}")]; ok {
			return val
		}
		return v
	})
}

type alertRule struct {
	Alert string `json:"alert"`
	Expr  string `json:"expr"`
}

func readRules(t *testing.T) []alertRule {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cluster.RepoRoot, alertRules))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []alertRule `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", alertRules, err)
	}
	var out []alertRule
	for _, g := range f.Groups {
		out = append(out, g.Rules...)
	}
	if len(out) == 0 {
		t.Fatalf("%s has no rules", alertRules)
	}
	return out
}

// ruleHealth returns each alerting rule's health as Prometheus' /api/v1/rules reports
// it ("ok", or "err: " and its last error; "unknown" before its first evaluation).
func ruleHealth(ctx context.Context) (map[string]string, error) {
	var r struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Name      string `json:"name"`
					Type      string `json:"type"`
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := prometheusGet(ctx, "/api/v1/rules?type=alert", &r); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, g := range r.Data.Groups {
		for _, rule := range g.Rules {
			h := rule.Health
			if rule.LastError != "" {
				h += ": " + rule.LastError
			}
			out[rule.Name] = h
		}
	}
	return out, nil
}

// scrapeError is the last scrape error of job's targets (/api/v1/targets), for messages.
func scrapeError(ctx context.Context, job string) string {
	var r struct {
		Data struct {
			ActiveTargets []struct {
				ScrapePool string `json:"scrapePool"`
				LastError  string `json:"lastError"`
			} `json:"activeTargets"`
		} `json:"data"`
	}
	if err := prometheusGet(ctx, "/api/v1/targets?state=active", &r); err != nil {
		return err.Error()
	}
	for _, tg := range r.Data.ActiveTargets {
		if tg.ScrapePool == job {
			return fmt.Sprintf("%q", tg.LastError)
		}
	}
	return "no such target"
}

func prometheusGet(ctx context.Context, path string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cluster.PrometheusURL+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d: %.300s", path, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return nil
}
