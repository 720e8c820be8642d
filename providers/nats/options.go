package nats

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/metricscale/metricscale/providers/ondemand"
	"github.com/metricscale/metricscale/providers/options"
)

// Options are a nats provider's options (providers[].options).
type Options struct {
	// Servers are the NATS URLs (nats://, tls://, ws://, wss://); the client
	// connects to one and fails over to the others.
	Servers []string `json:"servers"`
	// User and Password authenticate with a user name and password.
	User     *options.Secret `json:"user,omitempty"`
	Password *options.Secret `json:"password,omitempty"`
	// Token authenticates with a token.
	Token *options.Secret `json:"token,omitempty"`
	// CredsFile is a .creds file (user JWT and NKey seed), e.g. a mounted
	// Secret.
	CredsFile string `json:"credsFile,omitempty"`
	// TLS configures TLS to the servers.
	TLS *options.TLS `json:"tls,omitempty"`
	// Domain is the JetStream domain (a leaf node's hub, say): requests go
	// to $JS.<domain>.API.
	Domain string `json:"domain,omitempty"`
	// CacheTTL is how long a reading answers queries (default 2s).
	CacheTTL *metav1.Duration `json:"cacheTTL,omitempty"`
	// Metrics are the external metrics served.
	Metrics []MetricOptions `json:"metrics"`
	// FeedPollInterval and FeedMaxPolledMetrics: how the metrics the
	// change feed's subscribers read are polled.
	ondemand.FeedOptions
}

// What a metric measures (MetricOptions.Value).
const (
	// ValueBacklog is pending + ackPending: every message the consumer has
	// not finished (the default).
	ValueBacklog = "backlog"
	// ValuePending is the consumer's num_pending: messages matching its
	// filter not yet delivered to it.
	ValuePending = "pending"
	// ValueAckPending is the consumer's num_ack_pending: messages delivered
	// and not yet acknowledged.
	ValueAckPending = "ackPending"
	// ValueMessages is the stream's message count (state.messages).
	ValueMessages = "messages"
)

var values = []string{ValueBacklog, ValuePending, ValueAckPending, ValueMessages}

// The labels every series carries.
const (
	StreamLabel   = "stream"
	ConsumerLabel = "consumer"
)

// MetricOptions configure one external metric.
type MetricOptions struct {
	ondemand.MetricOptions
	// Value is what the metric measures: backlog (default), pending,
	// ackPending, messages.
	Value string `json:"value,omitempty"`
	// Stream and Consumer name the one series of a metric; Series lists
	// several instead (each with its own labels and namespace).
	Stream   string         `json:"stream,omitempty"`
	Consumer string         `json:"consumer,omitempty"`
	Series   []SeriesOption `json:"series,omitempty"`
}

// SeriesOption is one series of a metric: one consumer (or one stream for
// messages).
type SeriesOption struct {
	Stream   string `json:"stream"`
	Consumer string `json:"consumer,omitempty"`
	// Namespace scopes this series to one namespace.
	Namespace string `json:"namespace,omitempty"`
	// Labels are added to this series.
	Labels map[string]string `json:"labels,omitempty"`
}

// value is the metric's value kind, with the default applied.
func (m *MetricOptions) value() string {
	if m.Value == "" {
		return ValueBacklog
	}
	return m.Value
}

// series is the metric's series, with the shorthand expanded.
func (m *MetricOptions) series() []SeriesOption {
	if len(m.Series) > 0 {
		return m.Series
	}
	return []SeriesOption{{Stream: m.Stream, Consumer: m.Consumer}}
}

// settings are Options validated; defaults are applied where used.
type settings struct{ Options }

// decodeOptions decodes raw strictly and validates it; every error names
// its field below field.
func decodeOptions(field string, raw json.RawMessage) (*settings, error) {
	var o Options
	if err := options.Decode(field, raw, &o); err != nil {
		return nil, err
	}
	if err := o.validate(field); err != nil {
		return nil, err
	}
	return &settings{Options: o}, nil
}

func (o *Options) validate(field string) error {
	var errs options.Errors
	if len(o.Servers) == 0 {
		errs.Add(field+".servers", "required: at least one nats:// URL")
	}
	for i, s := range o.Servers {
		validateServer(fmt.Sprintf("%s.servers[%d]", field, i), s, &errs)
	}
	o.User.Validate(field+".user", &errs)
	o.Password.Validate(field+".password", &errs)
	o.Token.Validate(field+".token", &errs)
	o.TLS.Validate(field+".tls", &errs)
	o.FeedOptions.Validate(field, &errs)
	switch {
	case o.User.IsSet() != o.Password.IsSet():
		errs.Add(field+".password", "user and password go together")
	case o.Token.IsSet() && o.User.IsSet():
		errs.Add(field+".token", "set user/password or token, not both")
	}
	options.CheckFile(field+".credsFile", o.CredsFile, &errs)
	if o.CredsFile != "" && (o.User.IsSet() || o.Token.IsSet()) {
		errs.Add(field+".credsFile", "set credsFile, user/password or token, only one of them")
	}
	if o.Domain != "" && !validToken(o.Domain) {
		errs.Add(field+".domain", "%q is not a valid JetStream domain (no spaces, '.', '*' or '>')", o.Domain)
	}
	if o.CacheTTL != nil && o.CacheTTL.Duration < 0 {
		errs.Add(field+".cacheTTL", "must not be negative, got %s", o.CacheTTL.Duration)
	}
	if len(o.Metrics) == 0 {
		errs.Add(field+".metrics", "required: at least one metric")
	}
	names := map[string]int{}
	for i := range o.Metrics {
		mf := fmt.Sprintf("%s.metrics[%d]", field, i)
		m := &o.Metrics[i]
		if j, dup := names[m.Name]; dup && m.Name != "" {
			errs.Add(mf+".name", "metric %q is already configured in metrics[%d]", m.Name, j)
		} else {
			names[m.Name] = i
		}
		m.validate(mf, &errs)
	}
	return errs.Err()
}

