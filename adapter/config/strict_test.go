package config

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/memory"
	"github.com/metricscale/metricscale/providers/prometheus"
)

var testFactories = map[string]providers.Factory{memory.Type: memory.Factory{}, prometheus.Type: prometheus.Factory{}}

// Each of these was reported "valid" before check-config became strict.
func TestParseRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, doc, want string }{
		{"second document", "providers: [{name: a, type: memory}]\n---\nproviders: [{name: b, type: memory}]\n", "2 YAML documents"},
		{"top-level key case", "Providers: [{name: a, type: memory}]\n", `Providers: unknown key; did you mean "providers"?`},
		{"nested key case", "providers: [{name: a, Type: memory}]\n", `providers[0].Type: unknown key; did you mean "type"?`},
		{"route key case", "providers: [{name: a, type: memory}]\nroutes: [{Metric: x, provider: a}]\n", `routes[0].Metric`},
		{"resource route glob", "providers: [{name: a, type: memory}]\nroutes: [{metric: cpu, provider: a, kind: resource}]\n", `routes[0].metric: a resource route`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tc.doc), testFactories)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := Parse([]byte("---\nproviders: [{name: a, type: memory}]\n...\n"), testFactories); err != nil {
		t.Errorf("one document with markers: %v", err)
	}
}

func TestWarnings(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(`
providers: [{name: a, type: memory}, {name: b, type: memory}, {name: c, type: memory}]
routes:
- {metric: "q_*", provider: a}
- {metric: "q_*", provider: b}
- {metric: "*", provider: a}
- {metric: "x", provider: b, kind: external}
`), testFactories)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(c.Warnings(nil), "\n")
	for _, want := range []string{
		"routes[1]: duplicates routes[0]",
		"routes[3]: unreachable: routes[2]",
		"providers[2] (c): no route reaches it",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("warnings %q lack %q", got, want)
		}
	}
}

func TestFromPrometheusAdapter(t *testing.T) {
	t.Parallel()
	rules := []byte(`
rules:
- seriesQuery: 'http_requests_total{namespace!="",pod!=""}'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  name: {matches: "^(.*)_total$", as: "${1}_per_second"}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)'
resourceRules:
  cpu:
    containerQuery: 'sum(rate(container_cpu_usage_seconds_total{<<.LabelMatchers>>,container!=""}[3m])) by (<<.GroupBy>>)'
    nodeQuery: 'sum(rate(container_cpu_usage_seconds_total{<<.LabelMatchers>>,id="/"}[3m])) by (<<.GroupBy>>)'
    resources: {overrides: {node: {resource: node}, namespace: {resource: namespace}, pod: {resource: pod}}}
    containerLabel: container
  memory:
    containerQuery: 'sum(container_memory_working_set_bytes{<<.LabelMatchers>>,container!=""}) by (<<.GroupBy>>)'
    nodeQuery: 'sum(container_memory_working_set_bytes{<<.LabelMatchers>>,id="/"}) by (<<.GroupBy>>)'
    resources: {overrides: {node: {resource: node}, namespace: {resource: namespace}, pod: {resource: pod}}}
    containerLabel: container
  window: 3m
`)
	if !prometheus.IsAdapterConfig(rules) {
		t.Fatal("not recognised as a prometheus-adapter rules file")
	}
	c, err := FromPrometheusAdapter(rules, prometheus.AdapterFlags{PrometheusURL: "http://prom:9090"})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Providers) != 1 || c.Providers[0].Type != prometheus.Type {
		t.Fatalf("providers = %+v", c.Providers)
	}
	if err := c.Validate(testFactories); err != nil {
		t.Fatalf("the generated config does not validate: %v", err)
	}
	var opts map[string]any
	if err := json.Unmarshal(c.Providers[0].Options, &opts); err != nil || opts["url"] != "http://prom:9090" || opts["rules"] == nil {
		t.Errorf("options = %s (%v)", c.Providers[0].Options, err)
	}
	kinds := map[string]bool{}
	for _, r := range c.Routes {
		kinds[r.Kind] = true
	}
	if !kinds[""] || !kinds[KindResource] {
		t.Errorf("routes = %+v, want a catch-all and a resource route", c.Routes)
	}
}
