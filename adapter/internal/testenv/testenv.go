// Package testenv runs the real adapter in-process against a fake
// kube-apiserver (package fakekube), with generated certificates, for the
// integration test and the benchmark.
package testenv

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/metricscale/metricscale/adapter/app"
	"github.com/metricscale/metricscale/adapter/internal/fakekube"
	"github.com/metricscale/metricscale/certs"
	"github.com/metricscale/metricscale/hack/freeport"
)

// Tokens and users known to the fake API server.
const (
	AdapterToken = "adapter-token"
	HPAToken     = "hpa-token"
	NobodyToken  = "nobody-token"
	MonitorToken = "monitor-token"
	PushToken    = "push-token-0123456789"

	HPAUser     = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
	NobodyUser  = "system:serviceaccount:default:nobody"
	MonitorUser = "system:serviceaccount:monitoring:prometheus"
)

// Files are the generated TLS material and token files.
type Files struct {
	Dir           string
	CertDir       string // apiserver.crt/key, as --cert-dir expects
	CAFile        string // CA of the serving certificate
	FrontProxyCA  string // --requestheader-client-ca-file
	FrontProxy    tls.Certificate
	OtherClient   tls.Certificate // signed by the front-proxy CA, wrong name
	PushTokenFile string
	RootCAs       *x509.CertPool
}

// MakeFiles generates the certificates and the push token file in dir.
func MakeFiles(dir string) (*Files, error) {
	f := &Files{Dir: dir, CertDir: filepath.Join(dir, "serving")}
	ca, caPair, err := certs.NewCA("test-ca", time.Hour)
	if err != nil {
		return nil, err
	}
	if err := caPair.Write(f.CertDir, "ca"); err != nil {
		return nil, err
	}
	f.CAFile = filepath.Join(f.CertDir, "ca.crt")
	serving, err := ca.Issue("metricscale-adapter", certs.Serving, []string{"localhost", "127.0.0.1"}, nil, time.Hour)
	if err != nil {
		return nil, err
	}
	if err := serving.Write(f.CertDir, "apiserver"); err != nil {
		return nil, err
	}
	f.RootCAs = x509.NewCertPool()
	f.RootCAs.AppendCertsFromPEM(caPair.CertPEM)

	fpCA, fpPair, err := certs.NewCA("front-proxy-ca", time.Hour)
	if err != nil {
		return nil, err
	}
	fpDir := filepath.Join(dir, "front-proxy")
	if err := fpPair.Write(fpDir, "ca"); err != nil {
		return nil, err
	}
	f.FrontProxyCA = filepath.Join(fpDir, "ca.crt")
	for name, dst := range map[string]*tls.Certificate{"front-proxy-client": &f.FrontProxy, "intruder": &f.OtherClient} {
		p, err := fpCA.Issue(name, certs.Client, nil, nil, time.Hour)
		if err != nil {
			return nil, err
		}
		if *dst, err = tls.X509KeyPair(p.CertPEM, p.KeyPEM); err != nil {
			return nil, err
		}
	}
	f.PushTokenFile = filepath.Join(dir, "push-token")
	if err := os.WriteFile(f.PushTokenFile, []byte(PushToken+"\n"), 0o600); err != nil {
		return nil, err
	}
	return f, nil
}

// Client talks to the adapter's secure port.
type Client struct {
	Base  string
	HTTP  *http.Client
	Token string
	// Header is added to every request (request-header authentication).
	Header http.Header
}

// NewClient returns a client trusting the files' CA, optionally presenting
// a client certificate.
func (f *Files) NewClient(port int, token string, cert *tls.Certificate) *Client {
	tc := &tls.Config{RootCAs: f.RootCAs, MinVersion: tls.VersionTLS12}
	if cert != nil {
		tc.Certificates = []tls.Certificate{*cert}
	}
	return &Client{
		Base:  "https://127.0.0.1:" + strconv.Itoa(port),
		HTTP:  &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc, MaxIdleConnsPerHost: 64, ForceAttemptHTTP2: true}},
		Token: token,
	}
}

