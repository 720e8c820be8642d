package redis

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/metricscale/metricscale/providers/ondemand"
	"github.com/metricscale/metricscale/providers/options"
)

// Kind is what a metric entry measures.
type Kind string

// The kinds of metric a redis provider serves.
const (
	// ListLength is LLEN of a list: the jobs waiting in it. Label "key".
	ListLength Kind = "listLength"
	// StreamLength is XLEN of a stream: every entry it holds, read or not.
	// Label "stream".
	StreamLength Kind = "streamLength"
	// StreamPending is a consumer group's pending count (XINFO GROUPS):
	// entries delivered to a consumer and not yet acknowledged. Labels
	// "stream", "group".
	StreamPending Kind = "streamPending"
	// StreamLag is a consumer group's lag (XINFO GROUPS, Redis 7): entries
	// not yet delivered to any consumer of the group.
	StreamLag Kind = "streamLag"
	// StreamBacklog is lag + pending: what the group's workers still have
	// to process, delivered or not.
	StreamBacklog Kind = "streamBacklog"
)

var kinds = []Kind{ListLength, StreamLength, StreamPending, StreamLag, StreamBacklog}

func (k Kind) valid() bool {
	for _, v := range kinds {
		if k == v {
			return true
		}
	}
	return false
}

// grouped says the kind is read per consumer group (XINFO GROUPS).
func (k Kind) grouped() bool { return k == StreamPending || k == StreamLag || k == StreamBacklog }

// keyLabel is the label naming the key a series measures.
func (k Kind) keyLabel() string {
	if k == ListLength {
		return "key"
	}
	return "stream"
}

// redisType is the key type SCAN filters a pattern's keys on.
func (k Kind) redisType() string {
	if k == ListLength {
		return "list"
	}
	return "stream"
}

// Defaults for options left out.
const (
	// DefaultMaxKeys bounds the keys one keyPattern may match: each costs a
	// command in the pipeline, and the answer's series are bounded anyway.
	DefaultMaxKeys = 1000
	// DefaultScanCount is SCAN's COUNT hint: keys examined per call.
	DefaultScanCount = 1000
	// DefaultPort is Redis' port when the address has none.
	DefaultPort = "6379"
)

// Options are a redis provider's options (providers[].options).
type Options struct {
	// Address is the server: host:port, or a redis:// (rediss:// for TLS)
	// URL with an optional /DB path. Credentials never go in it.
	Address string `json:"address"`
	// DB is the database number (SELECT); a URL's /DB path sets it too.
	DB int `json:"db,omitempty"`
	// Username is the ACL user (Redis 6+); empty means "default".
	Username string `json:"username,omitempty"`
	// Password is read from a file or an environment variable when a
	// connection is made, so a rotated Secret is picked up.
	Password *options.Secret `json:"password,omitempty"`
	// TLS enables TLS (rediss:// does too, with default settings).
	TLS *options.TLS `json:"tls,omitempty"`
	// CacheTTL is how long a reading answers queries (default
	// ondemand.DefaultCacheTTL); metrics with the same TTL share one
	// pipelined round trip.
	CacheTTL *metav1.Duration `json:"cacheTTL,omitempty"`
	// MaxKeys bounds the keys one keyPattern may match (default 1000): a
	// reading with more fails rather than serving a partial sum.
	MaxKeys int `json:"maxKeys,omitempty"`
	// ScanCount is SCAN's COUNT hint (default 1000).
	ScanCount int `json:"scanCount,omitempty"`
	// Metrics are the external metrics served.
	Metrics []MetricEntry `json:"metrics"`
	// FeedPollInterval and FeedMaxPolledMetrics: how the metrics the
	// change feed's subscribers read are polled.
	ondemand.FeedOptions
	// FeedMode (feed) is how the change feed learns of changes: "poll" (default)
	// reads every watched metric each feedPollInterval; "keyspace" reads
	// a listLength or streamLength key only when a keyspace notification
	// says it was written, plus every feedReconcileInterval (see
	// feed_keyspace.go).
	FeedMode FeedMode `json:"feed,omitempty"`
	// FeedReconcileInterval is how often the keyspace feed reads every
	// watched key anyway (default 30s): pub/sub drops what it cannot
	// deliver.
	FeedReconcileInterval *metav1.Duration `json:"feedReconcileInterval,omitempty"`
	// SetNotifyKeyspaceEvents lets the keyspace feed add the flags it
	// needs to the server's notify-keyspace-events (CONFIG SET) when they
	// are off; without it the feed polls instead, with a warning.
	SetNotifyKeyspaceEvents bool `json:"setNotifyKeyspaceEvents,omitempty"`
}

// FeedMode is how the change feed learns of changes.
type FeedMode string

