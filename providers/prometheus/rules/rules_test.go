package rules

import (
	"errors"
	"strings"
	"testing"

	pmodel "github.com/prometheus/common/model"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
	"sigs.k8s.io/yaml"

	"github.com/metricscale/metricscale/providers/naming"
)

// testMapper has the types of prometheus-adapter's
// pkg/custom-provider/series_registry_test.go restMapper().
func testMapper() apimeta.RESTMapper {
	core := schema.GroupVersion{Version: "v1"}
	ext := schema.GroupVersion{Group: "extensions", Version: "v1beta1"}
	m := apimeta.NewDefaultRESTMapper([]schema.GroupVersion{core, ext})
	m.Add(core.WithKind("Pod"), apimeta.RESTScopeNamespace)
	m.Add(core.WithKind("Service"), apimeta.RESTScopeNamespace)
	m.Add(ext.WithKind("Ingress"), apimeta.RESTScopeNamespace)
	m.Add(ext.WithKind("Deployment"), apimeta.RESTScopeNamespace)
	m.Add(core.WithKind("Node"), apimeta.RESTScopeRoot)
	m.Add(core.WithKind("PersistentVolume"), apimeta.RESTScopeRoot)
	m.Add(core.WithKind("Namespace"), apimeta.RESTScopeRoot)
	return m
}

// defaultRules is prometheus-adapter's cmd/config-gen/utils/default.go
// DefaultConfig(1*time.Minute, "kube_"), which series_registry_test.go uses,
// written as a rules file.
const defaultRules = `
rules:
- seriesQuery: '{__name__=~"^container_.*",container!="POD",namespace!="",pod!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
      pod: {resource: pod}
  name: {matches: "^container_(.*)_seconds_total$"}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>,container!="POD"}[1m])) by (<<.GroupBy>>)'
- seriesQuery: '{__name__=~"^container_.*",container!="POD",namespace!="",pod!=""}'
  seriesFilters: [{isNot: "^container_.*_seconds_total$"}]
  resources:
    overrides:
      namespace: {resource: namespace}
      pod: {resource: pod}
  name: {matches: "^container_(.*)_total$"}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>,container!="POD"}[1m])) by (<<.GroupBy>>)'
- seriesQuery: '{__name__=~"^container_.*",container!="POD",namespace!="",pod!=""}'
  seriesFilters: [{isNot: "^container_.*_total$"}]
  resources:
    overrides:
      namespace: {resource: namespace}
      pod: {resource: pod}
  name: {matches: "^container_(.*)$"}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>,container!="POD"}) by (<<.GroupBy>>)'
- seriesQuery: '{kube_namespace!="",__name__!~"^container_.*"}'
  seriesFilters: [{isNot: ".*_total$"}]
  resources: {template: "kube_<<.Resource>>"}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
- seriesQuery: '{kube_namespace!="",__name__!~"^container_.*"}'
  seriesFilters: [{isNot: ".*_seconds_total"}]
  name: {matches: "^(.*)_total$"}
  resources: {template: "kube_<<.Resource>>"}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[1m])) by (<<.GroupBy>>)'
- seriesQuery: '{kube_namespace!="",__name__!~"^container_.*"}'
  name: {matches: "^(.*)_seconds_total$"}
  resources: {template: "kube_<<.Resource>>"}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[1m])) by (<<.GroupBy>>)'
`

// registrySeries is series_registry_test.go's seriesRegistryTestSeries, as
// the two seriesQueries would return them.
func registrySeries() map[string][]pmodel.LabelSet {
	s := func(name string, kv ...string) pmodel.LabelSet {
		ls := pmodel.LabelSet{pmodel.MetricNameLabel: pmodel.LabelValue(name)}
		for i := 0; i < len(kv); i += 2 {
			ls[pmodel.LabelName(kv[i])] = pmodel.LabelValue(kv[i+1])
		}
		return ls
	}
	return map[string][]pmodel.LabelSet{
		`{__name__=~"^container_.*",container!="POD",namespace!="",pod!=""}`: {
			s("container_some_time_seconds_total", "pod", "somepod", "namespace", "somens", "container", "somecont"),
			s("container_some_count_total", "pod", "somepod", "namespace", "somens", "container", "somecont"),
			s("container_some_usage", "pod", "somepod", "namespace", "somens", "container", "somecont"),
		},
		`{kube_namespace!="",__name__!~"^container_.*"}`: {
			s("node_gigawatts", "kube_node", "somenode"),
			s("service_proxy_packets", "kube_service", "somesvc", "kube_namespace", "somens"),
			s("ingress_hits_total", "kube_ingress", "someingress", "kube_service", "somesvc", "kube_pod", "backend1", "kube_namespace", "somens"),
			s("ingress_hits_total", "kube_ingress", "someingress", "kube_service", "somesvc", "kube_pod", "backend2", "kube_namespace", "somens"),
			s("volume_claims_total", "kube_persistentvolume", "somepv"),
			s("work_queue_wait_seconds_total", "kube_deployment", "somedep", "kube_namespace", "somens"),
			s("node_fan_seconds_total", "kube_node", "somenode"),
		},
	}
}

