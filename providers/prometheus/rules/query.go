package rules

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/template"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/metricscale/metricscale/providers/naming"
)

// NamespacesGR is the namespaces resource, whose label scopes queries.
var NamespacesGR = schema.GroupResource{Resource: "namespaces"}

// SelectorError says a metric label selector cannot be expressed in PromQL;
// it is the client's mistake (400), never the backend's.
type SelectorError struct {
	Selector string
	Err      error
}

func (e *SelectorError) Error() string {
	return fmt.Sprintf("metric selector %q: %v", e.Selector, e.Err)
}

func (e *SelectorError) Unwrap() error { return e.Err }

// The selector errors, as prometheus-adapter names them.
var (
	ErrUnsupportedOperator = errors.New("operator not supported in PromQL (only =, ==, !=, in, notin, exists, !exists)")
	ErrMalformedQuery      = errors.New("the operator needs a value")
	ErrUnsupportedValues   = errors.New("exists and !exists take no value")
	ErrLabelNotSpecified   = errors.New("label name not specified")
)

// templateArgs are what a metricsQuery template sees; the names are
// prometheus-adapter's.
type templateArgs struct {
	Series            string
	LabelMatchers     string
	LabelValuesByName map[string]string
	GroupBy           string
	GroupBySlice      []string
}

// Query is one compiled metricsQuery (or containerQuery/nodeQuery) template
// with the label mapping it renders matchers through.
type Query struct {
	tmpl *template.Template
	conv *naming.Converter
	// namespaced external queries are scoped to the request's namespace.
	namespaced bool
	// filterable: a selector can be applied to the whole query's result
	// instead of inside the query (see Filterable).
	filterable bool
}

func parseQuery(text string, conv *naming.Converter, namespaced bool) (*Query, error) {
	if strings.TrimSpace(text) == "" {
		return nil, errors.New("must not be empty")
	}
	tmpl, err := template.New("metrics-query").Delims("<<", ">>").Parse(text)
	if err != nil {
		return nil, err
	}
	// Execute once with representative arguments, so a template that can
	// never render (<<.Foo>>, a bad function call) fails validation, not
	// every query.
	var buf bytes.Buffer
	err = tmpl.Execute(&buf, templateArgs{
		Series: "metric", LabelMatchers: `namespace="default",pod="p"`,
		LabelValuesByName: map[string]string{"namespace": "default", "pod": "p"},
		GroupBy:           "pod", GroupBySlice: []string{"pod"},
	})
	if err != nil {
		return nil, err
	}
	return &Query{tmpl: tmpl, conv: conv, namespaced: namespaced, filterable: filterable(text)}, nil
}

// crossSeries are the PromQL words whose result for one series depends on
// other series (or that rewrite labels): with any of them, selecting after
// the query is not the same as selecting inside it.
var crossSeries = map[string]bool{
	"topk": true, "bottomk": true, "quantile": true, "limitk": true, "limit_ratio": true,
	"count_values": true, "absent": true, "absent_over_time": true, "scalar": true, "vector": true,
	"sort": true, "sort_desc": true, "sort_by_label": true, "sort_by_label_desc": true,
	"label_replace": true, "label_join": true,
	"on": true, "ignoring": true, "group_left": true, "group_right": true,
	"and": true, "or": true, "unless": true,
}

// filterable tells whether a metricsQuery keeps each result series a
// function of the input series with the same labels, so that a label
// selector may be applied to the result of the query without matchers (the
// whole metric) rather than as matchers: it uses <<.LabelMatchers>>, not
// <<.LabelValuesByName>>, and none of the crossSeries words. Whether the
// selected labels survive its aggregation is checked on each result.
// Conservative: a word inside a label value also counts.
func filterable(text string) bool {
	if !strings.Contains(text, ".LabelMatchers") || strings.Contains(text, ".LabelValuesByName") {
		return false
	}
	word := func(r rune) bool {
		return !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}
	for _, w := range strings.FieldsFunc(text, word) {
		if crossSeries[strings.ToLower(w)] {
			return false
		}
	}
	return true
}

