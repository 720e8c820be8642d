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

// FeedOptions are the change feed fields every polled backend's options
// have (backends embed it): how the metrics the feed's subscribers read are
// polled (see Feed).
type FeedOptions struct {
	// FeedPollInterval is how often a metric the change feed's subscribers
	// read is read in the background (default 1s; 0s: never, the
	// autoscalers on this provider react at their sync period).
	FeedPollInterval *metav1.Duration `json:"feedPollInterval,omitempty"`
	// FeedMaxPolledMetrics bounds the metrics polled at once (default
	// 1000); metrics queried beyond it are read on query only.
	FeedMaxPolledMetrics int `json:"feedMaxPolledMetrics,omitempty"`
}

// Validate checks the feed fields; field is the options' path.
func (f FeedOptions) Validate(field string, errs *options.Errors) {
	if f.FeedPollInterval != nil && f.FeedPollInterval.Duration < 0 {
		errs.Add(field+".feedPollInterval", "must not be negative, got %s", f.FeedPollInterval.Duration)
	}
	if f.FeedMaxPolledMetrics < 0 {
		errs.Add(field+".feedMaxPolledMetrics", "must not be negative, got %d", f.FeedMaxPolledMetrics)
	}
}

// Feed is the Feed these options describe.
func (f FeedOptions) Feed() Feed {
	out := Feed{MaxPolled: f.FeedMaxPolledMetrics}
	if f.FeedPollInterval != nil {
		out.Interval = f.FeedPollInterval.Duration
		if out.Interval == 0 {
			out.Interval = -1 // 0s in the config: off
		}
	}
	return out
}
