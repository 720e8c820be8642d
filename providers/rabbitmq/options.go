package rabbitmq

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metricscale/metricscale/providers/ondemand"
	"github.com/metricscale/metricscale/providers/options"
)

// Options are the provider's config options (providers[].options).
type Options struct {
	// ManagementURL is the management plugin's base URL
	// (http://rabbit:15672, or with the path prefix of a proxy).
	ManagementURL string `json:"managementURL,omitempty"`
	// AMQPURL is the broker's AMQP 0-9-1 address (amqp://rabbit:5672), for
	// metrics with source amqp: used when the management plugin is absent.
	AMQPURL string `json:"amqpURL,omitempty"`
	// Username and Password authenticate to both; never put the password
	// in a URL.
	Username string          `json:"username"`
	Password *options.Secret `json:"password"`
	// TLS applies to https:// and amqps:// URLs.
	TLS *options.TLS `json:"tls,omitempty"`
	// CacheTTL is how long a reading answers queries (default 2s).
	CacheTTL *metav1.Duration `json:"cacheTTL,omitempty"`
	// Metrics are the external metrics served.
	Metrics []MetricOptions `json:"metrics"`
	// FeedPollInterval and FeedMaxPolledMetrics: how the metrics the
	// change feed's subscribers read are polled.
	ondemand.FeedOptions
}

// MetricOptions is one metric: which queues, which count.
type MetricOptions struct {
	ondemand.MetricOptions
	// Queue is an exact queue name; QueueRegex matches whole names (it is
	// anchored), and its named groups become labels. Set one of them.
	Queue      string `json:"queue,omitempty"`
	QueueRegex string `json:"queueRegex,omitempty"`
	// Vhost is the queues' virtual host (default "/").
	Vhost string `json:"vhost,omitempty"`
	// Measure is what the metric counts (default total).
	Measure Measure `json:"measure,omitempty"`
	// Source is management (the default when managementURL is set) or amqp.
	Source Source `json:"source,omitempty"`
}

// Measure is what a metric counts per queue.
type Measure string

// The measures.
const (
	// MeasureReady is messages_ready: waiting to be delivered.
	MeasureReady Measure = "ready"
	// MeasureUnacked is messages_unacknowledged: delivered, not yet acked.
	MeasureUnacked Measure = "unacked"
	// MeasureTotal is ready + unacked: the work not finished yet.
	MeasureTotal Measure = "total"
	// MeasureConsumers is the number of consumers.
	MeasureConsumers Measure = "consumers"
	// MeasurePublishRate is messages published per second.
	MeasurePublishRate Measure = "publishRate"
	// MeasureDeliverRate is messages delivered to consumers (with or
	// without ack) and fetched by basic.get, per second.
	MeasureDeliverRate Measure = "deliverRate"
)

var measures = []Measure{MeasureReady, MeasureUnacked, MeasureTotal, MeasureConsumers, MeasurePublishRate, MeasureDeliverRate}

// overAMQP says whether a passive queue declare reports the measure.
func (m Measure) overAMQP() bool { return m == MeasureReady || m == MeasureConsumers }

// Source is where a metric is read.
type Source string

// The sources.
const (
	SourceManagement Source = "management"
	SourceAMQP       Source = "amqp"
)

// DefaultVhost is a metric's vhost when unset.
const DefaultVhost = "/"

// Labels of every series.
const (
	LabelQueue = "queue"
	LabelVhost = "vhost"
)

// settings are validated options with defaults applied.
type settings struct {
	management *url.URL
	amqp       *url.URL
	username   string
	password   *options.Secret
	tls        *options.TLS
	cacheTTL   time.Duration
	feed       ondemand.Feed
	metrics    []metricSettings
}

type metricSettings struct {
	opts    ondemand.MetricOptions
	queue   string
	re      *regexp.Regexp
	vhost   string
	measure Measure
	source  Source
}

