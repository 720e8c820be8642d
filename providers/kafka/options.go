package kafka

import (
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/metricscale/metricscale/providers/ondemand"
	"github.com/metricscale/metricscale/providers/options"
)

// Options are a kafka provider's options (providers[].options).
type Options struct {
	// Brokers are the seed brokers, host:port.
	Brokers []string `json:"brokers"`
	// ClientID is sent to the brokers; default "metricscale-adapter".
	ClientID string `json:"clientID,omitempty"`
	// SASL authenticates the connection; TLS encrypts it (set, even empty,
	// to use TLS with the system roots).
	SASL *SASLOptions `json:"sasl,omitempty"`
	TLS  *options.TLS `json:"tls,omitempty"`
	// CacheTTL is how long a metric's reading answers queries (default
	// ondemand.DefaultCacheTTL); each metric may override it.
	CacheTTL *metav1.Duration `json:"cacheTTL,omitempty"`
	// Metrics are the served metrics, one consumer group each.
	Metrics []MetricOptions `json:"metrics"`
	// FeedPollInterval and FeedMaxPolledMetrics: how the metrics the
	// change feed's subscribers read are polled.
	ondemand.FeedOptions
}

// SASLOptions are the SASL credentials.
type SASLOptions struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
	Mechanism string `json:"mechanism"`
	Username  string `json:"username"`
	// Password is read from a file or an environment variable, at start
	// and again on every new connection (a rotated Secret is picked up).
	Password *options.Secret `json:"password"`
}

// The SASL mechanisms supported.
const (
	MechanismPlain       = "PLAIN"
	MechanismScramSHA256 = "SCRAM-SHA-256"
	MechanismScramSHA512 = "SCRAM-SHA-512"
)

// ResetPolicy is what lag a partition without a usable committed offset
// has: what the group's consumers would do with auto.offset.reset.
type ResetPolicy string

// The reset policies (Kafka's auto.offset.reset values).
const (
	ResetLatest   ResetPolicy = "latest"
	ResetEarliest ResetPolicy = "earliest"
)

// MetricOptions are one metric: the lag of one consumer group on its topics.
type MetricOptions struct {
	ondemand.MetricOptions
	// Group is the consumer group.
	Group string `json:"group"`
	// Topics are the topics, by name; or TopicRegex matches topic names
	// (whole names, Go syntax; internal topics never match). Named capture
	// groups of TopicRegex become labels of the series, a "namespace"
	// group scoping it to that namespace.
	Topics     []string `json:"topics,omitempty"`
	TopicRegex string   `json:"topicRegex,omitempty"`
	// PerPartition gives one series per partition (label "partition")
	// instead of one per topic.
	PerPartition bool `json:"perPartition,omitempty"`
	// OffsetResetPolicy is the group's auto.offset.reset: latest (default)
	// or earliest.
	OffsetResetPolicy ResetPolicy `json:"offsetResetPolicy,omitempty"`
}

// The labels every series carries.
const (
	LabelTopic     = "topic"
	LabelGroup     = "group"
	LabelPartition = "partition"
)

var reservedLabels = map[string]bool{LabelTopic: true, LabelGroup: true, LabelPartition: true}

// topicName is Kafka's rule for topic names.
var topicName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

func (o *MetricOptions) policy() ResetPolicy {
	if o.OffsetResetPolicy == "" {
		return ResetLatest
	}
	return o.OffsetResetPolicy
}