// The feed modes.
const (
	FeedPoll     FeedMode = "poll"
	FeedKeyspace FeedMode = "keyspace"
)

// DefaultFeedReconcileInterval is feedReconcileInterval's default.
const DefaultFeedReconcileInterval = 30 * time.Second

// MetricEntry is one configured metric: its name and labels, and what it
// measures.
type MetricEntry struct {
	ondemand.MetricOptions
	// Type is listLength, streamLength, streamPending, streamLag or
	// streamBacklog.
	Type Kind `json:"type"`
	// Key is one list or stream. A missing list has length 0 (Redis deletes
	// empty lists); a missing stream has no groups.
	Key string `json:"key,omitempty"`
	// KeyPattern selects every key of the type matching a SCAN MATCH glob
	// (jobs:*): one series per key.
	KeyPattern string `json:"keyPattern,omitempty"`
	// Group, for the per-group types, serves only this consumer group;
	// empty means every group of the stream.
	Group string `json:"group,omitempty"`
	// LabelsFrom is a regular expression matched against each key's name;
	// each named group that captures something becomes a label
	// ("^jobs:(?P<namespace>[^:]+):(?P<queue>.+)$"). Keys that do not match
	// are left out.
	LabelsFrom string `json:"labelsFrom,omitempty"`
}

// settings are validated options with defaults applied.
type settings struct {
	addr     string
	db       int
	username string
	password *options.Secret
	tls      *options.TLS
	tlsOn    bool
	ttl      time.Duration
	feed     ondemand.Feed
	// keyspace: the change feed uses keyspace notifications
	keyspace  bool
	reconcile time.Duration
	setNotify bool
	maxKeys   int
	scanCount int
	metrics   []metricSettings
}

type metricSettings struct {
	MetricEntry
	labelsFrom *regexp.Regexp
	// labels keeps keyLabels' answers: a pattern's metric is made from
	// all its keys at each read, a notified key's too.
	labels *keyLabelsMemo
}

// decodeOptions decodes and validates raw; every error names its field.
func decodeOptions(field string, raw json.RawMessage) (*settings, error) {
	var o Options
	if err := options.Decode(field, raw, &o); err != nil {
		return nil, err
	}
	return o.settings(field)
}