// Filterable tells whether a selector may be applied to this query's
// result (see filterable).
func (q *Query) Filterable() bool { return q.filterable }

// Converter is the query's label mapping.
func (q *Query) Converter() *naming.Converter { return q.conv }

// Build renders the query for the objects names of resource gr (canonical)
// in namespace ("" for cluster-scoped resources), as prometheus-adapter's
// metricsQuery.Build: selector matchers, then the namespace matcher, then the
// resource matcher (=~ "a|b" for several names); grouped by the resource
// label and extraGroupBy.
func (q *Query) Build(series string, gr schema.GroupResource, namespace string, extraGroupBy []string, metricSelector labels.Selector, names ...string) (string, error) {
	return q.build(series, gr, namespace, extraGroupBy, metricSelector, names, false)
}

func (q *Query) build(series string, gr schema.GroupResource, namespace string, extraGroupBy []string, metricSelector labels.Selector, names []string, all bool) (string, error) {
	parts, err := selectorParts(metricSelector)
	if err != nil {
		return "", err
	}
	if namespace != "" {
		nsLabel, err := q.conv.LabelForResource(NamespacesGR)
		if err != nil {
			return "", err
		}
		parts = append(parts, part{label: nsLabel, values: []string{namespace}, op: selection.Equals})
	}
	exprs, byName, err := renderParts(parts, metricSelector)
	if err != nil {
		return "", err
	}
	resLabel, err := q.conv.LabelForResource(gr)
	if err != nil {
		return "", err
	}
	target := strings.Join(names, "|")
	switch {
	case all:
		exprs = append(exprs, labelNeq(resLabel, ""))
	case len(names) > 1:
		exprs = append(exprs, labelMatches(resLabel, target))
	default:
		exprs = append(exprs, labelEq(resLabel, target))
	}
	byName[resLabel] = target
	groupBy := make([]string, 0, len(extraGroupBy)+1)
	groupBy = append(groupBy, resLabel)
	groupBy = append(groupBy, extraGroupBy...)
	return q.execute(templateArgs{
		Series:            series,
		LabelMatchers:     strings.Join(exprs, ","),
		LabelValuesByName: byName,
		GroupBy:           strings.Join(groupBy, ","),
		GroupBySlice:      groupBy,
	})
}

// BuildAll renders the query for every object of gr in namespace: the
// resource matcher is label!="" instead of the names, so one answer serves
// every selection of objects, each picked from it by name.
func (q *Query) BuildAll(series string, gr schema.GroupResource, namespace string, extraGroupBy []string, metricSelector labels.Selector) (string, error) {
	return q.build(series, gr, namespace, extraGroupBy, metricSelector, nil, true)
}

// BuildExternal renders an external rule's query: selector matchers, then
// the namespace matcher when the rule is namespaced and namespace is set.
// GroupBy is always empty and GroupBySlice always [], as in
// prometheus-adapter, so "by (<<.GroupBy>>)" renders "by ()".
func (q *Query) BuildExternal(series, namespace string, metricSelector labels.Selector) (string, error) {
	parts, err := selectorParts(metricSelector)
	if err != nil {
		return "", err
	}
	if q.namespaced && namespace != "" {
		nsLabel, err := q.conv.LabelForResource(NamespacesGR)
		if err != nil {
			return "", fmt.Errorf("the rule is namespaced (resources.namespaced defaults to true) but %w", err)
		}
		parts = append(parts, part{label: nsLabel, values: []string{namespace}, op: selection.Equals})
	}
	exprs, byName, err := renderParts(parts, metricSelector)
	if err != nil {
		return "", err
	}
	return q.execute(templateArgs{
		Series:            series,
		LabelMatchers:     strings.Join(exprs, ","),
		LabelValuesByName: byName,
		GroupBy:           "",
		GroupBySlice:      []string{},
	})
}

