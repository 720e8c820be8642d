// Package rules is prometheus-adapter's rules engine, without I/O: the rules
// file format (rules, externalRules, resourceRules), series filtering and
// naming, and the PromQL each rule renders for a request. Its semantics are
// prometheus-adapter v0.12's (pkg/naming, pkg/config), so a rules file keeps
// its metric names and queries.
package rules

import (
	"encoding/json"
	"fmt"
	"time"

	pmodel "github.com/prometheus/common/model"

	"github.com/metricscale/metricscale/providers/naming"
)

// Config is a prometheus-adapter rules file (its --config).
type Config struct {
	// Rules become custom metrics (custom.metrics.k8s.io).
	Rules []DiscoveryRule `json:"rules,omitempty"`
	// ExternalRules become external metrics (external.metrics.k8s.io).
	ExternalRules []DiscoveryRule `json:"externalRules,omitempty"`
	// ResourceRules serve metrics.k8s.io (CPU and memory).
	ResourceRules *ResourceRules `json:"resourceRules,omitempty"`
}

// DiscoveryRule is one entry of rules or externalRules.
type DiscoveryRule struct {
	// SeriesQuery selects the series this rule considers (a series
	// selector, sent as match[] to /api/v1/series).
	SeriesQuery string `json:"seriesQuery"`
	// SeriesFilters further filter the series by name.
	SeriesFilters []RegexFilter `json:"seriesFilters,omitempty"`
	// Resources maps labels to Kubernetes resources.
	Resources naming.ResourceMapping `json:"resources"`
	// Name turns a series name into the metric name.
	Name NameMapping `json:"name"`
	// MetricsQuery is the PromQL template (<< >> delimiters) over .Series,
	// .LabelMatchers, .LabelValuesByName, .GroupBy and .GroupBySlice.
	MetricsQuery string `json:"metricsQuery,omitempty"`
	// AllowNegative (externalRules only; a metricscale addition that
	// prometheus-adapter does not know) serves the rule's negative values.
	// Without it an external value below zero is refused with a 503: a
	// queue length or a lag below zero is a bug or a wrapped sum, and read
	// by an HPA it would mean "no load". Custom metrics (rules) serve
	// negative values as prometheus-adapter does (a deriv() is signed).
	AllowNegative bool `json:"allowNegative,omitempty"`
}

// RegexFilter keeps the series whose name matches Is, or does not match
// IsNot; exactly one is set.
type RegexFilter struct {
	Is    string `json:"is,omitempty"`
	IsNot string `json:"isNot,omitempty"`
}

// NameMapping names a metric after its series: Matches (default ".*") is
// matched against the series name and As (default "$0", or "$1" with one
// capture group) is expanded with its captures.
type NameMapping struct {
	Matches string `json:"matches,omitempty"`
	As      string `json:"as,omitempty"`
}

// ResourceRules are the metrics.k8s.io queries.
type ResourceRules struct {
	CPU    ResourceRule `json:"cpu"`
	Memory ResourceRule `json:"memory"`
	// Window is the window reported with each value; it should match the
	// queries' rate() range.
	Window Duration `json:"window"`
}

// ResourceRule is how to query one resource (CPU or memory).
type ResourceRule struct {
	// ContainerQuery renders the per-container usage of pods; it is grouped
	// by the pod label and ContainerLabel.
	ContainerQuery string `json:"containerQuery"`
	// NodeQuery renders the usage of nodes.
	NodeQuery string `json:"nodeQuery"`
	// Resources maps labels to pods, namespaces and nodes.
	Resources naming.ResourceMapping `json:"resources"`
	// ContainerLabel is the label holding the container name.
	ContainerLabel string `json:"containerLabel"`
}

// Duration is a Prometheus duration ("30s", "5m", "1h30m", "1d"), as the
// rules file writes resourceRules.window.
type Duration time.Duration

// UnmarshalJSON accepts a Prometheus duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"5m\": %w", err)
	}
	if s == "" {
		*d = 0
		return nil
	}
	pd, err := pmodel.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(pd)
	return nil
}

// MarshalJSON writes a Prometheus duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(pmodel.Duration(d).String())
}