func validateServer(field, s string, errs *options.Errors) {
	u, err := url.Parse(s)
	if err != nil {
		errs.Add(field, "not a URL: %v", err)
		return
	}
	switch u.Scheme {
	case "nats", "tls", "ws", "wss":
	default:
		errs.Add(field, "scheme %q: want nats, tls, ws or wss", u.Scheme)
		return
	}
	if u.Hostname() == "" {
		errs.Add(field, "no host in %q", u.Redacted())
	}
	if u.User != nil {
		// the client would echo the URL in its errors
		errs.Add(field, "credentials do not go in the URL: use user/password, token or credsFile")
	}
}

func (m *MetricOptions) validate(field string, errs *options.Errors) {
	m.MetricOptions.Validate(field, errs)
	for _, k := range []string{StreamLabel, ConsumerLabel} {
		if _, ok := m.Labels[k]; ok {
			errs.Add(field+".labels", "label %q is set from the series itself", k)
		}
	}
	v := m.value()
	known := false
	for _, w := range values {
		known = known || v == w
	}
	if !known {
		errs.Add(field+".value", "%q: want one of %s", m.Value, strings.Join(values, ", "))
		return
	}
	if len(m.Series) > 0 {
		if m.Stream != "" || m.Consumer != "" {
			errs.Add(field+".series", "set stream/consumer or series, not both")
			return
		}
		seen := map[string]int{}
		for i, s := range m.Series {
			sf := fmt.Sprintf("%s.series[%d]", field, i)
			validateSeries(sf, v, s, errs)
			if m.Namespace != "" && s.Namespace != "" {
				errs.Add(sf+".namespace", "the metric already sets namespace %q", m.Namespace)
			}
			key := s.Stream + "/" + s.Consumer
			if j, dup := seen[key]; dup {
				errs.Add(sf, "same stream and consumer as series[%d]", j)
			}
			seen[key] = i
		}
		return
	}
	validateSeries(field, v, SeriesOption{Stream: m.Stream, Consumer: m.Consumer}, errs)
}

func validateSeries(field, value string, s SeriesOption, errs *options.Errors) {
	switch {
	case s.Stream == "":
		errs.Add(field+".stream", "required")
	case !validName(s.Stream):
		errs.Add(field+".stream", "%q is not a valid stream name (no spaces, '.', '*', '>', '/' or '\\')", s.Stream)
	}
	switch {
	case value == ValueMessages && s.Consumer != "":
		errs.Add(field+".consumer", "value %s counts the stream's messages: leave consumer out", ValueMessages)
	case value != ValueMessages && s.Consumer == "":
		errs.Add(field+".consumer", "required for value %s", value)
	case s.Consumer != "" && !validName(s.Consumer):
		errs.Add(field+".consumer", "%q is not a valid consumer name (no spaces, '.', '*', '>', '/' or '\\')", s.Consumer)
	}
	if s.Namespace != "" {
		if msgs := validation.IsDNS1123Label(s.Namespace); len(msgs) > 0 {
			errs.Add(field+".namespace", "%q: %s", s.Namespace, strings.Join(msgs, "; "))
		}
	}
	for k, v := range s.Labels {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			errs.Add(field+".labels", "label name %q: %s", k, strings.Join(msgs, "; "))
		}
		switch k {
		case ondemand.NamespaceLabel:
			errs.Add(field+".labels", "use namespace, not a %q label", k)
		case StreamLabel, ConsumerLabel:
			errs.Add(field+".labels", "label %q is set from the series itself", k)
		}
		if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
			errs.Add(field+".labels", "label %s value %q: %s", k, v, strings.Join(msgs, "; "))
		}
	}
}

// validName is what the server accepts as a stream or consumer name: one
// subject token, no path separators, and label-safe here as well since it
// becomes a label value.
func validName(s string) bool {
	return validToken(s) && !strings.ContainsAny(s, `/\`) && len(validation.IsValidLabelValue(s)) == 0
}

func validToken(s string) bool {
	return s != "" && !strings.ContainsAny(s, " \t\r\n.*>")
}

// cacheTTL is the provider's default TTL.
func (o *Options) cacheTTL() time.Duration {
	if o.CacheTTL != nil {
		return o.CacheTTL.Duration
	}
	return ondemand.DefaultCacheTTL
}
