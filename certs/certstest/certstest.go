// Package certstest issues serving certificates for tests.
package certstest

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"testing"
	"time"

	"github.com/metricscale/metricscale/certs"
)

// Serving issues a serving certificate for hosts from a new CA, valid for
// an hour, and writes it as tls.crt and tls.key in a new temporary
// directory. It returns the directory and the CA's certificate (PEM).
func Serving(t testing.TB, hosts ...string) (dir string, caPEM []byte) {
	t.Helper()
	dir = t.TempDir()
	ca, caPair, err := certs.NewCA(t.Name()+"-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.Issue(t.Name(), certs.Serving, hosts, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := pair.Write(dir, "tls"); err != nil {
		t.Fatal(err)
	}
	return dir, caPair.CertPEM
}

// Client is an HTTPS client that trusts only the CA caPEM.
func Client(t testing.TB, caPEM []byte) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("certstest: the CA certificate does not parse")
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
}
