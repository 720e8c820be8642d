// Command clusterutil does the small jobs of hack/cluster.sh that would otherwise need
// openssl, curl or ss: it writes the cluster's PKI and kubeconfigs, probes health
// endpoints and checks that ports are free. It uses the standard library only.
//
//	clusterutil pki -dir DIR
//	clusterutil kubeconfig -out FILE -server URL -ca FILE (-cert FILE -key FILE | -token-file FILE) [-user NAME]
//	clusterutil probe [-timeout 2s] [-insecure] [-ca FILE] [-cert FILE -key FILE] URL
//	clusterutil ports-free PORT...
//	clusterutil token
package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "pki":
		err = runPKI(args)
	case "kubeconfig":
		err = runKubeconfig(args)
	case "probe":
		err = runProbe(args)
	case "ports-free":
		err = runPortsFree(args)
	case "token":
		err = runToken()
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "clusterutil %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: clusterutil pki|kubeconfig|probe|ports-free|token [flags]")
	os.Exit(2)
}

// ---------------------------------------------------------------- PKI

// certSpec describes one key pair of the cluster's PKI.
type certSpec struct {
	name   string // file stem: <name>.crt and <name>.key
	signer string // file stem of the signing CA; "" for a self-signed CA
	cn     string
	orgs   []string
	client bool
	server bool
	dns    []string
	ips    []string
}

var pkiSpecs = []certSpec{
	{name: "ca", cn: "metricscale-local-ca"},
	{name: "front-proxy-ca", cn: "metricscale-local-front-proxy-ca"},
	{name: "apiserver", signer: "ca", cn: "kube-apiserver", server: true,
		dns: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		ips: []string{"127.0.0.1", "::1", "10.0.0.1"}},
	{name: "kubelet", signer: "ca", cn: "kwok-kubelet", server: true,
		dns: []string{"localhost"}, ips: []string{"127.0.0.1", "::1"}},
	{name: "admin", signer: "ca", cn: "kubernetes-admin", orgs: []string{"system:masters"}, client: true},
	{name: "kube-controller-manager", signer: "ca", cn: "system:kube-controller-manager", client: true},
	{name: "kube-scheduler", signer: "ca", cn: "system:kube-scheduler", client: true},
	{name: "kwok", signer: "ca", cn: "kwok", orgs: []string{"system:masters"}, client: true},
	{name: "metrics-server", signer: "ca", cn: "metrics-server", orgs: []string{"system:masters"}, client: true},
	{name: "apiserver-kubelet-client", signer: "ca", cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}, client: true},
	{name: "front-proxy-client", signer: "front-proxy-ca", cn: "front-proxy-client", client: true},
}