// parse validates o; field is the options' config path. Every error names
// its field.
func (o *Options) parse(field string) (*settings, error) {
	var errs options.Errors
	s := &settings{password: o.Password, tls: o.TLS, cacheTTL: ondemand.DefaultCacheTTL}
	urlUser := ""
	if o.ManagementURL != "" {
		s.management = parseURL(field+".managementURL", o.ManagementURL, []string{"http", "https"}, &urlUser, &errs)
		if s.management != nil && s.management.RawQuery != "" {
			errs.Add(field+".managementURL", "must not have a query")
		}
	}
	if o.AMQPURL != "" {
		s.amqp = parseURL(field+".amqpURL", o.AMQPURL, []string{"amqp", "amqps"}, &urlUser, &errs)
		if s.amqp != nil && strings.Trim(s.amqp.Path, "/") != "" {
			errs.Add(field+".amqpURL", "must not name a vhost (%q): each metric says its vhost", s.amqp.Path)
		}
	}
	if o.ManagementURL == "" && o.AMQPURL == "" {
		errs.Add(field+".managementURL", "required (or amqpURL)")
	}
	s.username = o.Username
	switch {
	case s.username == "" && urlUser != "":
		s.username = urlUser
	case s.username == "":
		errs.Add(field+".username", "required")
	case urlUser != "" && urlUser != s.username:
		errs.Add(field+".username", "%q differs from the user in the URL (%q)", s.username, urlUser)
	}
	if !o.Password.IsSet() {
		errs.Add(field+".password", "required: a file or env with the user's password")
	}
	o.Password.Validate(field+".password", &errs)
	o.TLS.Validate(field+".tls", &errs)
	o.FeedOptions.Validate(field, &errs)
	s.feed = o.Feed()
	if o.TLS != nil && !isTLS(s.management) && !isTLS(s.amqp) {
		errs.Add(field+".tls", "set, but neither managementURL is https nor amqpURL amqps")
	}
	if o.CacheTTL != nil {
		if o.CacheTTL.Duration < 0 {
			errs.Add(field+".cacheTTL", "must not be negative, got %s", o.CacheTTL.Duration)
		}
		s.cacheTTL = o.CacheTTL.Duration
	}
	if len(o.Metrics) == 0 {
		errs.Add(field+".metrics", "required: at least one metric")
	}
	names := map[string]int{}
	for i, m := range o.Metrics {
		f := fmt.Sprintf("%s.metrics[%d]", field, i)
		m.MetricOptions.Validate(f, &errs)
		if j, dup := names[m.Name]; dup && m.Name != "" {
			errs.Add(f+".name", "%q is already metrics[%d]", m.Name, j)
		}
		names[m.Name] = i
		s.metrics = append(s.metrics, parseMetric(f, m, s, &errs))
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

func parseMetric(f string, m MetricOptions, s *settings, errs *options.Errors) metricSettings {
	ms := metricSettings{opts: m.MetricOptions, queue: m.Queue, vhost: m.Vhost, measure: m.Measure, source: m.Source}
	if ms.vhost == "" {
		ms.vhost = DefaultVhost
	}
	if ms.measure == "" {
		ms.measure = MeasureTotal
	}
	known := false
	for _, k := range measures {
		known = known || ms.measure == k
	}
	if !known {
		errs.Add(f+".measure", "unknown measure %q (want one of %v)", ms.measure, measures)
	}
	switch {
	case m.Queue == "" && m.QueueRegex == "":
		errs.Add(f+".queue", "required (or queueRegex)")
	case m.Queue != "" && m.QueueRegex != "":
		errs.Add(f+".queueRegex", "set queue or queueRegex, not both")
	case m.QueueRegex != "":
		re, err := regexp.Compile("^(?:" + m.QueueRegex + ")$")
		if err != nil {
			errs.Add(f+".queueRegex", "%v", err)
			break
		}
		ms.re = re
		for _, g := range re.SubexpNames() {
			switch g {
			case "":
			case LabelVhost:
				errs.Add(f+".queueRegex", "a group named %q would replace the vhost label", g)
			case ondemand.NamespaceLabel:
				if m.Namespace != "" {
					errs.Add(f+".queueRegex", "a group named namespace and the metric's namespace %q: use one", m.Namespace)
				}
			}
			if _, static := m.Labels[g]; static && g != "" {
				errs.Add(f+".queueRegex", "group %q is also one of the metric's labels", g)
			}
		}
	}
	switch ms.source {
	case "":
		ms.source = SourceManagement
		if s.management == nil && s.amqp != nil {
			ms.source = SourceAMQP
		}
	case SourceManagement:
		if s.management == nil {
			errs.Add(f+".source", "management needs options.managementURL")
		}
	case SourceAMQP:
		if s.amqp == nil {
			errs.Add(f+".source", "amqp needs options.amqpURL")
		}
	default:
		errs.Add(f+".source", "unknown source %q (want management or amqp)", ms.source)
	}
	if ms.source == SourceAMQP {
		if known && !ms.measure.overAMQP() {
			errs.Add(f+".measure", "%q needs the management API: over AMQP a passive queue declare reports only ready messages and consumers", ms.measure)
		}
		if m.QueueRegex != "" {
			errs.Add(f+".queueRegex", "needs the management API: over AMQP only an exact queue name can be asked for")
		}
	}
	return ms
}

// parseURL checks a broker URL; a user name in it is returned in user, a
// password refused (it would end up in logs and errors).
func parseURL(field, raw string, schemes []string, user *string, errs *options.Errors) *url.URL {
	u, err := url.Parse(raw)
	if err != nil {
		// url's message quotes the URL, which may hold a password
		errs.Add(field, "not a valid URL")
		return nil
	}
	ok := false
	for _, s := range schemes {
		ok = ok || u.Scheme == s
	}
	if !ok {
		errs.Add(field, "scheme %q, want %s", u.Scheme, strings.Join(schemes, " or "))
	}
	if u.Host == "" || u.Hostname() == "" {
		errs.Add(field, "has no host")
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			errs.Add(field, "has a password: put it in options.password (a file or env), never in the URL")
			return nil
		}
		if *user != "" && *user != u.User.Username() {
			errs.Add(field, "user %q differs from the other URL's (%q)", u.User.Username(), *user)
		}
		*user = u.User.Username()
		u.User = nil
	}
	return u
}

func isTLS(u *url.URL) bool { return u != nil && (u.Scheme == "https" || u.Scheme == "amqps") }
