package ondemand

import (
	"context"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/metricscale/metricscale/providers/options"
)

// DefaultCacheTTL is how long a reading answers queries when neither the
// provider's nor the metric's cacheTTL is set: short against an HPA's 15s
// sync, long enough that a thousand autoscalers share one broker call.
const DefaultCacheTTL = 2 * time.Second

// MetricOptions are the fields every backend's metric entry has; backends
// embed it (json ",inline" is implied by embedding).
type MetricOptions struct {
	// Name is the external metric name.
	Name string `json:"name"`
	// Namespace scopes the metric's series to one namespace.
	Namespace string `json:"namespace,omitempty"`
	// Labels are added to every series.
	Labels map[string]string `json:"labels,omitempty"`
	// CacheTTL overrides the provider's cacheTTL for this metric.
	CacheTTL *metav1.Duration `json:"cacheTTL,omitempty"`
}

// Validate checks the common fields; field is the entry's path
// ("providers[0].options.metrics[2]").
func (m MetricOptions) Validate(field string, errs *options.Errors) {
	if m.Name == "" {
		errs.Add(field+".name", "required")
	} else if msgs := validation.IsDNS1123Subdomain(strings.ReplaceAll(strings.ToLower(m.Name), "_", "-")); len(msgs) > 0 {
		errs.Add(field+".name", "%q is not a valid metric name: %s", m.Name, strings.Join(msgs, "; "))
	}
	if m.Namespace != "" {
		if msgs := validation.IsDNS1123Label(m.Namespace); len(msgs) > 0 {
			errs.Add(field+".namespace", "%q: %s", m.Namespace, strings.Join(msgs, "; "))
		}
	}
	for k, v := range m.Labels {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			errs.Add(field+".labels", "label name %q: %s", k, strings.Join(msgs, "; "))
		}
		if k == NamespaceLabel {
			errs.Add(field+".labels", "use namespace, not a %q label", NamespaceLabel)
		}
		if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
			errs.Add(field+".labels", "label %s value %q: %s", k, v, strings.Join(msgs, "; "))
		}
	}
	if m.CacheTTL != nil && m.CacheTTL.Duration < 0 {
		errs.Add(field+".cacheTTL", "must not be negative, got %s", m.CacheTTL.Duration)
	}
}

// Metric builds the Metric these options describe, reading with read.
func (m MetricOptions) Metric(read func(ctx context.Context) ([]Series, error)) Metric {
	out := Metric{Name: m.Name, Namespace: m.Namespace, Labels: m.Labels, Read: read}
	if m.CacheTTL != nil {
		ttl := m.CacheTTL.Duration
		out.CacheTTL = &ttl
	}
	return out
}
