package ondemand

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// DefaultCacheTTL is how long a reading answers queries when neither the
// provider's nor the metric's cacheTTL is set: short against an HPA's 15s
// sync, long enough that a thousand autoscalers share one broker call.
const DefaultCacheTTL = 2 * time.Second

// Decode decodes raw strictly (unknown fields are errors) into out; errors
// name field. Empty options are an error: every queue backend needs some.
func Decode(field string, raw json.RawMessage, out any) error {
	if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
		return fmt.Errorf("%s: required", field)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	return nil
}

// Errors collects validation errors that each name their field.
type Errors struct{ errs []error }

// Add records one error for field.
func (e *Errors) Add(field, format string, args ...any) {
	e.errs = append(e.errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
}

// Err is every recorded error joined, or nil.
func (e *Errors) Err() error { return errors.Join(e.errs...) }

// MetricOptions are the fields every backend's metric entry has; backends
// embed it (json ",inline" is implied by embedding).
type MetricOptions struct {
	// Name is the external metric name.
	Name string `json:"name"`
	// Namespace scopes the metric's series to one namespace.
	Namespace string `json:"namespace,omitempty"`
	// Labels are added to every series.
	Labels map[string]string `json:"labels,omitempty"`
	// CacheTTL overrides the provider's cacheTTL for this metric.
	CacheTTL *metav1.Duration `json:"cacheTTL,omitempty"`
}

// Validate checks the common fields; field is the entry's path
// ("providers[0].options.metrics[2]").
func (m MetricOptions) Validate(field string, errs *Errors) {
	if m.Name == "" {
		errs.Add(field+".name", "required")
	} else if msgs := validation.IsDNS1123Subdomain(strings.ReplaceAll(strings.ToLower(m.Name), "_", "-")); len(msgs) > 0 {
		errs.Add(field+".name", "%q is not a valid metric name: %s", m.Name, strings.Join(msgs, "; "))
	}
	if m.Namespace != "" {
		if msgs := validation.IsDNS1123Label(m.Namespace); len(msgs) > 0 {
			errs.Add(field+".namespace", "%q: %s", m.Namespace, strings.Join(msgs, "; "))
		}
	}
	for k, v := range m.Labels {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			errs.Add(field+".labels", "label name %q: %s", k, strings.Join(msgs, "; "))
		}
		if k == NamespaceLabel {
			errs.Add(field+".labels", "use namespace, not a %q label", NamespaceLabel)
		}
		if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
			errs.Add(field+".labels", "label %s value %q: %s", k, v, strings.Join(msgs, "; "))
		}
	}
	if m.CacheTTL != nil && m.CacheTTL.Duration < 0 {
		errs.Add(field+".cacheTTL", "must not be negative, got %s", m.CacheTTL.Duration)
	}
}

// Metric builds the Metric these options describe, reading with read.
func (m MetricOptions) Metric(read func(ctx context.Context) ([]Series, error)) Metric {
	out := Metric{Name: m.Name, Namespace: m.Namespace, Labels: m.Labels, Read: read}
	if m.CacheTTL != nil {
		ttl := m.CacheTTL.Duration
		out.CacheTTL = &ttl
	}
	return out
}

// Secret is a credential read from a file (a mounted Secret) or from an
// environment variable, never written in the config itself.
type Secret struct {
	File string `json:"file,omitempty"`
	Env  string `json:"env,omitempty"`
}

// IsSet says whether a source is configured.
func (s *Secret) IsSet() bool { return s != nil && (s.File != "" || s.Env != "") }

// Validate checks that at most one source is set.
func (s *Secret) Validate(field string, errs *Errors) {
	if s != nil && s.File != "" && s.Env != "" {
		errs.Add(field, "set file or env, not both")
	}
}

// Value reads the secret; "" when unset. Trailing newlines of a file are
// dropped (kubectl create secret --from-file keeps them). Errors name the
// field and the source, never the value.
func (s *Secret) Value(field string) (string, error) {
	switch {
	case s == nil:
		return "", nil
	case s.File != "":
		b, err := os.ReadFile(s.File)
		if err != nil {
			return "", fmt.Errorf("%s.file: %w", field, err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	case s.Env != "":
		v, ok := os.LookupEnv(s.Env)
		if !ok {
			return "", fmt.Errorf("%s.env: environment variable %s is not set", field, s.Env)
		}
		return v, nil
	}
	return "", nil
}

// TLSOptions configure a backend connection's TLS.
type TLSOptions struct {
	// CAFile verifies the server; empty means the system roots.
	CAFile string `json:"caFile,omitempty"`
	// CertFile and KeyFile are a client certificate.
	CertFile string `json:"certFile,omitempty"`
	KeyFile  string `json:"keyFile,omitempty"`
	// ServerName overrides the name checked in the server's certificate.
	ServerName string `json:"serverName,omitempty"`
	// InsecureSkipVerify disables verification; for tests only.
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
}

// Validate checks the fields go together.
func (t *TLSOptions) Validate(field string, errs *Errors) {
	if t != nil && (t.CertFile == "") != (t.KeyFile == "") {
		errs.Add(field+".certFile", "certFile and keyFile go together")
	}
}

// Config builds the tls.Config; nil options give nil (no TLS).
func (t *TLSOptions) Config(field string) (*tls.Config, error) {
	if t == nil {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify} //nolint:gosec // opt-in, documented as tests only
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%s.caFile: %w", field, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s.caFile: no PEM certificate in %s", field, t.CAFile)
		}
		c.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%s.certFile: %w", field, err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}
