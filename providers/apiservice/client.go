package apiservice

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metricscale/metricscale/providers/backendhttp"
	"github.com/metricscale/metricscale/providers/ondemand"
	"github.com/metricscale/metricscale/providers/options"
)

// maxBody bounds a remote answer: a MetricValueList of maxItems items of
// about 500 bytes is 5 MB. It also bounds what decoding one answer costs
// (a 31 MiB answer of small items decoded to 516 MiB).
const maxBody = 8 << 20

// maxItems bounds the items of one answer, as ondemand bounds the series
// of the other backends: more is a 400 asking for a narrower selector.
const maxItems = ondemand.DefaultMaxItems

// fileCache re-reads a file when its size or modification time changes,
// so rotated certificates are picked up without a restart and an unchanged
// file is not parsed on every connection.
type fileCache[T any] struct {
	paths []string
	parse func(data [][]byte) (T, error)

	mu    sync.Mutex
	stamp string
	val   T
	err   error
}

func (c *fileCache[T]) get() (T, error) {
	var stamp strings.Builder
	for _, p := range c.paths {
		fi, err := os.Stat(p)
		if err != nil {
			var zero T
			return zero, err
		}
		fmt.Fprintf(&stamp, "%s:%d:%d;", p, fi.Size(), fi.ModTime().UnixNano())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if stamp.String() == c.stamp {
		return c.val, c.err
	}
	data := make([][]byte, len(c.paths))
	for i, p := range c.paths {
		b, err := options.ReadFile(context.Background(), p)
		if err != nil {
			var zero T
			return zero, err
		}
		data[i] = b
	}
	c.val, c.err = c.parse(data)
	c.stamp = stamp.String()
	return c.val, c.err
}

// tlsConfig builds the client's TLS configuration. The CA and the client
// certificate are read when a connection is made, not here: a file that is
// missing or bad makes queries fail with a 503 that says so, it does not
// keep the adapter from starting.
func tlsConfig(s *settings) *tls.Config {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.ServerName}
	if s.InsecureSkipTLSVerify {
		c.InsecureSkipVerify = true //nolint:gosec // explicit opt-in, refused together with caFile
	} else {
		ca := &fileCache[*x509.CertPool]{paths: []string{s.CAFile}, parse: func(d [][]byte) (*x509.CertPool, error) {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(d[0]) {
				return nil, fmt.Errorf("caFile %s: no PEM certificate", s.CAFile)
			}
			return pool, nil
		}}
		// Verified here rather than through RootCAs, so that a rotated CA
		// file applies to the next connection.
		c.InsecureSkipVerify = true //nolint:gosec // verified in VerifyConnection
		c.VerifyConnection = func(cs tls.ConnectionState) error {
			pool, err := ca.get()
			if err != nil {
				return fmt.Errorf("reading caFile: %w", err)
			}
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the remote presented no certificate")
			}
			opts := x509.VerifyOptions{DNSName: cs.ServerName, Roots: pool, Intermediates: x509.NewCertPool()}
			for _, ic := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(ic)
			}
			_, err = cs.PeerCertificates[0].Verify(opts)
			return err
		}
	}
	if s.ClientCert != "" {
		cert := &fileCache[*tls.Certificate]{paths: []string{s.ClientCert, s.ClientKey}, parse: func(d [][]byte) (*tls.Certificate, error) {
			c, err := tls.X509KeyPair(d[0], d[1])
			if err != nil {
				return nil, fmt.Errorf("clientCert %s, clientKey %s: %w", s.ClientCert, s.ClientKey, err)
			}
			return &c, nil
		}}
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return cert.get()
		}
	}
	return c
}

// newHTTPClient is the client for one remote. It follows no redirect: the
// token goes to the configured URL only. Requests are bounded by their
// context, not by the client.
func newHTTPClient(s *settings) *http.Client {
	return backendhttp.NewClient(&http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       tlsConfig(s),
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   10 * time.Second,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 0,
	})
}

// remoteError is an answer of the remote other than 200.
type remoteError struct {
	code int
	msg  string
}

func (e *remoteError) Error() string {
	return fmt.Sprintf("the remote adapter answered %d %s: %s", e.code, http.StatusText(e.code), e.msg)
}

// get sends GET path?query to the remote and returns the body of a 200; any
// other answer is a *remoteError carrying a short excerpt of the remote's
// message, a redirect one saying where it pointed (it is not followed).
func (p *Provider) get(ctx context.Context, path, query string) ([]byte, error) {
	u := *p.s.base
	u.Path += path
	u.RawQuery = query
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "metricscale-adapter/apiservice")
	if p.s.TokenFile != "" {
		// Read every time: a projected token rotates, and the read is a
		// small file on tmpfs next to a network round trip.
		b, err := options.ReadFile(req.Context(), p.s.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("reading tokenFile: %w", err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return nil, fmt.Errorf("tokenFile %s is empty", p.s.TokenFile)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	p.calls.Add(1)
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if backendhttp.IsRedirect(resp.StatusCode) {
		return nil, &remoteError{code: resp.StatusCode, msg: backendhttp.Redirect(resp)}
	}
	body, err := backendhttp.ReadBody(resp, maxBody)
	if err != nil {
		return nil, fmt.Errorf("reading the answer to %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &remoteError{code: resp.StatusCode, msg: statusMessage(body)}
	}
	return body, nil
}

// statusMessage is an excerpt of the message of a metav1.Status body, or
// of any other body: the remote's text reaches metric readers and logs.
func statusMessage(body []byte) string {
	var st metav1.Status
	if json.Unmarshal(body, &st) == nil && st.Message != "" {
		return backendhttp.Excerpt([]byte(st.Message))
	}
	return backendhttp.Excerpt(body)
}
