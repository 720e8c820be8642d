package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// certRequest is a key pair the real node needs beyond clusterutil's fixed PKI: its names
// depend on the host's address, which clusterutil does not know.
type certRequest struct {
	name           string // file stem in DIR/pki
	cn             string
	orgs           []string
	client, server bool
	dns            []string
	ips            []string
}

// realNodeCerts are the real node's key pairs, all signed by the cluster CA.
func realNodeCerts(nodeIP string) []certRequest {
	return []certRequest{
		// The API server's serving certificate with the host's address, where pods reach it
		// (through the kubernetes Service, 10.0.0.1, which the fixed one also names).
		{name: "apiserver-realnode", cn: "kube-apiserver", server: true,
			dns: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
			ips: []string{"127.0.0.1", "::1", "10.0.0.1", nodeIP}},
		{name: "kubelet-realnode", cn: RealNodeName, server: true,
			dns: []string{RealNodeName, "localhost"}, ips: []string{nodeIP, "127.0.0.1"}},
		// The kubelet's client certificate: the Node authorizer and NodeRestriction know it
		// by this name and group.
		{name: "node", cn: "system:node:" + RealNodeName, orgs: []string{"system:nodes"}, client: true},
		// system:kube-proxy is bound to the built-in system:node-proxier role.
		{name: "kube-proxy", cn: "system:kube-proxy", client: true},
		// CoreDNS reads Services, EndpointSlices and Namespaces: coreDNSManifests binds that.
		{name: "coredns", cn: coreDNSUser, client: true},
	}
}

// ensureCert writes DIR/pki/NAME.crt and .key signed by ca.crt unless a valid pair with the
// same names is there (a host that changed its address gets new certificates).
func ensureCert(pkiDir string, r certRequest) error {
	caCert, caKey, err := loadKeyPair(filepath.Join(pkiDir, "ca"))
	if err != nil {
		return fmt.Errorf("cluster CA: %w", err)
	}
	if cert, _, err := loadKeyPair(filepath.Join(pkiDir, r.name)); err == nil && certMatches(cert, caCert, r) {
		return nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		return err
	}
	now := time.Now().Add(-5 * time.Minute)
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: r.cn, Organization: r.orgs},
		NotBefore:    now,
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		DNSNames:     r.dns,
	}
	for _, ip := range r.ips {
		if parsed := net.ParseIP(ip); parsed != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, parsed)
		}
	}
	if r.client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	if r.server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("sign %s: %w", r.name, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	stem := filepath.Join(pkiDir, r.name)
	if err := writeFileAtomic(stem+".key", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	return writeFileAtomic(stem+".crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

// certMatches: signed by ca, valid for another day, with the request's subject and names.
func certMatches(cert, ca *x509.Certificate, r certRequest) bool {
	if cert.CheckSignatureFrom(ca) != nil || time.Until(cert.NotAfter) < 24*time.Hour ||
		cert.Subject.CommonName != r.cn || !slices.Equal(cert.Subject.Organization, r.orgs) ||
		!slices.Equal(cert.DNSNames, r.dns) {
		return false
	}
	var want []net.IP
	for _, ip := range r.ips {
		if parsed := net.ParseIP(ip); parsed != nil {
			want = append(want, parsed)
		}
	}
	return slices.EqualFunc(cert.IPAddresses, want, func(a, b net.IP) bool { return a.Equal(b) })
}

func loadKeyPair(stem string) (*x509.Certificate, any, error) {
	certPEM, err := os.ReadFile(stem + ".crt")
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := os.ReadFile(stem + ".key")
	if err != nil {
		return nil, nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", stem, err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, nil, err
	}
	return cert, pair.PrivateKey, nil
}
