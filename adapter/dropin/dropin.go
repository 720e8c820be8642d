// Package dropin lets the adapter stand in for prometheus-adapter: it
// accepts prometheus-adapter's command-line flags, reads a
// prometheus-adapter rules file given as --config as one prometheus
// provider serving every metric, and leaves the push endpoint off where
// prometheus-adapter's arguments could not have asked for it.
//
// The translation of a rules file itself is the prometheus provider's
// (prometheus.OptionsFromAdapterConfig) and the config package's
// (config.FromPrometheusAdapter); this package is what the adapter's
// command line adds around them.
package dropin

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/spf13/pflag"

	"github.com/metricscale/metricscale/adapter/config"
	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/prometheus"
)

// Flags are prometheus-adapter's command-line flags.
type Flags = prometheus.AdapterFlags

// AddFlags installs prometheus-adapter's flags in fs: those of its
// Prometheus client into f, and --disable-http2, the same as the API
// server's --disable-http2-serving, into disableHTTP2.
func AddFlags(fs *pflag.FlagSet, f *Flags, disableHTTP2 *bool) {
	fs.StringVar(&f.PrometheusURL, "prometheus-url", f.PrometheusURL, "drop-in for prometheus-adapter: URL of Prometheus; --config is then a prometheus-adapter rules file served by one prometheus provider")
	fs.BoolVar(&f.AuthInCluster, "prometheus-auth-incluster", f.AuthInCluster, "drop-in: authenticate to Prometheus with the in-cluster config")
	fs.StringVar(&f.AuthConfig, "prometheus-auth-config", f.AuthConfig, "drop-in: kubeconfig file with the credentials to reach Prometheus")
	fs.StringVar(&f.CAFile, "prometheus-ca-file", f.CAFile, "drop-in: CA file for Prometheus' TLS")
	fs.StringVar(&f.ClientTLSCertFile, "prometheus-client-tls-cert-file", f.ClientTLSCertFile, "drop-in: client certificate for Prometheus (with --prometheus-ca-file)")
	fs.StringVar(&f.ClientTLSKeyFile, "prometheus-client-tls-key-file", f.ClientTLSKeyFile, "drop-in: client key for Prometheus")
	fs.StringVar(&f.TokenFile, "prometheus-token-file", f.TokenFile, "drop-in: file holding a bearer token for Prometheus")
	fs.StringArrayVar(&f.Headers, "prometheus-header", f.Headers, "drop-in: extra header KEY=VALUE sent to Prometheus (repeatable)")
	fs.StringVar(&f.Verb, "prometheus-verb", f.Verb, "drop-in: HTTP verb of queries, GET or POST (GET switches to POST for long queries)")
	fs.DurationVar(&f.MetricsRelistInterval, "metrics-relist-interval", f.MetricsRelistInterval, "drop-in: how often the series are relisted for discovery (default 10m)")
	fs.DurationVar(&f.MetricsMaxAge, "metrics-max-age", f.MetricsMaxAge, "drop-in: how far back the relist looks; not below the relist interval (default: the relist interval)")
	fs.BoolVar(disableHTTP2, "disable-http2", *disableHTTP2, "drop-in: same as --disable-http2-serving (both default to true here: --disable-http2-serving=false serves HTTP/2)")
	for _, name := range ignoredFlags {
		fs.Bool(name, true, "drop-in: accepted and ignored (prometheus-adapter's chart passed --"+name+"=true); logs always go to standard error")
	}
}

// ignoredFlags are klog flags prometheus-adapter's chart has passed (its
// deployment template had --logtostderr=true in older versions), which
// component-base no longer has: logs go to standard error whatever they say.
var ignoredFlags = []string{"logtostderr"}

// IgnoredFlags returns the ignored flags set on fs's command line, as
// --name=value, for a log line.
func IgnoredFlags(fs *pflag.FlagSet) []string {
	var out []string
	for _, name := range ignoredFlags {
		if f := fs.Lookup(name); f != nil && f.Changed {
			out = append(out, "--"+name+"="+f.Value.String())
		}
	}
	return out
}

// TrimProgramName drops a leading argument naming the program
// ("/adapter"): prometheus-community's prometheus-adapter chart passes it as
// the first argument, which prometheus-adapter ignores (it parses its whole
// argv, the program name included, and takes no positional argument). name
// is the argument dropped, "" when there was none; any other positional
// argument is left for the caller to refuse.
func TrimProgramName(args []string) (rest []string, name string) {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") || path.Base(args[0]) != "adapter" {
		return args, ""
	}
	return args[1:], args[0]
}

// Decode is the one decoder of a config file's content, for the adapter and
// check-config: a prometheus-adapter rules file becomes one prometheus
// provider serving every metric (and metrics.k8s.io when it has
// resourceRules); anything else is the native config, whose provider types
// are factories. rulesFile says which it was.
func Decode(data []byte, f Flags, factories map[string]providers.Factory) (c *config.Config, rulesFile bool, err error) {
	if prometheus.IsAdapterConfig(data) {
		c, err := config.FromPrometheusAdapter(data, f)
		if err != nil {
			return nil, true, fmt.Errorf("as a prometheus-adapter rules file: %w", err)
		}
		return c, true, nil
	}
	c, err = config.Parse(data, factories)
	return c, false, err
}

// CheckURL refuses --prometheus-url where it cannot apply: without
// --config (haveConfig false), or with a --config that is not a
// prometheus-adapter rules file, whose prometheus providers name their own
// URL.
func CheckURL(f Flags, haveConfig, rulesFile bool) error {
	switch {
	case f.PrometheusURL == "" || rulesFile:
		return nil
	case !haveConfig:
		return errors.New("--prometheus-url: needs --config with a prometheus-adapter rules file")
	default:
		return errors.New("--prometheus-url: this is not a prometheus-adapter rules file; name the URL in its prometheus provider's options")
	}
}

// PushOff reports whether the push endpoint defaults to off: configFile is a
// prometheus-adapter rules file and nothing on the command line asked for
// the endpoint (pushAsked: --push-token-file or --push-port given), so that
// prometheus-adapter's arguments, which have no push token, start the
// adapter unchanged. An unreadable file is left for loading the config to
// report.
func PushOff(configFile string, pushAsked bool) bool {
	if configFile == "" || pushAsked {
		return false
	}
	data, err := os.ReadFile(configFile)
	return err == nil && prometheus.IsAdapterConfig(data)
}
