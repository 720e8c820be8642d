package prometheus

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metricscale/metricscale/providers/ondemand"
	"github.com/metricscale/metricscale/providers/options"
	"github.com/metricscale/metricscale/providers/prometheus/rules"
)

// Defaults for options left out.
const (
	// DefaultRelistInterval is prometheus-adapter's --metrics-relist-interval.
	DefaultRelistInterval = 10 * time.Minute
	// DefaultMaxGETQueryBytes: with verb GET, a query whose encoded form is
	// longer is POSTed, since proxies and Prometheus refuse long URLs
	// (prometheus-adapter#668: 25 KB pod regexes).
	DefaultMaxGETQueryBytes = 8 << 10
	// defaultQueryTimeout bounds a query when neither the caller nor the
	// options give a deadline.
	defaultQueryTimeout = 30 * time.Second
)

// Options are the provider's config options (providers[].options): where
// Prometheus is, how to authenticate, and prometheus-adapter's rules, which
// sit at the same level unchanged (rules, externalRules, resourceRules).
type Options struct {
	// URL is Prometheus' base URL (--prometheus-url).
	URL string `json:"url"`

	// CAFile verifies Prometheus' serving certificate (--prometheus-ca-file).
	CAFile string `json:"caFile,omitempty"`
	// CertFile and KeyFile are a client certificate
	// (--prometheus-client-tls-cert-file, --prometheus-client-tls-key-file).
	CertFile string `json:"certFile,omitempty"`
	KeyFile  string `json:"keyFile,omitempty"`
	// InsecureSkipTLSVerify skips verifying the serving certificate.
	InsecureSkipTLSVerify bool `json:"insecureSkipTLSVerify,omitempty"`
	// BearerTokenFile holds a bearer token (--prometheus-token-file); it is
	// reread every minute so rotated tokens are picked up.
	BearerTokenFile string `json:"bearerTokenFile,omitempty"`
	// Username and PasswordFile are HTTP basic auth credentials.
	Username     string `json:"username,omitempty"`
	PasswordFile string `json:"passwordFile,omitempty"`
	// Headers are set on every request (--prometheus-header k=v). A header
	// that carries a credential (Authorization, X-API-Key, ...) must come
	// from a file or env ({file: /path}), never inline.
	Headers map[string]options.Header `json:"headers,omitempty"`
	// AuthConfig is a kubeconfig whose current context says how to reach
	// and authenticate to Prometheus (--prometheus-auth-config).
	AuthConfig string `json:"authConfig,omitempty"`
	// AuthInCluster uses the pod's service account
	// (--prometheus-auth-incluster).
	AuthInCluster bool `json:"authInCluster,omitempty"`

	// Verb is GET (the default: POST when the query is longer than 8 KiB)
	// or POST (always) (--prometheus-verb).
	Verb string `json:"verb,omitempty"`
	// QueryTimeout bounds each PromQL query and is passed to Prometheus as
	// its evaluation timeout; the provider's own timeout also applies.
	QueryTimeout *metav1.Duration `json:"queryTimeout,omitempty"`
	// QueryCacheTTL reuses a query's result for this long (default 0: off).
	QueryCacheTTL *metav1.Duration `json:"queryCacheTTL,omitempty"`
	// RelistInterval is how often series are relisted for discovery
	// (--metrics-relist-interval, default 10m).
	RelistInterval *metav1.Duration `json:"relistInterval,omitempty"`
	// MaxAge is how far back a relist looks (--metrics-max-age, default the
	// relist interval, never below it).
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`

	// The change feed: while autoscalers subscribe to it, the External
	// queries they make are asked again every feedPollInterval and their
	// changes published (feedPollInterval, feedMaxPolledMetrics; see
	// ondemand.QueryFeed).
	ondemand.FeedOptions

	// The rules, in prometheus-adapter's format.
	rules.Config
}

// settings are Options with defaults applied.
type settings struct {
	Options
	verb           string
	queryTimeout   time.Duration
	cacheTTL       time.Duration
	relistInterval time.Duration
	maxAge         time.Duration
	rules          *rules.Set
}

func dur(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return d.Duration
}

// decodeOptions decodes raw strictly and validates it; errors name their
// field below field ("providers[0].options.rules[2].metricsQuery: ...").
func decodeOptions(field string, raw json.RawMessage) (*settings, error) {
	var o Options
	if options.Empty(raw) {
		return nil, fmt.Errorf("%s.url: required", field)
	}
	if err := options.Decode(field, raw, &o); err != nil {
		return nil, err
	}
	return validate(field, o)
}

func validate(field string, o Options) (*settings, error) {
	var errs options.Errors
	bad := func(f, format string, args ...any) { errs.Add(field+"."+f, format, args...) }
	if o.URL == "" {
		bad("url", "required")
	} else if u, err := url.Parse(o.URL); err != nil {
		bad("url", "not a valid URL") // url's message quotes it, password and all
	} else if u.User != nil {
		bad("url", "must not hold credentials: use bearerTokenFile, username and passwordFile, or a header from a file")
	} else if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		bad("url", "must be an http or https URL, got %q", o.URL)
	}
	s := &settings{Options: o}
	switch strings.ToUpper(o.Verb) {
	case "", http.MethodGet:
		s.verb = http.MethodGet
	case http.MethodPost:
		s.verb = http.MethodPost
	default:
		bad("verb", "must be GET or POST, got %q", o.Verb)
	}
	o.FeedOptions.Validate(field, &errs)
	if (o.CertFile == "") != (o.KeyFile == "") {
		bad("certFile", "certFile and keyFile go together")
	}
	if o.PasswordFile != "" && o.Username == "" {
		bad("username", "required with passwordFile")
	}
	if o.AuthConfig != "" && o.AuthInCluster {
		bad("authConfig", "cannot be combined with authInCluster")
	}
	if (o.AuthConfig != "" || o.AuthInCluster) && (o.CAFile != "" || o.CertFile != "" || o.InsecureSkipTLSVerify) {
		bad("authConfig", "the kubeconfig carries the TLS settings: leave caFile, certFile, keyFile and insecureSkipTLSVerify out")
	}
	options.CheckHeaders(field+".headers", o.Headers, &errs)
	for f, path := range map[string]string{"caFile": o.CAFile, "certFile": o.CertFile, "keyFile": o.KeyFile,
		"bearerTokenFile": o.BearerTokenFile, "passwordFile": o.PasswordFile, "authConfig": o.AuthConfig} {
		options.CheckFile(field+"."+f, path, &errs)
	}
	s.queryTimeout = dur(o.QueryTimeout, 0)
	s.cacheTTL = dur(o.QueryCacheTTL, 0)
	s.relistInterval = dur(o.RelistInterval, DefaultRelistInterval)
	s.maxAge = dur(o.MaxAge, s.relistInterval)
	if s.queryTimeout < 0 {
		bad("queryTimeout", "must not be negative")
	}
	if s.cacheTTL < 0 {
		bad("queryCacheTTL", "must not be negative")
	}
	if s.relistInterval <= 0 {
		bad("relistInterval", "must be positive")
	}
	if s.maxAge < s.relistInterval {
		// a series seen only between two relists would never be listed
		bad("maxAge", "must not be less than relistInterval (%s), got %s", s.relistInterval, s.maxAge)
	}
	if len(o.Rules) == 0 && len(o.ExternalRules) == 0 && o.ResourceRules == nil {
		bad("rules", "no rules, externalRules or resourceRules: the provider would serve nothing")
	}
	set, err := rules.Compile(field, o.Config, nil)
	errs.AddErr(err)
	s.rules = set
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

// Warnings returns what check-config should point out in valid options: an
// external rule that fails every query (prometheus-adapter#282), and the like.
func Warnings(field string, raw json.RawMessage) []string {
	var o Options
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil
	}
	return rules.Warnings(field, o.Config)
}
