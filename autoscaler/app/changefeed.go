package app

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/metricscale/metricscale/autoscaler/feedclient"
	"github.com/metricscale/metricscale/providers/changefeed"
)

// ChangeFeedOptions say how to reach the adapter's change feed.
type ChangeFeedOptions struct {
	// URL of the adapter's secure port (its Service in a cluster); the
	// feed's path is added when the URL has none. Empty: no feed.
	URL string
	// CAFile verifies the adapter's serving certificate (default: the
	// kubeconfig's CA); InsecureSkipTLSVerify does not verify it.
	CAFile                string
	InsecureSkipTLSVerify bool
	// TokenFile, if set, is the bearer token sent instead of the
	// kubeconfig's credentials.
	TokenFile string
	// MinInterval bounds how often a change queues one object.
	MinInterval time.Duration
	// ReuseValues reuses the External metric values the feed vouches for
	// (the adapter covers their metric) instead of reading them at every
	// sync.
	ReuseValues bool
}

// AddFlags registers the change feed's flags.
func (o *ChangeFeedOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.URL, "change-feed-url", o.URL, "URL of the metricscale adapter's secure port (in a cluster its Service, https://metricscale-adapter.metricscale.svc); the autoscaler subscribes to its change feed ("+changefeed.Path+") and reconciles an object at once when a metric it reads changes. Empty: each object is reconciled at its sync period only")
	fs.StringVar(&o.CAFile, "change-feed-ca-file", o.CAFile, "CA file that verifies the adapter's serving certificate; default: the kubeconfig's certificate authority")
	fs.BoolVar(&o.InsecureSkipTLSVerify, "change-feed-insecure-skip-tls-verify", o.InsecureSkipTLSVerify, "do not verify the adapter's serving certificate (its credentials are still sent: for test clusters only)")
	fs.StringVar(&o.TokenFile, "change-feed-token-file", o.TokenFile, "file holding the bearer token to present to the adapter (re-read when it changes); default: the kubeconfig's credentials")
	fs.DurationVar(&o.MinInterval, "change-feed-min-interval", o.MinInterval, "reconcile one object at most this often because of the change feed; later changes wait for the end of the interval")
	fs.BoolVar(&o.ReuseValues, "change-feed-reuse-values", o.ReuseValues, "at a reconcile, reuse an External metric value read earlier while the adapter's change feed vouches that it has not changed (the adapter polls its metric and announces its every change): no read through the aggregator at most syncs. False: read every metric at every reconcile, as the HPA does")
}

// Validate checks the change feed's flags.
func (o *ChangeFeedOptions) Validate() error {
	var errs []error
	if o.MinInterval < 0 {
		errs = append(errs, fmt.Errorf("--change-feed-min-interval must not be negative, got %s", o.MinInterval))
	}
	if o.URL == "" {
		if o.CAFile != "" || o.InsecureSkipTLSVerify || o.TokenFile != "" {
			errs = append(errs, errors.New("--change-feed-ca-file, --change-feed-insecure-skip-tls-verify and --change-feed-token-file need --change-feed-url"))
		}
		return errors.Join(errs...)
	}
	if _, err := o.feedURL(); err != nil {
		errs = append(errs, err)
	}
	if o.CAFile != "" && o.InsecureSkipTLSVerify {
		errs = append(errs, errors.New("--change-feed-ca-file and --change-feed-insecure-skip-tls-verify exclude each other"))
	}
	return errors.Join(errs...)
}

// feedURL is the feed's full URL.
func (o *ChangeFeedOptions) feedURL() (*url.URL, error) {
	u, err := url.Parse(o.URL)
	if err != nil {
		return nil, fmt.Errorf("--change-feed-url: %w", err)
	}
	// Credentials go with every request: never in the clear.
	if u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("--change-feed-url: %q is not an https:// URL", o.URL)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("--change-feed-url: %q: no user, query or fragment", o.URL)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = changefeed.Path
	}
	return u, nil
}

// client is the feed's client: the kubeconfig's credentials (or the token
// file) sent to the adapter, whose certificate is verified with the CA
// file, the kubeconfig's CA, or not at all.
func (o *ChangeFeedOptions) client(kube *rest.Config) (*feedclient.Client, error) {
	u, hc, err := o.httpClient(kube)
	if err != nil {
		return nil, err
	}
	return feedclient.New(u, hc), nil
}

// httpClient is the feed's URL and HTTP client.
func (o *ChangeFeedOptions) httpClient(kube *rest.Config) (string, *http.Client, error) {
	u, err := o.feedURL()
	if err != nil {
		return "", nil, err
	}
	cfg := rest.CopyConfig(kube)
	cfg.Host, cfg.APIPath = u.Scheme+"://"+u.Host, ""
	cfg.Timeout = 0 // a feed lasts
	cfg.UserAgent = rest.DefaultKubernetesUserAgent() + " change-feed"
	cfg.ServerName = "" // the kubeconfig's names the API server
	switch {
	case o.CAFile != "":
		cfg.CAFile, cfg.CAData, cfg.Insecure = o.CAFile, nil, false
	case o.InsecureSkipTLSVerify:
		cfg.CAFile, cfg.CAData, cfg.Insecure = "", nil, true
	}
	if o.TokenFile != "" {
		cfg.BearerToken, cfg.BearerTokenFile = "", o.TokenFile
		cfg.Username, cfg.Password = "", ""
		cfg.ExecProvider, cfg.AuthProvider = nil, nil
		cfg.CertFile, cfg.KeyFile, cfg.CertData, cfg.KeyData = "", "", nil, nil
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return "", nil, fmt.Errorf("building the change feed's client: %w", err)
	}
	return u.String(), hc, nil
}
