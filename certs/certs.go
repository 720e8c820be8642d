// Package certs makes the certificates the adapter needs, with the standard
// library only: a CA, a serving certificate for the adapter's secure port
// (the APIServices' caBundle is the CA), and client certificates (for tests
// that play the aggregator's front proxy). cmd/gencerts is its command line.
package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a certificate authority: its certificate and private key.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// Pair is a PEM-encoded certificate and private key.
type Pair struct {
	CertPEM []byte
	KeyPEM  []byte
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func newKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

func encodeKey(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("encoding key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// NewCA makes a self-signed CA valid for validity.
func NewCA(commonName string, validity time.Duration) (*CA, Pair, error) {
	key, err := newKey()
	if err != nil {
		return nil, Pair{}, fmt.Errorf("CA %s: generating key: %w", commonName, err)
	}
	sn, err := serial()
	if err != nil {
		return nil, Pair{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, Pair{}, fmt.Errorf("CA %s: signing: %w", commonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, Pair{}, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, Pair{}, err
	}
	return &CA{Cert: cert, Key: key}, Pair{CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), KeyPEM: keyPEM}, nil
}

// LoadCA reads a CA written by WriteCA.
func LoadCA(certFile, keyFile string) (*CA, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("reading CA certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("reading CA key: %w", err)
	}
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: no PEM certificate", certFile)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", certFile, err)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, fmt.Errorf("%s: no PEM key", keyFile)
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyFile, err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok || !cert.IsCA {
		return nil, fmt.Errorf("%s/%s: not a CA certificate and signing key", certFile, keyFile)
	}
	return &CA{Cert: cert, Key: signer}, nil
}

// Usage says what a leaf certificate is for.
type Usage int

// Leaf certificate usages.
const (
	Serving Usage = iota
	Client
)

// Issue signs a leaf certificate. Serving certificates get hosts as SANs
// (IP addresses or DNS names); client certificates get organizations as
// groups.
func (ca *CA) Issue(commonName string, usage Usage, hosts []string, organizations []string, validity time.Duration) (Pair, error) {
	key, err := newKey()
	if err != nil {
		return Pair{}, fmt.Errorf("certificate %s: generating key: %w", commonName, err)
	}
	sn, err := serial()
	if err != nil {
		return Pair{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: commonName, Organization: organizations},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	switch usage {
	case Serving:
		if len(hosts) == 0 {
			return Pair{}, errors.New("a serving certificate needs at least one host")
		}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	case Client:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return Pair{}, fmt.Errorf("certificate %s: signing: %w", commonName, err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return Pair{}, err
	}
	return Pair{CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), KeyPEM: keyPEM}, nil
}

// Write writes the pair as DIR/NAME.crt and DIR/NAME.key (the key mode 0600).
func (p Pair) Write(dir, name string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	crt := filepath.Join(dir, name+".crt")
	if err := os.WriteFile(crt, p.CertPEM, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", crt, err)
	}
	key := filepath.Join(dir, name+".key")
	if err := os.WriteFile(key, p.KeyPEM, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", key, err)
	}
	return nil
}
