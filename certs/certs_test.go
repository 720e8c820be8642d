package certs

import (
	"crypto/tls"
	"crypto/x509"
	"path/filepath"
	"testing"
	"time"
)

func TestServingAndClientCertificatesVerify(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, caPair, err := NewCA("test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := caPair.Write(dir, "ca"); err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadCA(filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	serving, err := loaded.Issue("adapter", Serving, []string{"metricscale-adapter.metricscale.svc", "127.0.0.1"}, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.Issue("front-proxy-client", Client, nil, []string{"system:masters"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPair.CertPEM)

	for _, tc := range []struct {
		pair  Pair
		usage x509.ExtKeyUsage
		name  string
	}{
		{serving, x509.ExtKeyUsageServerAuth, "metricscale-adapter.metricscale.svc"},
		{serving, x509.ExtKeyUsageServerAuth, "127.0.0.1"},
		{client, x509.ExtKeyUsageClientAuth, ""},
	} {
		kp, err := tls.X509KeyPair(tc.pair.CertPEM, tc.pair.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		leaf, _ := x509.ParseCertificate(kp.Certificate[0])
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: tc.name, KeyUsages: []x509.ExtKeyUsage{tc.usage}}); err != nil {
			t.Errorf("%s for %q: %v", leaf.Subject.CommonName, tc.name, err)
		}
	}
	kp, _ := tls.X509KeyPair(serving.CertPEM, serving.KeyPEM)
	leaf, _ := x509.ParseCertificate(kp.Certificate[0])
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "evil.example"}); err == nil {
		t.Error("the serving certificate verified for a name it does not carry")
	}
	if _, err := ca.Issue("x", Serving, nil, nil, time.Hour); err == nil {
		t.Error("a serving certificate without hosts was issued")
	}
	if _, err := LoadCA(filepath.Join(dir, "nope.crt"), filepath.Join(dir, "ca.key")); err == nil {
		t.Error("LoadCA of a missing file succeeded")
	}
}