// Get fetches path and returns the status code and body.
func (c *Client) Get(ctx context.Context, path string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+path, nil)
	if err != nil {
		return 0, nil, err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	for k, v := range c.Header {
		req.Header[k] = v
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// Push posts body to the push endpoint at url.
func Push(ctx context.Context, url, token, contentType string, body []byte) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("POST %s: %w", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// Adapter is a running in-process adapter.
type Adapter struct {
	*Files
	Fake       *fakekube.Server
	SecurePort int
	PushURL    string
	cancel     context.CancelFunc
	done       chan error
}

// Start runs the adapter against a new fake API server, with the files in
// dir, and waits until /readyz answers 200. extraArgs are added to the
// command line (after its own flags, so they win), parsed as the adapter's
// main parses them.
func Start(ctx context.Context, dir string, extraArgs ...string) (*Adapter, error) {
	files, err := MakeFiles(dir)
	if err != nil {
		return nil, err
	}
	fake := fakekube.New()
	fake.AddToken(AdapterToken, fakekube.User{Name: "system:serviceaccount:metricscale:metricscale-adapter"})
	fake.AddToken(HPAToken, fakekube.User{Name: HPAUser, Groups: []string{"system:serviceaccounts"}})
	fake.AddToken(NobodyToken, fakekube.User{Name: NobodyUser, Groups: []string{"system:serviceaccounts"}})
	fake.AddToken(MonitorToken, fakekube.User{Name: MonitorUser})
	fake.Allow(HPAUser, "get", "custom.metrics.k8s.io", "*")
	fake.Allow(HPAUser, "list", "custom.metrics.k8s.io", "*")
	fake.Allow(HPAUser, "get", "external.metrics.k8s.io", "*")
	fake.Allow(HPAUser, "list", "external.metrics.k8s.io", "*")
	fake.AllowAll(MonitorUser)
	kubeconfig, err := fake.WriteKubeconfig(dir, AdapterToken)
	if err != nil {
		fake.Close()
		return nil, err
	}
	securePort, err := freeport.Get()
	if err != nil {
		fake.Close()
		return nil, err
	}
	for _, a := range extraArgs { // a --secure-port of the caller's is the one served
		if v, ok := strings.CutPrefix(a, "--secure-port="); ok {
			if securePort, err = strconv.Atoi(v); err != nil {
				fake.Close()
				return nil, fmt.Errorf("extra argument %q: %w", a, err)
			}
		}
	}
	pushPort, err := freeport.Get()
	if err != nil {
		fake.Close()
		return nil, err
	}
	args := []string{
		"--secure-port=" + strconv.Itoa(securePort), "--bind-address=127.0.0.1", "--cert-dir=" + files.CertDir,
		"--kubeconfig=" + kubeconfig, "--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig,
		"--push-bind-address=127.0.0.1", "--push-port=" + strconv.Itoa(pushPort), "--push-token-file=" + files.PushTokenFile,
		"--authentication-skip-lookup",
		"--requestheader-client-ca-file=" + files.FrontProxyCA, "--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User", "--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
	}
	// A leading argument that is not a flag (a program name, as
	// prometheus-adapter's chart passes) stays in front.
	if len(extraArgs) > 0 && !strings.HasPrefix(extraArgs[0], "-") {
		args = append([]string{extraArgs[0]}, args...)
		extraArgs = extraArgs[1:]
	}
	args = append(args, extraArgs...)
	fs := pflag.NewFlagSet("adapter", pflag.ContinueOnError)
	o := app.NewOptions(fs)
	if err := o.Parse(args); err != nil {
		fake.Close()
		return nil, fmt.Errorf("parsing flags: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	a := &Adapter{Files: files, Fake: fake, SecurePort: securePort,
		PushURL: "http://127.0.0.1:" + strconv.Itoa(pushPort) + "/push", cancel: cancel, done: make(chan error, 1)}
	go func() { a.done <- o.Run(ctx) }()

	anon := files.NewClient(securePort, "", nil)
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-a.done:
			cancel()
			fake.Close()
			return nil, fmt.Errorf("adapter exited before it was ready: %w", err)
		default:
		}
		code, _, err := anon.Get(ctx, "/readyz")
		if err == nil && code == http.StatusOK {
			return a, nil
		}
		if time.Now().After(deadline) {
			a.Stop()
			return nil, fmt.Errorf("adapter not ready after 60s: /readyz %d %v (fake API server: last unhandled %q)", code, err, fake.LastUnhandled())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop stops the adapter and the fake API server.
func (a *Adapter) Stop() {
	a.cancel()
	select {
	case <-a.done:
	case <-time.After(30 * time.Second):
	}
	a.Fake.CloseClientConnections()
	a.Fake.Close()
}
