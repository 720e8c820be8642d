// Package app assembles the adapter: the aggregated API server (from
// custom-metrics-apiserver's AdapterBase) with delegated authentication and
// authorization, the provider registry, the object watch caches, and the push
// endpoint. cmd/adapter only calls Main.
package app

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/component-base/logs"
	"k8s.io/klog/v2"
	basecmd "sigs.k8s.io/custom-metrics-apiserver/pkg/cmd"

	"github.com/metricscale/metricscale/adapter/changehub"
	"github.com/metricscale/metricscale/adapter/config"
	"github.com/metricscale/metricscale/adapter/dropin"
	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/catalog"
	"github.com/metricscale/metricscale/providers/memory"
	"github.com/metricscale/metricscale/providers/push"
)

// Factories are the provider types the adapter knows, by config type.
func Factories() map[string]providers.Factory { return catalog.Factories() }

// DefaultSecurePort is --secure-port's default here (AdapterBase's is 443).
const DefaultSecurePort = 6443

// Options are the adapter's command-line options.
type Options struct {
	basecmd.AdapterBase

	ConfigFile string
	// ConfigCheckInterval is how often the config file's content is
	// compared, besides watching it; 0: only the watch.
	ConfigCheckInterval time.Duration
	SeriesTTL           time.Duration
	MaxAge              time.Duration

	PushBindAddress  string
	PushPort         int
	PushTokenFile    string
	PushTLSCertFile  string
	PushTLSKeyFile   string
	PushMaxBodyBytes int64
	PushPeersDNS     string
	PushPeers        string
	PushSelfIP       string
	PushMaxInflight  int

	// ChangeFeed serves the change feed (GET /changes on the secure port);
	// ChangeFeedHeartbeat is its heartbeat interval.
	ChangeFeed          bool
	ChangeFeedHeartbeat time.Duration

	// FastPath serves external metric lists ahead of the generic handler
	// chain (package fastpath).
	FastPath bool
	// GroupWideAuthorization asks whether a reader may read every metric
	// of the group before asking about the one it reads (adapter/authz).
	GroupWideAuthorization bool

	// Prometheus holds prometheus-adapter's command-line flags, for a
	// --config that is a prometheus-adapter rules file (package dropin).
	Prometheus dropin.Flags

	// pushListener, if set (tests), is used instead of binding.
	pushListener net.Listener
	// programName is the leading argument Parse dropped ("/adapter").
	programName string
}