// compileTopicRegex anchors re to whole topic names.
func compileTopicRegex(re string) (*regexp.Regexp, error) {
	return regexp.Compile(`^(?:` + re + `)$`)
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
	if len(o.Brokers) == 0 {
		errs.Add(field+".brokers", "required: at least one host:port")
	}
	for i, b := range o.Brokers {
		f := fmt.Sprintf("%s.brokers[%d]", field, i)
		host, port, err := net.SplitHostPort(b)
		if err != nil {
			errs.Add(f, "%q is not host:port: %v", b, err)
			continue
		}
		if host == "" {
			errs.Add(f, "%q has no host", b)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			errs.Add(f, "%q: port must be 1-65535", b)
		}
	}
	if o.SASL != nil {
		s, f := o.SASL, field+".sasl"
		switch s.Mechanism {
		case MechanismPlain, MechanismScramSHA256, MechanismScramSHA512:
		case "":
			errs.Add(f+".mechanism", "required: %s, %s or %s", MechanismPlain, MechanismScramSHA256, MechanismScramSHA512)
		default:
			errs.Add(f+".mechanism", "%q is not %s, %s or %s", s.Mechanism, MechanismPlain, MechanismScramSHA256, MechanismScramSHA512)
		}
		if s.Username == "" {
			errs.Add(f+".username", "required")
		}
		if !s.Password.IsSet() {
			errs.Add(f+".password", "required: file or env")
		}
		s.Password.Validate(f+".password", &errs)
	}
	o.TLS.Validate(field+".tls", &errs)
	o.FeedOptions.Validate(field, &errs)
	if o.CacheTTL != nil && o.CacheTTL.Duration < 0 {
		errs.Add(field+".cacheTTL", "must not be negative, got %s", o.CacheTTL.Duration)
	}
	if len(o.Metrics) == 0 {
		errs.Add(field+".metrics", "required: at least one metric")
	}
	seen := map[string]int{}
	for i := range o.Metrics {
		m := &o.Metrics[i]
		f := fmt.Sprintf("%s.metrics[%d]", field, i)
		m.MetricOptions.Validate(f, &errs)
		if j, dup := seen[m.Name]; dup && m.Name != "" {
			errs.Add(f+".name", "%q is also metrics[%d]", m.Name, j)
		} else {
			seen[m.Name] = i
		}
		m.validate(f, &errs)
	}
	return errs.Err()
}

func (m *MetricOptions) validate(f string, errs *options.Errors) {
	if m.Group == "" {
		errs.Add(f+".group", "required")
	}
	switch m.OffsetResetPolicy {
	case "", ResetLatest, ResetEarliest:
	default:
		errs.Add(f+".offsetResetPolicy", "%q is not latest or earliest", m.OffsetResetPolicy)
	}
	for k := range m.Labels {
		if reservedLabels[k] {
			errs.Add(f+".labels", "label %q is set by the provider", k)
		}
	}
	switch {
	case len(m.Topics) == 0 && m.TopicRegex == "":
		errs.Add(f+".topics", "required: topics or topicRegex")
	case len(m.Topics) > 0 && m.TopicRegex != "":
		errs.Add(f+".topics", "set topics or topicRegex, not both")
	}
	seen := map[string]bool{}
	for i, t := range m.Topics {
		tf := fmt.Sprintf("%s.topics[%d]", f, i)
		switch {
		case !topicName.MatchString(t) || t == "." || t == "..":
			errs.Add(tf, "%q is not a Kafka topic name (1-249 of a-z A-Z 0-9 . _ -)", t)
		case seen[t]:
			errs.Add(tf, "%q is listed twice", t)
		}
		seen[t] = true
	}
	if m.TopicRegex == "" {
		return
	}
	re, err := compileTopicRegex(m.TopicRegex)
	if err != nil {
		errs.Add(f+".topicRegex", "%v", err)
		return
	}
	for _, name := range re.SubexpNames()[1:] {
		switch {
		case name == "":
		case reservedLabels[name]:
			errs.Add(f+".topicRegex", "capture group %q: the provider sets that label", name)
		case name == ondemand.NamespaceLabel && m.Namespace != "":
			errs.Add(f+".topicRegex", "capture group %q and namespace %q both set the namespace", name, m.Namespace)
		case m.Labels[name] != "":
			errs.Add(f+".topicRegex", "capture group %q is also in labels", name)
		default:
			if msgs := validation.IsQualifiedName(name); len(msgs) > 0 {
				errs.Add(f+".topicRegex", "capture group %q is not a label name: %s", name, strings.Join(msgs, "; "))
			}
		}
	}
}
