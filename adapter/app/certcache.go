package app

import (
	"crypto/x509"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	"k8s.io/apiserver/pkg/authentication/user"
)

// maxCertAuthEntries bounds the cache of proxied identities: the aggregator
// proxies for every user that reads the metrics APIs (autoscalers, a few
// people), and a flood of distinct ones only empties it.
const maxCertAuthEntries = 4096

// certAuthCache remembers, for ttl, a successful authentication of a request
// that comes with a client certificate and a request-header identity
// (X-Remote-User...) and no bearer token: every request the aggregator
// proxies. Verifying the front proxy's certificate chain (an ECDSA or RSA
// signature check) on every request was half of the adapter's CPU per
// proxied query (BenchmarkExternalQueryFrontProxy); the chain and the fast
// path share this one authenticator, so both answer alike.
//
// The key is the connection's verified certificate (the same object for
// every request on one TLS connection) and every request-header value the
// authenticator reads, so an answer is reused only for the same proxy
// connection asserting the same identity. Like the token review cache
// (--authentication-token-webhook-cache-ttl, whose value it uses), a
// change of the front-proxy CA or allowed names applies within ttl; an
// entry never outlives its certificate. Failures are never cached.
type certAuthCache struct {
	inner   authenticator.Request
	ttl     time.Duration
	headers *authenticatorfactory.RequestHeaderConfig
	now     func() time.Time

	mu sync.Mutex
	m  map[certAuthKey]certAuthEntry
}

type certAuthKey struct {
	cert *x509.Certificate
	ids  string // the request-header values, in a fixed order
}

type certAuthEntry struct {
	resp    *authenticator.Response
	expires time.Time
}

// cacheCertAuth wraps inner with a certAuthCache; without request-header
// authentication or with ttl 0 it returns inner.
func cacheCertAuth(inner authenticator.Request, headers *authenticatorfactory.RequestHeaderConfig, ttl time.Duration) authenticator.Request {
	if headers == nil || headers.UsernameHeaders == nil || ttl <= 0 {
		return inner
	}
	return &certAuthCache{inner: inner, ttl: ttl, headers: headers, now: time.Now, m: make(map[certAuthKey]certAuthEntry)}
}

// AuthenticateRequest implements authenticator.Request.
func (c *certAuthCache) AuthenticateRequest(req *http.Request) (*authenticator.Response, bool, error) {
	key, ok := c.key(req)
	if !ok {
		return c.inner.AuthenticateRequest(req)
	}
	now := c.now()
	c.mu.Lock()
	e, hit := c.m[key]
	c.mu.Unlock()
	if hit && now.Before(e.expires) {
		// As the request-header authenticator does on success: the
		// identity headers go, so that nothing downstream reads them.
		c.clearHeaders(req.Header)
		return e.resp, true, nil
	}
	resp, ok, err := c.inner.AuthenticateRequest(req)
	if err != nil || !ok || resp == nil || resp.User == nil || resp.User.GetName() == user.Anonymous {
		return resp, ok, err
	}
	expires := now.Add(c.ttl)
	if na := key.cert.NotAfter; na.Before(expires) {
		expires = na
	}
	c.mu.Lock()
	if len(c.m) >= maxCertAuthEntries {
		for k, old := range c.m {
			if !now.Before(old.expires) {
				delete(c.m, k)
			}
		}
		if len(c.m) >= maxCertAuthEntries {
			clear(c.m)
		}
	}
	c.m[key] = certAuthEntry{resp: resp, expires: expires}
	c.mu.Unlock()
	return resp, true, nil
}

// clearHeaders is headerrequest.ClearAuthenticationHeaders for the
// configured headers, some of which may be unset.
func (c *certAuthCache) clearHeaders(h http.Header) {
	for _, p := range []headerrequest.StringSliceProvider{c.headers.UsernameHeaders, c.headers.UIDHeaders, c.headers.GroupHeaders} {
		if p != nil {
			for _, name := range p.Value() {
				h.Del(name)
			}
		}
	}
	if c.headers.ExtraHeaderPrefixes != nil {
		for _, prefix := range c.headers.ExtraHeaderPrefixes.Value() {
			for name := range h {
				if len(name) >= len(prefix) && strings.EqualFold(name[:len(prefix)], prefix) {
					delete(h, name)
				}
			}
		}
	}
}

// key names a request the cache may answer: a client certificate, a
// request-header user name, no Authorization header.
func (c *certAuthCache) key(req *http.Request) (certAuthKey, bool) {
	if req.TLS == nil || len(req.TLS.PeerCertificates) == 0 || req.Header.Get("Authorization") != "" {
		return certAuthKey{}, false
	}
	var b strings.Builder
	hasUser := false
	add := func(names []string) bool {
		found := false
		for _, n := range names {
			vs := req.Header.Values(n)
			b.WriteString(n)
			for _, v := range vs {
				b.WriteByte(1)
				b.WriteString(v)
				found = found || v != ""
			}
			b.WriteByte(0)
		}
		return found
	}
	hasUser = add(c.headers.UsernameHeaders.Value())
	if !hasUser {
		return certAuthKey{}, false
	}
	if c.headers.UIDHeaders != nil {
		add(c.headers.UIDHeaders.Value())
	}
	if c.headers.GroupHeaders != nil {
		add(c.headers.GroupHeaders.Value())
	}
	if c.headers.ExtraHeaderPrefixes != nil {
		var extra []string
		for _, p := range c.headers.ExtraHeaderPrefixes.Value() {
			for name := range req.Header {
				if len(name) >= len(p) && strings.EqualFold(name[:len(p)], p) {
					extra = append(extra, name)
				}
			}
		}
		slices.Sort(extra)
		add(slices.Compact(extra))
	}
	return certAuthKey{cert: req.TLS.PeerCertificates[0], ids: b.String()}, true
}