func runPKI(args []string) error {
	fs := flag.NewFlagSet("pki", flag.ExitOnError)
	dir := fs.String("dir", "", "folder for the certificates and keys")
	_ = fs.Parse(args)
	if *dir == "" {
		return errors.New("-dir is required")
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return err
	}
	for _, s := range pkiSpecs {
		if exists(filepath.Join(*dir, s.name+".crt")) && exists(filepath.Join(*dir, s.name+".key")) {
			continue
		}
		if err := writeCert(*dir, s); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	// Service-account token signing key pair.
	if !exists(filepath.Join(*dir, "sa.key")) || !exists(filepath.Join(*dir, "sa.pub")) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		if err := writeKey(filepath.Join(*dir, "sa.key"), key); err != nil {
			return err
		}
		pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
		if err != nil {
			return err
		}
		if err := writePEM(filepath.Join(*dir, "sa.pub"), "PUBLIC KEY", pub, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func writeCert(dir string, s certSpec) error {
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
		Subject:      pkix.Name{CommonName: s.cn, Organization: s.orgs},
		NotBefore:    now,
		NotAfter:     now.Add(2 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		DNSNames:     s.dns,
	}
	for _, ip := range s.ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	if s.client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	if s.server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	parent, signerKey := tmpl, any(key)
	if s.signer == "" {
		tmpl.IsCA = true
		tmpl.BasicConstraintsValid = true
		tmpl.KeyUsage |= x509.KeyUsageCertSign | x509.KeyUsageCRLSign
		tmpl.NotAfter = now.Add(10 * 365 * 24 * time.Hour)
	} else {
		parent, signerKey, err = loadCA(dir, s.signer)
		if err != nil {
			return err
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signerKey)
	if err != nil {
		return err
	}
	if err := writeKey(filepath.Join(dir, s.name+".key"), key); err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, s.name+".crt"), "CERTIFICATE", der, 0o644)
}

func loadCA(dir, name string) (*x509.Certificate, any, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, name+".crt"))
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, name+".key"))
	if err != nil {
		return nil, nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, nil, err
	}
	return cert, pair.PrivateKey, nil
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "EC PRIVATE KEY", der, 0o600)
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	return writeFileAtomic(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// ---------------------------------------------------------------- kubeconfig

func runKubeconfig(args []string) error {
	fs := flag.NewFlagSet("kubeconfig", flag.ExitOnError)
	out := fs.String("out", "", "kubeconfig file to write")
	server := fs.String("server", "", "API server URL")
	caFile := fs.String("ca", "", "cluster CA certificate")
	certFile := fs.String("cert", "", "client certificate")
	keyFile := fs.String("key", "", "client key")
	tokenFile := fs.String("token-file", "", "file holding a bearer token")
	user := fs.String("user", "user", "name of the user entry")
	_ = fs.Parse(args)
	if *out == "" || *server == "" || *caFile == "" {
		return errors.New("-out, -server and -ca are required")
	}
	ca, err := os.ReadFile(*caFile)
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Config\nclusters:\n- name: metricscale\n  cluster:\n")
	fmt.Fprintf(&b, "    server: %s\n    certificate-authority-data: %s\n", *server, base64.StdEncoding.EncodeToString(ca))
	fmt.Fprintf(&b, "users:\n- name: %s\n  user:\n", *user)
	switch {
	case *tokenFile != "":
		tok, err := os.ReadFile(*tokenFile)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "    token: %s\n", strings.TrimSpace(string(tok)))
	case *certFile != "" && *keyFile != "":
		cert, err := os.ReadFile(*certFile)
		if err != nil {
			return err
		}
		key, err := os.ReadFile(*keyFile)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "    client-certificate-data: %s\n    client-key-data: %s\n",
			base64.StdEncoding.EncodeToString(cert), base64.StdEncoding.EncodeToString(key))
	default:
		return errors.New("either -token-file or -cert and -key are required")
	}
	fmt.Fprintf(&b, "contexts:\n- name: metricscale\n  context:\n    cluster: metricscale\n    user: %s\n", *user)
	fmt.Fprintf(&b, "current-context: metricscale\n")
	return writeFileAtomic(*out, []byte(b.String()), 0o600)
}

// ---------------------------------------------------------------- probe

func runProbe(args []string) error {
	fs := flag.NewFlagSet("probe", flag.ExitOnError)
	timeout := fs.Duration("timeout", 2*time.Second, "request timeout")
	insecure := fs.Bool("insecure", false, "skip verification of the server certificate")
	caFile := fs.String("ca", "", "CA certificate to verify the server with")
	certFile := fs.String("cert", "", "client certificate")
	keyFile := fs.String("key", "", "client key")
	quiet := fs.Bool("q", false, "print nothing on success")
	_ = fs.Parse(args)
	if fs.NArg() != 1 {
		return errors.New("exactly one URL is required")
	}
	tlsConfig := &tls.Config{InsecureSkipVerify: *insecure} //nolint:gosec // loopback test cluster
	if *caFile != "" {
		ca, err := os.ReadFile(*caFile)
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return fmt.Errorf("no certificate in %s", *caFile)
		}
		tlsConfig.RootCAs = pool
	}
	if *certFile != "" {
		pair, err := tls.LoadX509KeyPair(*certFile, *keyFile)
		if err != nil {
			return err
		}
		tlsConfig.Certificates = []tls.Certificate{pair}
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig, Proxy: nil}}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fs.Arg(0), nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	body = bytes.TrimSpace(body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: HTTP %d: %s", fs.Arg(0), resp.StatusCode, lastLines(string(body), 5))
	}
	if !*quiet {
		fmt.Println(string(body))
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// ---------------------------------------------------------------- ports

// runPortsFree fails, naming them, when any of the TCP ports cannot be bound on
// 127.0.0.1 (someone listens there or on the wildcard address).
func runPortsFree(args []string) error {
	var busy []string
	for _, a := range args {
		port, err := strconv.Atoi(a)
		if err != nil || port <= 0 || port > 65535 {
			return fmt.Errorf("bad port %q", a)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", a))
		if err != nil {
			busy = append(busy, a)
			continue
		}
		_ = l.Close()
	}
	if len(busy) > 0 {
		fmt.Println(strings.Join(busy, " "))
		return fmt.Errorf("port(s) in use: %s", strings.Join(busy, " "))
	}
	return nil
}

// ---------------------------------------------------------------- token

func runToken() error {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	fmt.Println(hex.EncodeToString(b))
	return nil
}
