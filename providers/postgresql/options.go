package postgresql

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metricscale/metricscale/providers/ondemand"
	"github.com/metricscale/metricscale/providers/options"
)

// Defaults for options left out.
const (
	DefaultPort = 5432
	// DefaultStatementTimeout is below the adapter's default provider
	// timeout (5s), so a slow query is cut by the server, which answers
	// why, before the adapter gives up on it.
	DefaultStatementTimeout = 2 * time.Second
	DefaultConnectTimeout   = 2 * time.Second
	DefaultMaxConns         = 2
	DefaultValueColumn      = "value"
	// maxTimeout is the adapter's own maximum provider timeout.
	maxTimeout  = 60 * time.Second
	maxMaxConns = 20
)

// Options are the provider's config options (providers[].options).
type Options struct {
	// Host is a host name, an IP address or a unix socket directory.
	Host string `json:"host"`
	// Port defaults to 5432.
	Port int `json:"port,omitempty"`
	// Database to connect to.
	Database string `json:"database"`
	// User is the role to log in as: give it CONNECT and SELECT only.
	User string `json:"user"`
	// Password comes from a file or an environment variable.
	Password *options.Secret `json:"password,omitempty"`
	// SSLMode is libpq's sslmode: disable, prefer, require, verify-ca or
	// verify-full. Default: verify-full with tls options, prefer without.
	SSLMode string `json:"sslMode,omitempty"`
	// TLS holds the CA and client certificate files for sslMode.
	TLS *options.TLS `json:"tls,omitempty"`
	// ConnectTimeout bounds one connection attempt (default 2s).
	ConnectTimeout *metav1.Duration `json:"connectTimeout,omitempty"`
	// StatementTimeout is SET LOCAL statement_timeout for every query
	// (default 2s); it is also kept below the query's own deadline.
	StatementTimeout *metav1.Duration `json:"statementTimeout,omitempty"`
	// MaxConns bounds the connection pool (default 2).
	MaxConns int `json:"maxConns,omitempty"`
	// CacheTTL is how long a reading answers queries (default 2s).
	CacheTTL *metav1.Duration `json:"cacheTTL,omitempty"`
	// Metrics are the named queries.
	Metrics []MetricOptions `json:"metrics"`
	// FeedPollInterval and FeedMaxPolledMetrics: how the metrics the
	// change feed's subscribers read are polled.
	ondemand.FeedOptions
	// AllowSuperuser lets the provider connect as a superuser (or a member
	// of one), which it otherwise refuses at connect.
	AllowSuperuser bool `json:"allowSuperuser,omitempty"`
}

// MetricOptions are one external metric read by one SQL query.
type MetricOptions struct {
	ondemand.MetricOptions
	// Query is one read-only statement (SELECT, WITH, VALUES or TABLE):
	// every column but the value column is a label.
	Query string `json:"query"`
	// ValueColumn names the numeric column holding the value (default
	// "value").
	ValueColumn string `json:"valueColumn,omitempty"`
	// NullAs is the value of a row whose value column is NULL; unset, such
	// a row fails the read (503 naming the row).
	NullAs *float64 `json:"nullAs,omitempty"`
	// EmptyAs is the value of one series without labels when the query
	// returns no row; unset, no row is an empty reading (404).
	EmptyAs *float64 `json:"emptyAs,omitempty"`
	// AllowNegative serves negative values (a signed query: a balance, a
	// difference); unset, a negative value is a 503 naming the row, as a
	// count below zero is a bug and would read as "no load".
	AllowNegative bool `json:"allowNegative,omitempty"`
}

// settings are validated options with defaults applied.
type settings struct {
	Options
	sslMode          string
	connectTimeout   time.Duration
	statementTimeout time.Duration
	cacheTTL         time.Duration
	feed             ondemand.Feed
	maxConns         int
	metrics          []metricSpec
}

// metricSpec is one metric's validated query.
type metricSpec struct {
	ondemand.MetricOptions
	query       string
	valueColumn string
	nullAs      *float64
	emptyAs     *float64
	// allowNegative is MetricOptions.AllowNegative.
	allowNegative bool
}

var sslModes = []string{"disable", "prefer", "require", "verify-ca", "verify-full"}

func dur(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return d.Duration
}

