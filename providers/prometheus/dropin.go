package prometheus

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/metricscale/metricscale/providers/options"
	"github.com/metricscale/metricscale/providers/prometheus/rules"
)

// AdapterFlags are prometheus-adapter's command-line settings, so that
// `adapter --prometheus-url=URL --config=RULES.yaml` runs unchanged.
type AdapterFlags struct {
	PrometheusURL         string        // --prometheus-url
	AuthInCluster         bool          // --prometheus-auth-incluster
	AuthConfig            string        // --prometheus-auth-config
	CAFile                string        // --prometheus-ca-file
	ClientTLSCertFile     string        // --prometheus-client-tls-cert-file
	ClientTLSKeyFile      string        // --prometheus-client-tls-key-file
	TokenFile             string        // --prometheus-token-file
	Headers               []string      // --prometheus-header k=v, repeatable
	Verb                  string        // --prometheus-verb (GET)
	MetricsRelistInterval time.Duration // --metrics-relist-interval (10m)
	MetricsMaxAge         time.Duration // --metrics-max-age (the relist interval)
}

// IsAdapterConfig tells whether data is a prometheus-adapter rules file: it
// has rules, externalRules or resourceRules at the top and no providers.
func IsAdapterConfig(data []byte) bool {
	var top map[string]any
	if err := yaml.Unmarshal(data, &top); err != nil {
		return false
	}
	if _, ok := top["providers"]; ok {
		return false
	}
	for _, k := range []string{"rules", "externalRules", "resourceRules"} {
		if _, ok := top[k]; ok {
			return true
		}
	}
	return false
}

// ParseAdapterConfig parses a prometheus-adapter rules file strictly (an
// unknown key is an error, as prometheus-adapter's loader has it).
func ParseAdapterConfig(data []byte) (rules.Config, error) {
	var cfg rules.Config
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return cfg, fmt.Errorf("unable to parse metrics discovery config: %w", err)
	}
	return cfg, nil
}

// OptionsFromAdapterConfig turns a prometheus-adapter rules file and its
// command-line settings into Options, validated. Where prometheus-adapter
// uses --prometheus-ca-file and ignores --prometheus-auth-config, so does
// this.
func OptionsFromAdapterConfig(data []byte, f AdapterFlags) (Options, error) {
	cfg, err := ParseAdapterConfig(data)
	if err != nil {
		return Options{}, err
	}
	o := Options{
		URL:             f.PrometheusURL,
		CAFile:          f.CAFile,
		CertFile:        f.ClientTLSCertFile,
		KeyFile:         f.ClientTLSKeyFile,
		BearerTokenFile: f.TokenFile,
		AuthConfig:      f.AuthConfig,
		AuthInCluster:   f.AuthInCluster,
		Verb:            f.Verb,
		Config:          cfg,
	}
	if o.URL == "" {
		o.URL = "https://localhost" // prometheus-adapter's default
	}
	if o.CAFile != "" && (o.AuthConfig != "" || o.AuthInCluster) {
		klog.InfoS("Using --prometheus-ca-file; ignoring the kubeconfig auth, as prometheus-adapter does")
		o.AuthConfig, o.AuthInCluster = "", false
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		// prometheus-adapter uses a client certificate only with both
		o.CertFile, o.KeyFile = "", ""
	}
	if o.CAFile == "" {
		o.CertFile, o.KeyFile = "", "" // and only with a CA file
	}
	for _, h := range f.Headers {
		k, v, _ := strings.Cut(h, "=")
		if o.Headers == nil {
			o.Headers = map[string]options.Header{}
		}
		o.Headers[k] = options.Header{Value: v}
	}
	if f.MetricsRelistInterval > 0 {
		o.RelistInterval = &metav1.Duration{Duration: f.MetricsRelistInterval}
	}
	if f.MetricsMaxAge > 0 {
		o.MaxAge = &metav1.Duration{Duration: f.MetricsMaxAge}
	}
	if _, err := validate("options", o); err != nil {
		return Options{}, err
	}
	return o, nil
}