// NewOptions returns the options with their defaults, with every flag
// installed in fs.
func NewOptions(fs *pflag.FlagSet) *Options {
	o := &Options{
		ConfigCheckInterval:    DefaultConfigCheckInterval,
		SeriesTTL:              memory.DefaultSeriesTTL,
		MaxAge:                 memory.DefaultMaxAge,
		PushBindAddress:        "0.0.0.0",
		PushPort:               6445,
		PushMaxBodyBytes:       push.DefaultMaxBodyBytes,
		PushMaxInflight:        push.DefaultMaxInflight,
		ChangeFeed:             true,
		ChangeFeedHeartbeat:    changehub.DefaultHeartbeat,
		FastPath:               true,
		GroupWideAuthorization: true,
	}
	o.Name = "metricscale-adapter"
	o.FlagSet = fs
	// The RESTMapper regenerates on this interval; AdapterBase defaults it to
	// zero, which would spin. We run the refresh ourselves (see run.go).
	o.DiscoveryInterval = 10 * time.Minute
	o.InstallFlags()
	ss := o.CustomMetricsAdapterServerOptions.SecureServing
	ss.BindPort = DefaultSecurePort
	ss.ServerCert.CertDirectory = ""
	ss.ServerCert.PairName = "apiserver"
	// HTTP/1.1 unless asked: per cached query it costs a third less CPU
	// than Go's HTTP/2 server, whose frames each go through the
	// connection's serve loop and a flush of their own, and it leaves
	// HTTP/2's stream-reset floods (CVE-2023-44487) out, as
	// kubebuilder's scaffolded controllers do. The aggregator keeps a pool
	// of connections to the adapter.
	ss.DisableHTTP2Serving = true
	// re-install the defaults shown by --help
	fs.Lookup("secure-port").DefValue = strconv.Itoa(DefaultSecurePort)
	fs.Lookup("cert-dir").DefValue = ""
	h2 := fs.Lookup("disable-http2-serving")
	h2.DefValue, h2.Usage = "true", "if true, serve HTTP/1.1 only (the default here); false also serves HTTP/2"

	fs.StringVar(&o.RemoteKubeConfigFile, "kubeconfig", o.RemoteKubeConfigFile,
		"kubeconfig of the cluster whose objects the metrics describe (watch pods, discovery); empty: in-cluster config. Same as --lister-kubeconfig.")
	fs.StringVar(&o.ConfigFile, "config", o.ConfigFile,
		"YAML file naming the providers and routing metrics to them; empty: one memory provider serving every metric. Watched: a valid change is applied live, an invalid one is refused and the running config kept")
	fs.DurationVar(&o.ConfigCheckInterval, "config-check-interval", o.ConfigCheckInterval,
		"besides watching --config, compare its content this often, in case a watch event was missed; 0 disables the periodic check")
	fs.DurationVar(&o.SeriesTTL, "series-ttl", o.SeriesTTL, "delete a pushed series not updated for this long (memory providers; options.seriesTTL overrides)")
	fs.DurationVar(&o.MaxAge, "max-age", o.MaxAge, "never serve a value older than this: queries get a 404 saying it is stale (memory providers; options.maxAge overrides)")
	fs.StringVar(&o.PushBindAddress, "push-bind-address", o.PushBindAddress, "address of the push endpoint (POST /push)")
	fs.IntVar(&o.PushPort, "push-port", o.PushPort, "port of the push endpoint; 0 disables it")
	fs.StringVar(&o.PushTokenFile, "push-token-file", o.PushTokenFile, "file holding the bearer token pushers must send; required when the push endpoint is enabled")
	fs.StringVar(&o.PushTLSCertFile, "push-tls-cert-file", o.PushTLSCertFile, "serve the push endpoint over TLS with this certificate (with --push-tls-key-file); default plain HTTP")
	fs.StringVar(&o.PushTLSKeyFile, "push-tls-key-file", o.PushTLSKeyFile, "private key for --push-tls-cert-file")
	fs.StringVar(&o.PushPeersDNS, "push-peers-dns", o.PushPeersDNS, "DNS name of a headless Service listing every replica; each accepted push is forwarded to the others so all replicas hold every series")
	fs.StringVar(&o.PushSelfIP, "push-self-ip", o.PushSelfIP, "this replica's IP, left out of --push-peers-dns (the pod IP)")
	fs.StringVar(&o.PushPeers, "push-peers", o.PushPeers, "instead of --push-peers-dns, a fixed list of every replica's push endpoint, http://host:port,... (may name this replica, which is recognised and skipped)")
	fs.Int64Var(&o.PushMaxBodyBytes, "push-max-body-bytes", o.PushMaxBodyBytes, "largest push body accepted")
	fs.IntVar(&o.PushMaxInflight, "push-max-inflight", o.PushMaxInflight, "pushes handled at once; more get 429 with Retry-After")
	fs.BoolVar(&o.ChangeFeed, "change-feed", o.ChangeFeed, "serve the change feed on the secure port (GET /changes: which pushed series changed, for the autoscaler's --change-feed-url), to clients authorized for the non-resource URL /changes")
	fs.DurationVar(&o.ChangeFeedHeartbeat, "change-feed-heartbeat", o.ChangeFeedHeartbeat, "interval of the change feed's heartbeats while nothing changes, by which subscribers notice a dead connection")
	fs.BoolVar(&o.FastPath, "fast-path", o.FastPath, "serve external metric lists (GET, JSON or protobuf) ahead of the generic API server filters, with the same authentication, authorization, answers and metrics; anything else, and every request when audit, tracing, flow control, CORS or HSTS is configured, takes the full chain")
	fs.BoolVar(&o.GroupWideAuthorization, "authorization-group-wide", o.GroupWideAuthorization, "allow a read of custom or external metrics when the reader may read resource * of the group in every namespace (one cached SubjectAccessReview per reader for all its metrics) before asking about the metric itself; turn off when an authorizer in kube-apiserver denies single metrics to readers it allows resource *")
	dropin.AddFlags(fs, &o.Prometheus, &ss.DisableHTTP2Serving)
	logs.AddFlags(fs)
	return o
}