func (o *Options) settings(field string) (*settings, error) {
	var errs options.Errors
	s := &settings{
		db: o.DB, username: o.Username, password: o.Password, tls: o.TLS, tlsOn: o.TLS != nil,
		ttl: ondemand.DefaultCacheTTL, maxKeys: DefaultMaxKeys, scanCount: DefaultScanCount,
	}
	s.addr = o.parseAddress(field, s, &errs)
	if o.DB < 0 {
		errs.Add(field+".db", "must not be negative, got %d", o.DB)
	}
	if strings.ContainsAny(o.Username, " \t\r\n") {
		errs.Add(field+".username", "must not contain spaces")
	}
	if o.Username != "" && !o.Password.IsSet() {
		// go-redis sends no AUTH without a password: the connection would
		// silently be the default user's
		errs.Add(field+".password", "required with username (a nopass user accepts any password)")
	}
	o.Password.Validate(field+".password", &errs)
	o.TLS.Validate(field+".tls", &errs)
	o.FeedOptions.Validate(field, &errs)
	s.feed = o.Feed()
	s.setNotify = o.SetNotifyKeyspaceEvents
	s.reconcile = DefaultFeedReconcileInterval
	switch o.FeedMode {
	case "", FeedPoll:
	case FeedKeyspace:
		s.keyspace = true
		if s.feed.Interval < 0 {
			errs.Add(field+".feed", "keyspace needs the change feed, which feedPollInterval 0s turns off")
		}
	default:
		errs.Add(field+".feed", "%q: want %s or %s", o.FeedMode, FeedPoll, FeedKeyspace)
	}
	if o.FeedReconcileInterval != nil {
		if o.FeedReconcileInterval.Duration <= 0 {
			errs.Add(field+".feedReconcileInterval", "must be positive, got %s", o.FeedReconcileInterval.Duration)
		}
		s.reconcile = o.FeedReconcileInterval.Duration
	}
	if o.CacheTTL != nil {
		if o.CacheTTL.Duration < 0 {
			errs.Add(field+".cacheTTL", "must not be negative, got %s", o.CacheTTL.Duration)
		}
		s.ttl = o.CacheTTL.Duration
	}
	switch {
	case o.MaxKeys < 0:
		errs.Add(field+".maxKeys", "must not be negative, got %d", o.MaxKeys)
	case o.MaxKeys > 0:
		s.maxKeys = o.MaxKeys
	}
	switch {
	case o.ScanCount < 0:
		errs.Add(field+".scanCount", "must not be negative, got %d", o.ScanCount)
	case o.ScanCount > 0:
		s.scanCount = o.ScanCount
	}
	if len(o.Metrics) == 0 {
		errs.Add(field+".metrics", "required: at least one metric")
	}
	seen := map[string]int{}
	for i, m := range o.Metrics {
		f := fmt.Sprintf("%s.metrics[%d]", field, i)
		m.MetricOptions.Validate(f, &errs)
		if j, dup := seen[m.Name]; dup && m.Name != "" {
			errs.Add(f+".name", "%q is also metrics[%d]'s name", m.Name, j)
		}
		seen[m.Name] = i
		ms := m.validate(f, &errs)
		// Twice the keys a pattern may match: keys come and go.
		ms.labels = &keyLabelsMemo{limit: 2 * s.maxKeys}
		s.metrics = append(s.metrics, ms)
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

// parseAddress accepts host:port, host, or a redis:// or rediss:// URL.
func (o *Options) parseAddress(field string, s *settings, errs *options.Errors) string {
	f := field + ".address"
	a := strings.TrimSpace(o.Address)
	if a == "" {
		errs.Add(f, "required (host:port or redis://host:port)")
		return ""
	}
	if strings.Contains(a, "://") {
		u, err := url.Parse(a)
		if err != nil {
			// url's error quotes the whole URL, which might hold a password
			errs.Add(f, "not a valid URL")
			return ""
		}
		switch u.Scheme {
		case "redis":
		case "rediss":
			s.tlsOn = true
		default:
			errs.Add(f, "scheme %q: want redis or rediss", u.Scheme)
		}
		if u.User != nil {
			errs.Add(f, "must not hold credentials: set username, and password from a file or env")
		}
		if u.RawQuery != "" || u.Fragment != "" {
			errs.Add(f, "query parameters are not supported: use the provider's options")
		}
		if p := strings.Trim(u.Path, "/"); p != "" {
			db, err := strconv.Atoi(p)
			if err != nil || db < 0 {
				errs.Add(f, "path %q: want a database number", u.Path)
			} else if o.DB != 0 && o.DB != db {
				errs.Add(f, "database %d in the URL differs from db %d", db, o.DB)
			} else {
				s.db = db
			}
		}
		a = u.Host
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		if strings.Contains(err.Error(), "missing port") {
			host, port = a, DefaultPort
		} else {
			errs.Add(f, "%q: %v", a, err)
			return ""
		}
	}
	if host == "" {
		errs.Add(f, "%q has no host", a)
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		errs.Add(f, "port %q: want 1-65535", port)
	}
	return net.JoinHostPort(host, port)
}

func (m MetricEntry) validate(f string, errs *options.Errors) metricSettings {
	out := metricSettings{MetricEntry: m}
	switch {
	case m.Type == "":
		errs.Add(f+".type", "required: one of %s", kindList())
	case !m.Type.valid():
		errs.Add(f+".type", "%q: want one of %s", m.Type, kindList())
	}
	switch {
	case m.Key == "" && m.KeyPattern == "":
		errs.Add(f+".key", "required: set key or keyPattern")
	case m.Key != "" && m.KeyPattern != "":
		errs.Add(f+".keyPattern", "set key or keyPattern, not both")
	}
	if m.Group != "" && !m.Type.grouped() && m.Type.valid() {
		errs.Add(f+".group", "only the per-group types (%s, %s, %s) read consumer groups", StreamPending, StreamLag, StreamBacklog)
	}
	if m.LabelsFrom == "" {
		return out
	}
	re, err := regexp.Compile(m.LabelsFrom)
	if err != nil {
		errs.Add(f+".labelsFrom", "%v", err)
		return out
	}
	out.labelsFrom = re
	named := 0
	for _, name := range re.SubexpNames()[1:] {
		if name == "" {
			continue
		}
		named++
		if msgs := validation.IsQualifiedName(name); len(msgs) > 0 {
			errs.Add(f+".labelsFrom", "group %q is not a valid label name: %s", name, strings.Join(msgs, "; "))
		}
		if name == m.Type.keyLabel() || (m.Type.grouped() && name == "group") {
			errs.Add(f+".labelsFrom", "group %q would replace the %q label the provider sets", name, name)
		}
		if _, ok := m.Labels[name]; ok {
			errs.Add(f+".labelsFrom", "group %q is also in labels", name)
		}
	}
	if named == 0 {
		errs.Add(f+".labelsFrom", "has no named group (?P<label>...): it would add no label")
	}
	if m.Key != "" && !re.MatchString(m.Key) {
		errs.Add(f+".labelsFrom", "does not match key %q, which would never be served", m.Key)
	}
	return out
}

func kindList() string {
	s := make([]string, len(kinds))
	for i, k := range kinds {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}