func mustParse(t testing.TB, text string) Config {
	t.Helper()
	var cfg Config
	if err := yaml.UnmarshalStrict([]byte(text), &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func mustSelector(t testing.TB, s string) labels.Selector {
	t.Helper()
	sel, err := labels.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

func TestDefaultRulesQueries(t *testing.T) {
	t.Parallel()
	res := naming.NewResolver(testMapper(), nil)
	set, err := Compile("", mustParse(t, defaultRules), res)
	if err != nil {
		t.Fatal(err)
	}
	d := Discover(set, registrySeries())

	// Every row is a case of prometheus-adapter's
	// pkg/custom-provider/series_registry_test.go ("with the default
	// configuration rules"), with its expected query verbatim.
	tests := []struct {
		title     string
		gr        schema.GroupResource
		metric    string
		namespace string
		names     []string
		selector  string
		want      string
	}{
		{"container metrics gauge / multiple resource names", schema.GroupResource{Resource: "pods"}, "some_usage", "somens", []string{"somepod1", "somepod2"}, "",
			`sum(container_some_usage{namespace="somens",pod=~"somepod1|somepod2",container!="POD"}) by (pod)`},
		{"container metrics counter", schema.GroupResource{Resource: "pods"}, "some_count", "somens", []string{"somepod1", "somepod2"}, "",
			`sum(rate(container_some_count_total{namespace="somens",pod=~"somepod1|somepod2",container!="POD"}[1m])) by (pod)`},
		{"container metrics seconds counter", schema.GroupResource{Resource: "pods"}, "some_time", "somens", []string{"somepod1", "somepod2"}, "",
			`sum(rate(container_some_time_seconds_total{namespace="somens",pod=~"somepod1|somepod2",container!="POD"}[1m])) by (pod)`},
		{"namespaced metrics counter / multidimensional (service)", schema.GroupResource{Resource: "service"}, "ingress_hits", "somens", []string{"somesvc"}, "",
			`sum(rate(ingress_hits_total{kube_namespace="somens",kube_service="somesvc"}[1m])) by (kube_service)`},
		{"namespaced metrics counter / multidimensional (service) / selection using labels", schema.GroupResource{Resource: "service"}, "ingress_hits", "somens", []string{"somesvc"}, "param1=value1",
			`sum(rate(ingress_hits_total{param1="value1",kube_namespace="somens",kube_service="somesvc"}[1m])) by (kube_service)`},
		{"namespaced metrics counter / multidimensional (ingress)", schema.GroupResource{Group: "extensions", Resource: "ingress"}, "ingress_hits", "somens", []string{"someingress"}, "",
			`sum(rate(ingress_hits_total{kube_namespace="somens",kube_ingress="someingress"}[1m])) by (kube_ingress)`},
		{"namespaced metrics counter / multidimensional (pod)", schema.GroupResource{Resource: "pod"}, "ingress_hits", "somens", []string{"somepod"}, "",
			`sum(rate(ingress_hits_total{kube_namespace="somens",kube_pod="somepod"}[1m])) by (kube_pod)`},
		{"namespaced metrics gauge", schema.GroupResource{Resource: "service"}, "service_proxy_packets", "somens", []string{"somesvc"}, "",
			`sum(service_proxy_packets{kube_namespace="somens",kube_service="somesvc"}) by (kube_service)`},
		{"namespaced metrics seconds counter", schema.GroupResource{Group: "extensions", Resource: "deployment"}, "work_queue_wait", "somens", []string{"somedep"}, "",
			`sum(rate(work_queue_wait_seconds_total{kube_namespace="somens",kube_deployment="somedep"}[1m])) by (kube_deployment)`},
		{"root scoped metrics gauge", schema.GroupResource{Resource: "node"}, "node_gigawatts", "", []string{"somenode"}, "",
			`sum(node_gigawatts{kube_node="somenode"}) by (kube_node)`},
		{"root scoped metrics counter", schema.GroupResource{Resource: "persistentvolume"}, "volume_claims", "", []string{"somepv"}, "",
			`sum(rate(volume_claims_total{kube_persistentvolume="somepv"}[1m])) by (kube_persistentvolume)`},
		{"root scoped metrics seconds counter", schema.GroupResource{Resource: "node"}, "node_fan", "", []string{"somenode"}, "",
			`sum(rate(node_fan_seconds_total{kube_node="somenode"}[1m])) by (kube_node)`},
	}
	for _, tc := range tests {
		t.Run(tc.title, func(t *testing.T) {
			t.Parallel()
			r, err := res.Resolve(tc.gr)
			if err != nil {
				t.Fatal(err)
			}
			e, ok := d.Custom[CustomKey{GR: r.GR, Metric: tc.metric}]
			if !ok {
				t.Fatalf("metric %s of %s not discovered", tc.metric, r.GR)
			}
			got, err := e.Rule.Query(e.Series, r.GR, tc.namespace, mustSelector(t, tc.selector), tc.names...)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("query\n got %s\nwant %s", got, tc.want)
			}
		})
	}

	// series_registry_test.go "should list all metrics"
	want := []provider.CustomMetricInfo{
		{GroupResource: schema.GroupResource{Resource: "pods"}, Namespaced: true, Metric: "some_count"},
		{GroupResource: schema.GroupResource{Resource: "namespaces"}, Namespaced: false, Metric: "some_count"},
		{GroupResource: schema.GroupResource{Resource: "pods"}, Namespaced: true, Metric: "some_time"},
		{GroupResource: schema.GroupResource{Resource: "namespaces"}, Namespaced: false, Metric: "some_time"},
		{GroupResource: schema.GroupResource{Resource: "pods"}, Namespaced: true, Metric: "some_usage"},
		{GroupResource: schema.GroupResource{Resource: "namespaces"}, Namespaced: false, Metric: "some_usage"},
		{GroupResource: schema.GroupResource{Resource: "services"}, Namespaced: true, Metric: "ingress_hits"},
		{GroupResource: schema.GroupResource{Group: "extensions", Resource: "ingresses"}, Namespaced: true, Metric: "ingress_hits"},
		{GroupResource: schema.GroupResource{Resource: "pods"}, Namespaced: true, Metric: "ingress_hits"},
		{GroupResource: schema.GroupResource{Resource: "namespaces"}, Namespaced: false, Metric: "ingress_hits"},
		{GroupResource: schema.GroupResource{Resource: "services"}, Namespaced: true, Metric: "service_proxy_packets"},
		{GroupResource: schema.GroupResource{Resource: "namespaces"}, Namespaced: false, Metric: "service_proxy_packets"},
		{GroupResource: schema.GroupResource{Group: "extensions", Resource: "deployments"}, Namespaced: true, Metric: "work_queue_wait"},
		{GroupResource: schema.GroupResource{Resource: "namespaces"}, Namespaced: false, Metric: "work_queue_wait"},
		{GroupResource: schema.GroupResource{Resource: "nodes"}, Namespaced: false, Metric: "node_gigawatts"},
		{GroupResource: schema.GroupResource{Resource: "persistentvolumes"}, Namespaced: false, Metric: "volume_claims"},
		{GroupResource: schema.GroupResource{Resource: "nodes"}, Namespaced: false, Metric: "node_fan"},
	}
	if got := d.CustomList; !sameInfos(got, want) {
		t.Errorf("ListAllMetrics\n got %v\nwant %v", got, want)
	}
}

func sameInfos(a, b []provider.CustomMetricInfo) bool {
	if len(a) != len(b) {
		return false
	}
	set := map[provider.CustomMetricInfo]int{}
	for _, x := range a {
		set[x]++
	}
	for _, x := range b {
		set[x]--
	}
	for _, n := range set {
		if n != 0 {
			return false
		}
	}
	return true
}

func TestBuildTemplateFields(t *testing.T) {
	t.Parallel()
	res := naming.NewResolver(testMapper(), nil)
	conv, err := naming.NewConverter(naming.ResourceMapping{Template: "<<.Resource>>"}, res)
	if err != nil {
		t.Fatal(err)
	}
	pods := schema.GroupResource{Resource: "pods"}
	// Rows follow prometheus-adapter's pkg/naming/metrics_query_test.go
	// TestBuildSelector; its mock labels a resource by its own name, here
	// pods are labelled "pod" and namespaces "namespace" through a template.
	tests := []struct {
		name      string
		tmpl      string
		series    string
		namespace string
		extra     []string
		selector  string
		names     []string
		want      string
	}{
		{"series", `series <<.Series>>`, "foo", "", nil, "", nil, "series foo"},
		{"multiple LabelMatchers values", `<<.LabelMatchers>>`, "", "", nil, "", []string{"bar", "baz"}, `pod=~"bar|baz"`},
		{"single LabelMatchers value", `<<.LabelMatchers>>`, "", "", nil, "", []string{"bar"}, `pod="bar"`},
		{"LabelMatchers with additional metrics filter", `<<.LabelMatchers>>`, "", "", nil, "metric1=value1", []string{"bar"}, `metric1="value1",pod="bar"`},
		{"single LabelValuesByName value", `<<index .LabelValuesByName "pod">>`, "", "", nil, "", []string{"bar"}, "bar"},
		{"multiple LabelValuesByName values", `<<index .LabelValuesByName "pod">>`, "", "", nil, "", []string{"bar", "baz"}, "bar|baz"},
		{"multiple LabelValuesByName values with namespace", `<<index .LabelValuesByName "namespace">> <<index .LabelValuesByName "pod">>`, "", "default", nil, "", []string{"bar", "baz"}, "default bar|baz"},
		{"single GroupBy value", `<<.GroupBy>>`, "", "", nil, "", nil, "pod"},
		{"multiple GroupBy values", `<<.GroupBy>>`, "", "", []string{"extra", "groups"}, "", nil, "pod,extra,groups"},
		{"single GroupBySlice value", `<<.GroupBySlice>>`, "", "", nil, "", nil, "[pod]"},
		{"multiple GroupBySlice values", `<<.GroupBySlice>>`, "", "", []string{"extra", "groups"}, "", nil, "[pod extra groups]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q, err := parseQuery(tc.tmpl, conv, true)
			if err != nil {
				t.Fatal(err)
			}
			got, err := q.Build(tc.series, pods, tc.namespace, tc.extra, mustSelector(t, tc.selector), tc.names...)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestBuildExternal(t *testing.T) {
	t.Parallel()
	res := naming.NewResolver(testMapper(), nil)
	withNS, err := naming.NewConverter(naming.ResourceMapping{Overrides: map[string]naming.GroupResource{"namespace": {Resource: "namespace"}}}, res)
	if err != nil {
		t.Fatal(err)
	}
	noNS, err := naming.NewConverter(naming.ResourceMapping{}, res)
	if err != nil {
		t.Fatal(err)
	}
	// Rows follow prometheus-adapter's pkg/naming/metrics_query_test.go
	// TestBuildExternalSelector (its mock labels namespaces "namespaces").
	tests := []struct {
		name       string
		tmpl       string
		conv       *naming.Converter
		namespaced bool
		namespace  string
		selector   string
		want       string
		wantErr    bool
	}{
		{"series", `series <<.Series>>`, withNS, true, "", "", "series foo", false},
		{"GroupBy is always empty", `sum(<<.Series>>) by (<<.GroupBy>>)`, withNS, true, "", "", "sum(foo) by ()", false},
		{"GroupBySlice is always empty", `<<.GroupBySlice>>`, withNS, true, "", "", "[]", false},
		{"single LabelMatchers value", `<<.LabelMatchers>>`, withNS, true, "", "foo=bar", `foo="bar"`, false},
		{"single LabelMatchers value with namespace", `<<.LabelMatchers>>`, withNS, true, "default", "foo=bar", `foo="bar",namespace="default"`, false},
		{"multiple LabelMatchers value", `<<.LabelMatchers>>`, withNS, true, "", "foo=bar,qux in (bar,baz)", `foo="bar",qux=~"bar|baz"`, false},
		{"single LabelValuesByName value", `<<.LabelValuesByName>>`, withNS, true, "", "foo=bar", "map[foo:bar]", false},
		{"single LabelValuesByName with multiple selectors", `<<.LabelValuesByName>>`, withNS, true, "", "foo in (bar,baz)", "map[foo:bar|baz]", false},
		{"namespaced: false ignores the namespace", `<<.LabelMatchers>>`, noNS, false, "default", "foo=bar", `foo="bar"`, false},
		{"namespaced without a namespace label fails (#282)", `<<.LabelMatchers>>`, noNS, true, "default", "foo=bar", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q, err := parseQuery(tc.tmpl, tc.conv, tc.namespaced)
			if err != nil {
				t.Fatal(err)
			}
			got, err := q.BuildExternal("foo", tc.namespace, mustSelector(t, tc.selector))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSelectorOperators(t *testing.T) {
	t.Parallel()
	res := naming.NewResolver(testMapper(), nil)
	conv, _ := naming.NewConverter(naming.ResourceMapping{}, res)
	q, err := parseQuery(`<<.LabelMatchers>>`, conv, false)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		selector string
		want     string
		err      error
	}{
		{"a=b", `a="b"`, nil},
		{"a==b", `a="b"`, nil},
		{"a!=b", `a!="b"`, nil},
		{"a in (b)", `a=~"b"`, nil},
		{"a in (b,c)", `a=~"b|c"`, nil},
		{"a notin (b)", `a!~"b"`, nil},
		{"a notin (c,b)", `a!~"b|c"`, nil},
		{"a", `a!=""`, nil},
		{"!a", `a=""`, nil},
		{"a=b,c!=d", `a="b",c!="d"`, nil},
		{"a>1", "", ErrUnsupportedOperator},
		{"a<1", "", ErrUnsupportedOperator},
	}
	for _, tc := range tests {
		got, err := q.BuildExternal("s", "", mustSelector(t, tc.selector))
		if tc.err != nil {
			var se *SelectorError
			if !errors.As(err, &se) || !errors.Is(err, tc.err) {
				t.Errorf("%s: err = %v, want a SelectorError wrapping %v", tc.selector, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.selector, got, err, tc.want)
		}
	}
}

func TestNaming(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		rule   string
		series string
		want   string
		keep   bool
	}{
		{"no name: $0", `{seriesQuery: x, metricsQuery: q}`, "http_requests_total", "http_requests_total", true},
		{"one group: $1", `{seriesQuery: x, metricsQuery: q, name: {matches: "^(.*)_total$"}}`, "http_requests_total", "http_requests", true},
		{"matches filters", `{seriesQuery: x, metricsQuery: q, name: {matches: "^(.*)_total$"}}`, "http_requests", "", false},
		{"explicit as", `{seriesQuery: x, metricsQuery: q, name: {matches: "^(.*)_(.*)$", as: "${2}_per_${1}"}}`, "bytes_seconds", "seconds_per_bytes", true},
		{"isNot", `{seriesQuery: x, metricsQuery: q, seriesFilters: [{isNot: "_total$"}]}`, "a_total", "", false},
		{"is", `{seriesQuery: x, metricsQuery: q, seriesFilters: [{is: "^a"}]}`, "a_total", "a_total", true},
	}
	for _, tc := range tests {
		cfg := mustParse(t, "rules: ["+tc.rule+"]")
		set, err := Compile("", cfg, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		r := set.Custom[0]
		keep := r.Keep(tc.series)
		got, _ := r.MetricName(tc.series)
		if keep != tc.keep || (keep && got != tc.want) {
			t.Errorf("%s: keep=%v name=%q, want keep=%v name=%q", tc.name, keep, got, tc.keep, tc.want)
		}
	}
}

func TestCompileErrorsNameTheField(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cfg  string
		want string
	}{
		{`rules: [{seriesQuery: x, metricsQuery: q}, {seriesQuery: x, metricsQuery: q}, {seriesQuery: x, metricsQuery: "<<.Nope>>"}]`,
			`options.rules[2].metricsQuery: template: metrics-query:1:2: executing "metrics-query" at <.Nope>: can't evaluate field Nope`},
		{`rules: [{seriesQuery: x, metricsQuery: "<<.Series"}]`, "options.rules[0].metricsQuery: template: metrics-query:1: unclosed action"},
		{`rules: [{seriesQuery: x}]`, "options.rules[0].metricsQuery: must not be empty"},
		{`rules: [{metricsQuery: q}]`, "options.rules[0].seriesQuery: must not be empty"},
		{`externalRules: [{seriesQuery: x, metricsQuery: q, seriesFilters: [{is: a, isNot: b}]}]`, "options.externalRules[0].seriesFilters[0]: cannot have both"},
		{`rules: [{seriesQuery: x, metricsQuery: q, seriesFilters: [{}]}]`, "options.rules[0].seriesFilters[0]: must have either"},
		{`rules: [{seriesQuery: x, metricsQuery: q, name: {matches: "("}}]`, "options.rules[0].name.matches: "},
		{`rules: [{seriesQuery: x, metricsQuery: q, name: {matches: "(a)(b)"}}]`, "options.rules[0].name.as: must be set"},
		{`rules: [{seriesQuery: x, metricsQuery: q, resources: {template: "<<.Group>>"}}]`, "options.rules[0].resources.template: "},
		{`resourceRules: {cpu: {containerQuery: q, nodeQuery: "<<"}, memory: {containerQuery: q, nodeQuery: q}}`, "options.resourceRules.cpu.nodeQuery: "},
	}
	for _, tc := range tests {
		_, err := Compile("options", mustParse(t, tc.cfg), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant containing %q", tc.cfg, err, tc.want)
		}
	}
}

func TestWarnings(t *testing.T) {
	t.Parallel()
	cfg := mustParse(t, `
externalRules:
- seriesQuery: '{__name__="queue_depth"}'
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
- seriesQuery: '{__name__="queue_depth"}'
  resources: {namespaced: false}
  metricsQuery: '<<.Series>>'
- seriesQuery: '{__name__="queue_depth"}'
  resources: {overrides: {namespace: {resource: namespace}}}
  metricsQuery: '<<.Series>>'
rules:
- seriesQuery: x
  metricsQuery: q
`)
	got := Warnings("options", cfg)
	want := []string{
		"options.rules[0].resources: neither a template nor overrides",
		"options.externalRules[0].resources: namespaced (the default) but no label maps to namespaces",
		"options.externalRules[0].metricsQuery: <<.GroupBy>>",
	}
	if len(got) != len(want) {
		t.Fatalf("warnings:\n%s", strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("warning %d = %q, want prefix %q", i, got[i], want[i])
		}
	}
}

func TestDurationJSON(t *testing.T) {
	t.Parallel()
	var rr ResourceRules
	if err := yaml.Unmarshal([]byte("window: 5m"), &rr); err != nil {
		t.Fatal(err)
	}
	if rr.Window != Duration(5*60e9) {
		t.Fatalf("window = %v", rr.Window)
	}
	b, _ := yaml.Marshal(rr)
	if !strings.Contains(string(b), "window: 5m") {
		t.Fatalf("marshalled %s", b)
	}
	if err := yaml.Unmarshal([]byte("window: five"), &rr); err == nil {
		t.Fatal("bad duration accepted")
	}
}

func TestFilterable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		query string
		want  bool
	}{
		{`sum(<<.Series>>{<<.LabelMatchers>>}) by (queue)`, true},
		{`sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)`, true},
		{`histogram_quantile(0.9, sum(rate(<<.Series>>{<<.LabelMatchers>>}[1m])) by (le, queue))`, true},
		{`<<.Series>>{<<.LabelMatchers>>}`, true},
		// the selector does not change the query: nothing to filter
		{`sum(<<.Series>>) by (queue)`, false},
		{`sum(<<.Series>>{queue="<<index .LabelValuesByName "queue">>"}) by (queue)`, false},
		{`topk(3, <<.Series>>{<<.LabelMatchers>>})`, false},
		{`<<.Series>>{<<.LabelMatchers>>} / on() group_left sum(<<.Series>>{<<.LabelMatchers>>})`, false},
		{`sum(<<.Series>>{<<.LabelMatchers>>}) by (queue) or vector(0)`, false},
		{`label_replace(<<.Series>>{<<.LabelMatchers>>}, "queue", "$1", "q", "(.*)")`, false},
		{`absent(<<.Series>>{<<.LabelMatchers>>})`, false},
	} {
		if got := filterable(tc.query); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.query, got, tc.want)
		}
	}
}
