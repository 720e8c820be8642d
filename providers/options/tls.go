package options

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
)

// TLS configures a backend connection's TLS.
type TLS struct {
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

// Validate checks the fields go together and that the files, where they
// exist, are regular files.
func (t *TLS) Validate(field string, errs *Errors) {
	if t == nil {
		return
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		errs.Add(field+".certFile", "certFile and keyFile go together")
	}
	CheckFile(field+".caFile", t.CAFile, errs)
	CheckFile(field+".certFile", t.CertFile, errs)
	CheckFile(field+".keyFile", t.KeyFile, errs)
}

// Config builds the tls.Config; nil options give nil (no TLS). Files are
// read with ReadFile's bounds.
func (t *TLS) Config(field string) (*tls.Config, error) {
	if t == nil {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify} //nolint:gosec // opt-in, documented as tests only
	if t.CAFile != "" {
		pool, err := CertPool(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%s.caFile: %w", field, err)
		}
		c.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%s.certFile: %w", field, err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// CertPool reads a PEM bundle of CA certificates.
func CertPool(file string) (*x509.CertPool, error) {
	pem, err := ReadFile(context.Background(), file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no PEM certificate in %s", file)
	}
	return pool, nil
}

// KeyPair reads a client certificate and its key, as tls.LoadX509KeyPair
// does, with ReadFile's bounds.
func KeyPair(certFile, keyFile string) (tls.Certificate, error) {
	certPEM, err := ReadFile(context.Background(), certFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := ReadFile(context.Background(), keyFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	// X509KeyPair's errors describe the PEM blocks, never the key
	return tls.X509KeyPair(certPEM, keyPEM)
}
