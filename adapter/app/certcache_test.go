package app

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	"k8s.io/apiserver/pkg/authentication/user"
)

// countingAuth answers like a request-header authenticator (the user from
// X-Remote-User, when a client certificate came) and counts its calls.
type countingAuth struct {
	calls int
	fail  bool
}

func (a *countingAuth) AuthenticateRequest(req *http.Request) (*authenticator.Response, bool, error) {
	a.calls++
	if a.fail {
		return nil, false, errors.New("x509: certificate signed by unknown authority")
	}
	if req.TLS == nil || len(req.TLS.PeerCertificates) == 0 {
		return nil, false, nil
	}
	name := req.Header.Get("X-Remote-User")
	if name == "" {
		name = user.Anonymous
	}
	return &authenticator.Response{User: &user.DefaultInfo{Name: name, Groups: req.Header.Values("X-Remote-Group")}}, true, nil
}

func TestCertAuthCache(t *testing.T) {
	t.Parallel()
	headers := &authenticatorfactory.RequestHeaderConfig{
		UsernameHeaders:     headerrequest.StaticStringSlice{"X-Remote-User"},
		UIDHeaders:          headerrequest.StaticStringSlice{"X-Remote-Uid"},
		GroupHeaders:        headerrequest.StaticStringSlice{"X-Remote-Group"},
		ExtraHeaderPrefixes: headerrequest.StaticStringSlice{"X-Remote-Extra-"},
	}
	inner := &countingAuth{}
	now := time.Unix(1_000_000, 0)
	c := cacheCertAuth(inner, headers, 10*time.Second).(*certAuthCache)
	c.now = func() time.Time { return now }

	proxy := &x509.Certificate{NotAfter: now.Add(time.Hour)}
	other := &x509.Certificate{NotAfter: now.Add(time.Hour)}
	request := func(cert *x509.Certificate, h http.Header) *http.Request {
		req := httptest.NewRequest("GET", "/apis/external.metrics.k8s.io/v1beta1/namespaces/d/m", nil)
		if cert != nil {
			req.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
		}
		for k, v := range h {
			req.Header[k] = v
		}
		return req
	}
	hpa := http.Header{"X-Remote-User": {"hpa"}, "X-Remote-Group": {"a", "b"}, "X-Remote-Extra-Scopes": {"x"}}
	auth := func(t *testing.T, req *http.Request, wantUser string, wantCalls int) {
		t.Helper()
		resp, ok, err := c.AuthenticateRequest(req)
		got := ""
		if ok && resp != nil {
			got = resp.User.GetName()
		}
		if got != wantUser {
			t.Errorf("user %q (ok %v, err %v), want %q", got, ok, err, wantUser)
		}
		if inner.calls != wantCalls {
			t.Errorf("%d calls of the authenticator, want %d", inner.calls, wantCalls)
		}
	}

	auth(t, request(proxy, hpa), "hpa", 1)
	cachedReq := request(proxy, hpa)
	auth(t, cachedReq, "hpa", 1) // cached
	// as the request-header authenticator does, the identity headers go
	for _, h := range []string{"X-Remote-User", "X-Remote-Group", "X-Remote-Extra-Scopes"} {
		if v := cachedReq.Header.Values(h); len(v) != 0 {
			t.Errorf("a cached answer left %s: %v on the request", h, v)
		}
	}
	// any identity header differing is another identity
	auth(t, request(proxy, http.Header{"X-Remote-User": {"hpa"}, "X-Remote-Group": {"a"}, "X-Remote-Extra-Scopes": {"x"}}), "hpa", 2)
	auth(t, request(proxy, http.Header{"X-Remote-User": {"hpa"}, "X-Remote-Group": {"a", "b"}, "X-Remote-Extra-Scopes": {"y"}}), "hpa", 3)
	auth(t, request(proxy, http.Header{"X-Remote-User": {"hpa"}, "X-Remote-Group": {"a", "b"}, "X-Remote-Extra-Scopes": {"x"}, "X-Remote-Extra-More": {"1"}}), "hpa", 4)
	auth(t, request(proxy, http.Header{"X-Remote-User": {"hpa"}, "X-Remote-Uid": {"7"}, "X-Remote-Group": {"a", "b"}, "X-Remote-Extra-Scopes": {"x"}}), "hpa", 5)
	auth(t, request(proxy, http.Header{"X-Remote-User": {"other"}, "X-Remote-Group": {"a", "b"}, "X-Remote-Extra-Scopes": {"x"}}), "other", 6)
	// another connection's certificate is verified anew
	auth(t, request(other, hpa), "hpa", 7)
	// a bearer token, no certificate or no request-header user: never cached
	withToken := hpa.Clone()
	withToken.Set("Authorization", "Bearer t")
	auth(t, request(proxy, withToken), "hpa", 8)
	auth(t, request(proxy, withToken), "hpa", 9)
	auth(t, request(nil, hpa), "", 10)
	auth(t, request(nil, hpa), "", 11)
	auth(t, request(proxy, nil), user.Anonymous, 12)
	auth(t, request(proxy, nil), user.Anonymous, 13)

	// expiry after ttl
	now = now.Add(11 * time.Second)
	auth(t, request(proxy, hpa), "hpa", 14)
	auth(t, request(proxy, hpa), "hpa", 14)
	// never past the certificate's end
	short := &x509.Certificate{NotAfter: now.Add(2 * time.Second)}
	auth(t, request(short, hpa), "hpa", 15)
	now = now.Add(3 * time.Second)
	auth(t, request(short, hpa), "hpa", 16)

	// failures are not remembered
	inner.fail = true
	if _, ok, err := c.AuthenticateRequest(request(&x509.Certificate{NotAfter: now.Add(time.Hour)}, hpa)); ok || err == nil {
		t.Errorf("failure: ok %v, err %v", ok, err)
	}
	inner.fail = false
	inner.calls = 0
	bad := &x509.Certificate{NotAfter: now.Add(time.Hour)}
	inner.fail = true
	_, _, _ = c.AuthenticateRequest(request(bad, hpa))
	_, _, _ = c.AuthenticateRequest(request(bad, hpa))
	if inner.calls != 2 {
		t.Errorf("a failed verification was cached: %d calls for 2 requests", inner.calls)
	}

	if got := cacheCertAuth(inner, nil, time.Second); got != authenticator.Request(inner) {
		t.Error("wrapped without request-header authentication")
	}
	if got := cacheCertAuth(inner, headers, 0); got != authenticator.Request(inner) {
		t.Error("wrapped with a ttl of 0")
	}
}

func TestCertAuthCacheBound(t *testing.T) {
	t.Parallel()
	headers := &authenticatorfactory.RequestHeaderConfig{UsernameHeaders: headerrequest.StaticStringSlice{"X-Remote-User"}}
	c := cacheCertAuth(&countingAuth{}, headers, time.Minute).(*certAuthCache)
	cert := &x509.Certificate{NotAfter: time.Now().Add(time.Hour)}
	for i := range maxCertAuthEntries + 10 {
		req := httptest.NewRequest("GET", "/", nil)
		req.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
		req.Header.Set("X-Remote-User", "u"+string(rune('a'+i%26))+time.Duration(i).String())
		if _, ok, _ := c.AuthenticateRequest(req); !ok {
			t.Fatal("not authenticated")
		}
	}
	if n := len(c.m); n > maxCertAuthEntries {
		t.Errorf("%d entries, bound %d", n, maxCertAuthEntries)
	}
}