func (q *Query) execute(args templateArgs) (string, error) {
	var buf bytes.Buffer
	if err := q.tmpl.Execute(&buf, args); err != nil {
		return "", err
	}
	if buf.Len() == 0 {
		return "", errors.New("empty query produced by metrics query template")
	}
	return buf.String(), nil
}

type part struct {
	label  string
	values []string
	op     selection.Operator
}

// CheckSelector returns the *SelectorError rendering sel would return,
// without rendering anything.
func CheckSelector(sel labels.Selector) error {
	parts, err := selectorParts(sel)
	if err != nil {
		return err
	}
	for _, p := range parts {
		if _, err := renderPart(p); err != nil {
			return &SelectorError{Selector: sel.String(), Err: err}
		}
	}
	return nil
}

func selectorParts(sel labels.Selector) ([]part, error) {
	if sel == nil {
		return nil, nil
	}
	reqs, selectable := sel.Requirements()
	if !selectable {
		// labels.Nothing(): no PromQL selects nothing
		return nil, &SelectorError{Selector: sel.String(), Err: errors.New("selects nothing")}
	}
	parts := make([]part, 0, len(reqs))
	for _, r := range reqs {
		parts = append(parts, part{label: r.Key(), values: r.Values().List(), op: r.Operator()})
	}
	return parts, nil
}

// renderParts turns requirements into PromQL matchers the way
// prometheus-adapter's processQueryParts does; anything it cannot map
// exactly is refused rather than approximated.
func renderParts(parts []part, sel labels.Selector) ([]string, map[string]string, error) {
	exprs := make([]string, 0, len(parts)+1)
	byName := make(map[string]string, len(parts)+1)
	for _, p := range parts {
		expr, err := renderPart(p)
		if err != nil {
			s := ""
			if sel != nil {
				s = sel.String()
			}
			return nil, nil, &SelectorError{Selector: s, Err: err}
		}
		exprs = append(exprs, expr)
		byName[p.label] = strings.Join(p.values, "|")
	}
	return exprs, byName, nil
}

func renderPart(p part) (string, error) {
	if p.label == "" {
		return "", ErrLabelNotSpecified
	}
	switch p.op {
	case selection.GreaterThan, selection.LessThan:
		return "", ErrUnsupportedOperator
	}
	switch len(p.values) {
	case 0:
		switch p.op {
		case selection.Exists:
			return labelNeq(p.label, ""), nil
		case selection.DoesNotExist:
			return labelEq(p.label, ""), nil
		case selection.Equals, selection.DoubleEquals, selection.NotEquals, selection.In, selection.NotIn:
			return "", ErrMalformedQuery
		}
	case 1:
		v := p.values[0]
		switch p.op {
		case selection.Equals, selection.DoubleEquals:
			return labelEq(p.label, v), nil
		case selection.NotEquals:
			return labelNeq(p.label, v), nil
		case selection.In:
			return labelMatches(p.label, v), nil
		case selection.NotIn:
			return labelNotMatches(p.label, v), nil
		case selection.Exists, selection.DoesNotExist:
			return "", ErrUnsupportedValues
		}
	default:
		v := strings.Join(p.values, "|")
		switch p.op {
		case selection.Equals, selection.DoubleEquals, selection.In:
			return labelMatches(p.label, v), nil
		case selection.NotEquals, selection.NotIn:
			return labelNotMatches(p.label, v), nil
		case selection.Exists, selection.DoesNotExist:
			return "", ErrUnsupportedValues
		}
	}
	return "", ErrUnsupportedOperator
}

// The matchers quote values with Go's escaping, which PromQL string literals
// accept, as prometheus-adapter's client helpers do.
func labelEq(l, v string) string         { return l + "=" + strconv.Quote(v) }
func labelNeq(l, v string) string        { return l + "!=" + strconv.Quote(v) }
func labelMatches(l, v string) string    { return l + "=~" + strconv.Quote(v) }
func labelNotMatches(l, v string) string { return l + "!~" + strconv.Quote(v) }