// Validate checks the adapter's own flags.
func (o *Options) Validate() error {
	var errs []error
	if o.SeriesTTL <= 0 {
		errs = append(errs, fmt.Errorf("--series-ttl: must be positive, got %s", o.SeriesTTL))
	}
	if o.MaxAge <= 0 {
		errs = append(errs, fmt.Errorf("--max-age: must be positive, got %s", o.MaxAge))
	}
	if o.ConfigCheckInterval < 0 {
		errs = append(errs, fmt.Errorf("--config-check-interval: must not be negative, got %s", o.ConfigCheckInterval))
	}
	if o.ChangeFeed && o.ChangeFeedHeartbeat < time.Second {
		errs = append(errs, fmt.Errorf("--change-feed-heartbeat: must be at least 1s, got %s", o.ChangeFeedHeartbeat))
	}
	if o.DiscoveryInterval <= 0 {
		errs = append(errs, fmt.Errorf("--discovery-interval: must be positive, got %s", o.DiscoveryInterval))
	}
	if o.PushPort < 0 || o.PushPort > 65535 {
		errs = append(errs, fmt.Errorf("--push-port: %d is not a port", o.PushPort))
	}
	if o.PushPort != 0 || o.pushListener != nil {
		if o.PushTokenFile == "" {
			errs = append(errs, errors.New("--push-token-file: required while the push endpoint is enabled (it never accepts anonymous writes); --push-port=0 disables it"))
		}
		if net.ParseIP(o.PushBindAddress) == nil {
			errs = append(errs, fmt.Errorf("--push-bind-address: %q is not an IP address", o.PushBindAddress))
		}
		if o.PushPeersDNS != "" && net.ParseIP(o.PushSelfIP) == nil {
			errs = append(errs, fmt.Errorf("--push-self-ip: %q is not an IP address; it is required with --push-peers-dns", o.PushSelfIP))
		}
		if o.PushPeersDNS != "" && o.PushTLSCertFile != "" {
			errs = append(errs, errors.New("--push-peers-dns: forwarding to peers over TLS is not supported"))
		}
		if o.PushPeers != "" {
			if _, err := push.ParseStaticPeers(o.PushPeers); err != nil {
				errs = append(errs, err)
			}
			if o.PushPeersDNS != "" {
				errs = append(errs, errors.New("--push-peers and --push-peers-dns: give one"))
			}
			if o.PushTLSCertFile != "" {
				errs = append(errs, errors.New("--push-peers: forwarding to peers over TLS is not supported"))
			}
		}
		if (o.PushTLSCertFile == "") != (o.PushTLSKeyFile == "") {
			errs = append(errs, errors.New("--push-tls-cert-file and --push-tls-key-file go together"))
		}
	}
	return errors.Join(errs...)
}

// readToken reads the push token file.
func readToken(file string) (string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("reading --push-token-file %s: %w", file, err)
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" {
		return "", fmt.Errorf("--push-token-file %s is empty", file)
	}
	return tok, nil
}

// loadConfig reads --config, or returns the default config; data is the
// file's content (nil without --config).
func (o *Options) loadConfig() (cfg *config.Config, data []byte, err error) {
	if o.ConfigFile == "" {
		if err := dropin.CheckURL(o.Prometheus, false, false); err != nil {
			return nil, nil, err
		}
		return config.Default(), nil, nil
	}
	data, err = os.ReadFile(o.ConfigFile)
	if err != nil {
		return nil, nil, fmt.Errorf("reading config %s: %w", o.ConfigFile, err)
	}
	c, err := o.parseConfig(data)
	if err != nil {
		return nil, nil, fmt.Errorf("config %s: %w", o.ConfigFile, err)
	}
	return c, data, nil
}

// parseConfig parses and validates a --config file's content, at start and
// at every reload.
func (o *Options) parseConfig(data []byte) (*config.Config, error) {
	c, rulesFile, err := dropin.Decode(data, o.Prometheus, Factories())
	if err != nil {
		return nil, err
	}
	if err := dropin.CheckURL(o.Prometheus, true, rulesFile); err != nil {
		return nil, err
	}
	return c, nil
}

// dropInDefaults logs what Parse accepted and ignored from
// prometheus-adapter's command line, and turns the push endpoint off for a
// prometheus-adapter rules file without --push-token-file, so
// prometheus-adapter's arguments start the adapter unchanged; an explicit
// --push-port keeps it on.
func (o *Options) dropInDefaults() {
	if o.programName != "" {
		klog.InfoS("Ignoring the leading argument: a program name, as prometheus-adapter's chart passes it", "argument", o.programName)
	}
	if o.FlagSet != nil {
		for _, f := range dropin.IgnoredFlags(o.FlagSet) {
			klog.InfoS("Ignoring prometheus-adapter's flag: logs always go to standard error", "flag", f)
		}
	}
	pushAsked := o.PushTokenFile != "" || o.pushListener != nil || (o.FlagSet != nil && o.FlagSet.Changed("push-port"))
	if dropin.PushOff(o.ConfigFile, pushAsked) {
		klog.InfoS("prometheus-adapter rules file without --push-token-file: the push endpoint is off", "config", o.ConfigFile)
		o.PushPort = 0
	}
}
