package rules

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metricscale/metricscale/providers/naming"
)

// Rule is one compiled discovery rule.
type Rule struct {
	// Field is the rule's place in the config ("rules[2]"), for messages.
	Field string
	// External tells an externalRules entry.
	External bool
	// AllowNegative is DiscoveryRule.AllowNegative: always true for a
	// custom rule, whose negative values are served.
	AllowNegative bool

	seriesQuery string
	filters     []filter
	nameRe      *regexp.Regexp
	nameAs      string
	query       *Query
}

type filter struct {
	re       *regexp.Regexp
	positive bool
}

// Set is a compiled Config.
type Set struct {
	Custom   []*Rule
	External []*Rule
	// Resource is nil without resourceRules.
	Resource *ResourceSet
}

// ResourceSet is the compiled resourceRules.
type ResourceSet struct {
	CPU, Memory *ResourceQuery
	Window      time.Duration
}

// ResourceQuery is one compiled resource rule (cpu or memory).
type ResourceQuery struct {
	Field          string
	Container      *Query
	Node           *Query
	ContainerLabel string
}

// Compile compiles cfg; field prefixes error messages ("providers[0].options").
// resolver may be nil to only validate: the compiled rules then render no
// queries.
func Compile(field string, cfg Config, resolver *naming.Resolver) (*Set, error) {
	prefix := field
	if prefix != "" {
		prefix += "."
	}
	var errs []error
	s := &Set{}
	for i, r := range cfg.Rules {
		rule, err := compileRule(fmt.Sprintf("%srules[%d]", prefix, i), r, false, resolver)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s.Custom = append(s.Custom, rule)
	}
	for i, r := range cfg.ExternalRules {
		rule, err := compileRule(fmt.Sprintf("%sexternalRules[%d]", prefix, i), r, true, resolver)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s.External = append(s.External, rule)
	}
	if rr := cfg.ResourceRules; rr != nil {
		f := prefix + "resourceRules"
		cpu, err := compileResourceRule(f+".cpu", rr.CPU, resolver)
		if err != nil {
			errs = append(errs, err)
		}
		mem, err := compileResourceRule(f+".memory", rr.Memory, resolver)
		if err != nil {
			errs = append(errs, err)
		}
		if rr.Window < 0 {
			errs = append(errs, fmt.Errorf("%s.window: must not be negative", f))
		}
		s.Resource = &ResourceSet{CPU: cpu, Memory: mem, Window: time.Duration(rr.Window)}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

func compileRule(field string, r DiscoveryRule, external bool, resolver *naming.Resolver) (*Rule, error) {
	rule := &Rule{Field: field, External: external, seriesQuery: r.SeriesQuery, AllowNegative: !external || r.AllowNegative}
	if strings.TrimSpace(r.SeriesQuery) == "" {
		return nil, fmt.Errorf("%s.seriesQuery: must not be empty", field)
	}
	if !external && r.AllowNegative {
		return nil, fmt.Errorf("%s.allowNegative: applies to externalRules only: custom metrics serve negative values already", field)
	}
	for j, f := range r.SeriesFilters {
		m, err := compileFilter(f)
		if err != nil {
			return nil, fmt.Errorf("%s.seriesFilters[%d]: %w", field, j, err)
		}
		rule.filters = append(rule.filters, m)
	}
	// A name pattern is also a filter: series it does not match are not
	// this rule's (prometheus-adapter's NamersFromConfig).
	matches := r.Name.Matches
	if matches == "" {
		matches = ".*"
	} else {
		m, err := compileFilter(RegexFilter{Is: r.Name.Matches})
		if err != nil {
			return nil, fmt.Errorf("%s.name.matches: %w", field, err)
		}
		rule.filters = append(rule.filters, m)
	}
	re, err := regexp.Compile(matches)
	if err != nil {
		return nil, fmt.Errorf("%s.name.matches: %w", field, err)
	}
	rule.nameRe, rule.nameAs = re, r.Name.As
	if rule.nameAs == "" {
		switch re.NumSubexp() {
		case 0:
			rule.nameAs = "$0"
		case 1:
			rule.nameAs = "$1"
		default:
			return nil, fmt.Errorf("%s.name.as: must be set: %q has %d capture groups", field, matches, re.NumSubexp())
		}
	}
	conv, err := naming.NewConverter(r.Resources, resolver)
	if err != nil {
		return nil, fmt.Errorf("%s.resources.%w", field, err)
	}
	q, err := parseQuery(r.MetricsQuery, conv, r.Resources.IsNamespaced())
	if err != nil {
		return nil, fmt.Errorf("%s.metricsQuery: %w", field, err)
	}
	rule.query = q
	return rule, nil
}

func compileFilter(f RegexFilter) (filter, error) {
	switch {
	case f.Is != "" && f.IsNot != "":
		return filter{}, fmt.Errorf("cannot have both an `is` (%q) and `isNot` (%q) expression in a single filter", f.Is, f.IsNot)
	case f.Is == "" && f.IsNot == "":
		return filter{}, errors.New("must have either an `is` or `isNot` expression in a filter")
	}
	expr, positive := f.Is, true
	if expr == "" {
		expr, positive = f.IsNot, false
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return filter{}, fmt.Errorf("unable to compile series filter %q: %w", expr, err)
	}
	return filter{re: re, positive: positive}, nil
}

func compileResourceRule(field string, r ResourceRule, resolver *naming.Resolver) (*ResourceQuery, error) {
	conv, err := naming.NewConverter(r.Resources, resolver)
	if err != nil {
		return nil, fmt.Errorf("%s.resources.%w", field, err)
	}
	cq, err := parseQuery(r.ContainerQuery, conv, true)
	if err != nil {
		return nil, fmt.Errorf("%s.containerQuery: %w", field, err)
	}
	nq, err := parseQuery(r.NodeQuery, conv, true)
	if err != nil {
		return nil, fmt.Errorf("%s.nodeQuery: %w", field, err)
	}
	return &ResourceQuery{Field: field, Container: cq, Node: nq, ContainerLabel: r.ContainerLabel}, nil
}

// SeriesQuery is the rule's series selector.
func (r *Rule) SeriesQuery() string { return r.seriesQuery }

// Converter is the rule's label mapping.
func (r *Rule) Converter() *naming.Converter { return r.query.conv }

// Namespaced tells whether an external rule's queries are scoped to the
// request's namespace.
func (r *Rule) Namespaced() bool { return r.query.namespaced }

// Keep tells whether a series of this rule's seriesQuery passes its filters
// (seriesFilters and name.matches).
func (r *Rule) Keep(seriesName string) bool {
	for _, f := range r.filters {
		if f.re.MatchString(seriesName) != f.positive {
			return false
		}
	}
	return true
}

// MetricName is the API name of a series, or false if name.matches does not
// match it.
func (r *Rule) MetricName(seriesName string) (string, bool) {
	m := r.nameRe.FindStringSubmatchIndex(seriesName)
	if m == nil {
		return "", false
	}
	return string(r.nameRe.ExpandString(nil, r.nameAs, seriesName, m)), true
}

// Query renders the rule's query for objects of gr (canonical) named names
// in namespace ("" for cluster-scoped resources).
func (r *Rule) Query(series string, gr schema.GroupResource, namespace string, metricSelector labels.Selector, names ...string) (string, error) {
	return r.query.Build(series, gr, namespace, nil, metricSelector, names...)
}

// QueryAll renders the rule's query for every object of gr in namespace
// (see Query.BuildAll).
func (r *Rule) QueryAll(series string, gr schema.GroupResource, namespace string, metricSelector labels.Selector) (string, error) {
	return r.query.BuildAll(series, gr, namespace, nil, metricSelector)
}

// Filterable tells whether a label selector may be applied to the result of
// the rule's query instead of inside it (see Query.Filterable).
func (r *Rule) Filterable() bool { return r.query.filterable }

// ExternalQuery renders an external rule's query.
func (r *Rule) ExternalQuery(series, namespace string, metricSelector labels.Selector) (string, error) {
	return r.query.BuildExternal(series, namespace, metricSelector)
}

// Warnings returns what is valid in cfg but will not work as its author
// likely expects, each naming its field; for `adapter check-config`.
func Warnings(field string, cfg Config) []string {
	prefix := field
	if prefix != "" {
		prefix += "."
	}
	var out []string
	for i, r := range cfg.Rules {
		f := fmt.Sprintf("%srules[%d]", prefix, i)
		if r.Resources.Template == "" && len(r.Resources.Overrides) == 0 {
			out = append(out, f+".resources: neither a template nor overrides: no series of this rule names an object, so it serves no metric")
		}
		if r.Resources.Namespaced != nil {
			out = append(out, f+".resources.namespaced: only external rules use it; ignored")
		}
	}
	for i, r := range cfg.ExternalRules {
		f := fmt.Sprintf("%sexternalRules[%d]", prefix, i)
		conv, err := naming.NewConverter(r.Resources, nil)
		if err == nil && r.Resources.IsNamespaced() && !conv.MayMapNamespaces() {
			out = append(out, f+".resources: namespaced (the default) but no label maps to namespaces: every query of this rule fails "+
				"(prometheus-adapter#282); add overrides: {namespace: {resource: namespace}} or set namespaced: false")
		}
		if strings.Contains(r.MetricsQuery, ".GroupBy") {
			out = append(out, f+".metricsQuery: <<.GroupBy>> and <<.GroupBySlice>> are always empty in external rules (\"by ()\")")
		}
	}
	if rr := cfg.ResourceRules; rr != nil && rr.Window == 0 {
		out = append(out, prefix+"resourceRules.window: not set: metrics.k8s.io reports a 0s window")
	}
	return out
}