// decodeOptions decodes and validates raw without touching the server;
// every error names its field below field.
func decodeOptions(field string, raw json.RawMessage) (*settings, error) {
	var o Options
	if err := options.Decode(field, raw, &o); err != nil {
		return nil, err
	}
	return validate(field, o)
}

func validate(field string, o Options) (*settings, error) {
	var errs options.Errors
	s := &settings{Options: o}
	if o.Host == "" {
		errs.Add(field+".host", "required")
	} else if strings.ContainsAny(o.Host, " ,'\\\r\n") {
		// libpq would read a comma as a list of hosts
		errs.Add(field+".host", "%q: one host name, IP address or socket directory", o.Host)
	}
	if o.Port == 0 {
		s.Port = DefaultPort
	} else if o.Port < 1 || o.Port > 65535 {
		errs.Add(field+".port", "must be between 1 and 65535, got %d", o.Port)
	}
	if o.Database == "" {
		errs.Add(field+".database", "required")
	}
	if o.User == "" {
		errs.Add(field+".user", "required")
	}
	o.Password.Validate(field+".password", &errs)
	o.TLS.Validate(field+".tls", &errs)
	o.FeedOptions.Validate(field, &errs)
	s.feed = o.Feed()
	if o.TLS != nil && o.TLS.InsecureSkipVerify {
		errs.Add(field+".tls.insecureSkipVerify", "not supported: sslMode require encrypts without verifying the server")
	}
	switch {
	case o.SSLMode == "" && o.TLS != nil:
		s.sslMode = "verify-full"
	case o.SSLMode == "":
		s.sslMode = "prefer"
	case !contains(sslModes, o.SSLMode):
		errs.Add(field+".sslMode", "must be one of %s, got %q", strings.Join(sslModes, ", "), o.SSLMode)
	case o.SSLMode == "disable" && o.TLS != nil:
		errs.Add(field+".tls", "given with sslMode disable, which never uses TLS")
	default:
		s.sslMode = o.SSLMode
	}
	s.connectTimeout = dur(o.ConnectTimeout, DefaultConnectTimeout)
	if s.connectTimeout <= 0 || s.connectTimeout > maxTimeout {
		errs.Add(field+".connectTimeout", "must be positive and at most %s, got %s", maxTimeout, s.connectTimeout)
	}
	s.statementTimeout = dur(o.StatementTimeout, DefaultStatementTimeout)
	if s.statementTimeout < time.Millisecond || s.statementTimeout > maxTimeout {
		// 0 would be "no timeout" to PostgreSQL
		errs.Add(field+".statementTimeout", "must be at least 1ms and at most %s, got %s", maxTimeout, s.statementTimeout)
	}
	s.cacheTTL = dur(o.CacheTTL, ondemand.DefaultCacheTTL)
	if s.cacheTTL < 0 {
		errs.Add(field+".cacheTTL", "must not be negative, got %s", s.cacheTTL)
	}
	s.maxConns = o.MaxConns
	if s.maxConns == 0 {
		s.maxConns = DefaultMaxConns
	} else if s.maxConns < 1 || s.maxConns > maxMaxConns {
		errs.Add(field+".maxConns", "must be between 1 and %d, got %d", maxMaxConns, o.MaxConns)
	}
	if len(o.Metrics) == 0 {
		errs.Add(field+".metrics", "required: the provider would serve nothing")
	}
	seen := map[string]int{}
	for i, m := range o.Metrics {
		f := fmt.Sprintf("%s.metrics[%d]", field, i)
		m.MetricOptions.Validate(f, &errs)
		if j, dup := seen[m.Name]; dup && m.Name != "" {
			errs.Add(f+".name", "%q is also metrics[%d]", m.Name, j)
		}
		seen[m.Name] = i
		spec := metricSpec{MetricOptions: m.MetricOptions, query: strings.TrimSpace(m.Query), valueColumn: m.ValueColumn, nullAs: m.NullAs, emptyAs: m.EmptyAs, allowNegative: m.AllowNegative}
		if spec.valueColumn == "" {
			spec.valueColumn = DefaultValueColumn
		}
		if err := checkQuery(spec.query, spec.valueColumn); err != nil {
			errs.Add(f+err.field, "%s", err.msg)
		}
		spec.query = stripTerminator(spec.query)
		s.metrics = append(s.metrics, spec)
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
