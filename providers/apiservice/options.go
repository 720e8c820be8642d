package apiservice

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metricscale/metricscale/providers/ondemand"
	"github.com/metricscale/metricscale/providers/options"
)

// Defaults for options left out.
const (
	// DefaultTimeout bounds one query to the remote adapter.
	DefaultTimeout = 5 * time.Second
	// DefaultDiscoveryInterval is how often the remote's discovery is read.
	DefaultDiscoveryInterval = time.Minute
	// minDiscoveryInterval keeps a typo ("1ms") from hammering the remote.
	minDiscoveryInterval = time.Second
)

// API versions the options accept.
const (
	VersionAuto     = "auto"     // custom: v1beta2 if the remote serves it, else v1beta1
	VersionV1beta2  = "v1beta2"  // custom only
	VersionV1beta1  = "v1beta1"  // custom or external
	VersionDisabled = "disabled" // the kind is not forwarded at all
)

// Options are the provider's config options (providers[].options).
type Options struct {
	// URL is the remote adapter's base URL, https only, e.g.
	// https://keda-operator-metrics-apiserver.keda:443. A path is kept as
	// a prefix (the API server's service proxy, say).
	URL string `json:"url"`
	// CAFile verifies the remote's serving certificate; it is re-read when
	// it changes.
	CAFile string `json:"caFile,omitempty"`
	// InsecureSkipTLSVerify skips verifying the remote's certificate: the
	// token is then sent to whoever answers. Refused unless set explicitly,
	// and not together with caFile.
	InsecureSkipTLSVerify bool `json:"insecureSkipTLSVerify,omitempty"`
	// ServerName is the name checked in the remote's certificate when it is
	// not the URL's host.
	ServerName string `json:"serverName,omitempty"`
	// TokenFile holds the bearer token this adapter presents (its
	// ServiceAccount token); read for every request, so a rotated
	// projected token is used as soon as the kubelet writes it.
	TokenFile string `json:"tokenFile,omitempty"`
	// ClientCert and ClientKey are a client certificate this adapter
	// presents; re-read when they change.
	ClientCert string `json:"clientCert,omitempty"`
	ClientKey  string `json:"clientKey,omitempty"`
	// Timeout bounds each query to the remote (default 5s); the provider's
	// timeout in the adapter config bounds it too.
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// DiscoveryInterval is how often the remote's discovery is refreshed
	// (default 1m).
	DiscoveryInterval *metav1.Duration `json:"discoveryInterval,omitempty"`
	// Custom is the custom.metrics.k8s.io version to forward to: auto (the
	// default: v1beta2, or v1beta1 when the remote serves only that),
	// v1beta2, v1beta1, or disabled.
	Custom string `json:"custom,omitempty"`
	// External is the external.metrics.k8s.io version: v1beta1 (the
	// default) or disabled.
	External string `json:"external,omitempty"`

	// The change feed: while autoscalers subscribe to it, the External
	// queries they make are asked again every feedPollInterval and their
	// changes published (see ondemand.QueryFeed).
	ondemand.FeedOptions
}

// settings are Options validated, with defaults applied.
type settings struct {
	Options
	base              *url.URL
	timeout           time.Duration
	discoveryInterval time.Duration
	custom, external  string
}

// decodeOptions decodes raw strictly and validates it; errors name their
// field below field.
func decodeOptions(field string, raw json.RawMessage) (*settings, error) {
	var o Options
	if err := options.Decode(field, raw, &o); err != nil {
		return nil, err
	}
	return validate(field, o)
}

func validate(field string, o Options) (*settings, error) {
	var errs options.Errors
	f := func(name string) string { return field + "." + name }
	s := &settings{Options: o, timeout: DefaultTimeout, discoveryInterval: DefaultDiscoveryInterval}
	o.FeedOptions.Validate(field, &errs)

	switch u, err := url.Parse(o.URL); {
	case o.URL == "":
		errs.Add(f("url"), "required (the remote adapter's service, e.g. https://keda-operator-metrics-apiserver.keda:443)")
	case err != nil:
		errs.Add(f("url"), "%v", err)
	case u.Scheme != "https" || u.Host == "":
		errs.Add(f("url"), "must be an https URL with a host, got %q: this adapter's credentials go with every request", o.URL)
	case u.User != nil:
		errs.Add(f("url"), "must not carry credentials: use tokenFile or clientCert")
	case u.RawQuery != "" || u.Fragment != "":
		errs.Add(f("url"), "must not have a query or a fragment, got %q", o.URL)
	default:
		u.Path = strings.TrimRight(u.Path, "/")
		u.RawPath = ""
		s.base = u
	}

	switch {
	case o.CAFile != "" && o.InsecureSkipTLSVerify:
		errs.Add(f("insecureSkipTLSVerify"), "cannot be combined with caFile")
	case o.CAFile == "" && !o.InsecureSkipTLSVerify:
		errs.Add(f("caFile"), "required: the CA of the remote adapter's serving certificate (or insecureSkipTLSVerify: true, for tests only)")
	}
	if (o.ClientCert == "") != (o.ClientKey == "") {
		errs.Add(f("clientCert"), "clientCert and clientKey go together")
	}
	for name, path := range map[string]string{"caFile": o.CAFile, "tokenFile": o.TokenFile, "clientCert": o.ClientCert, "clientKey": o.ClientKey} {
		options.CheckFile(f(name), path, &errs)
	}
	if o.TokenFile == "" && o.ClientCert == "" {
		errs.Add(f("tokenFile"), "set tokenFile or clientCert and clientKey: the remote adapter authenticates this adapter")
	}

	if o.Timeout != nil {
		if o.Timeout.Duration <= 0 {
			errs.Add(f("timeout"), "must be positive, got %s", o.Timeout.Duration)
		}
		s.timeout = o.Timeout.Duration
	}
	if o.DiscoveryInterval != nil {
		if o.DiscoveryInterval.Duration < minDiscoveryInterval {
			errs.Add(f("discoveryInterval"), "must be at least %s, got %s", minDiscoveryInterval, o.DiscoveryInterval.Duration)
		}
		s.discoveryInterval = o.DiscoveryInterval.Duration
	}

	switch s.custom = o.Custom; s.custom {
	case "":
		s.custom = VersionAuto
	case VersionAuto, VersionV1beta2, VersionV1beta1, VersionDisabled:
	default:
		errs.Add(f("custom"), "must be auto, v1beta2, v1beta1 or disabled, got %q", o.Custom)
	}
	switch s.external = o.External; s.external {
	case "":
		s.external = VersionV1beta1
	case VersionV1beta1, VersionDisabled:
	default:
		errs.Add(f("external"), "must be v1beta1 or disabled, got %q", o.External)
	}
	if s.custom == VersionDisabled && s.external == VersionDisabled {
		errs.Add(f("custom"), "custom and external are both disabled: the provider would forward nothing")
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

// customVersions are the versions a custom query or discovery tries, in
// order, given what the last discovery found ("" when nothing yet).
func (s *settings) customVersions(discovered string) []string {
	switch {
	case s.custom != VersionAuto:
		return []string{s.custom}
	case discovered != "":
		return []string{discovered}
	}
	return []string{VersionV1beta2, VersionV1beta1}
}

func (s *settings) describe() string {
	return fmt.Sprintf("%s (custom %s, external %s)", s.base.Redacted(), s.custom, s.external)
}
