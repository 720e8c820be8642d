package app

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/anonymous"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	unionauthn "k8s.io/apiserver/pkg/authentication/request/union"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/path"
	unionauthz "k8s.io/apiserver/pkg/authorization/union"

	"github.com/metricscale/metricscale/autoscaler/secureserve"
)

// TestMetricsAuthorization: behind the delegated filters, /metrics answers
// 403 to an anonymous caller and to one the authorizer refuses, 401 to an
// invalid token, and 200 to a caller allowed `get` on the non-resource URL
// /metrics (the metricscale-metrics-scraper ClusterRole); the probes' paths
// answer anyone. The authenticator and authorizer stand in for the API
// server's TokenReview and SubjectAccessReview, composed as the delegating
// options compose them (tokens, then anonymous; the always-allowed paths,
// then the API server); hack/e2e's TestAutoscalerMetricsAuth runs the real ones.
func TestMetricsAuthorization(t *testing.T) {
	t.Parallel()
	tokens := authenticator.TokenFunc(func(_ context.Context, token string) (*authenticator.Response, bool, error) {
		switch token {
		case "scraper-token":
			return &authenticator.Response{User: &user.DefaultInfo{Name: "system:serviceaccount:monitoring:prometheus"}}, true, nil
		case "stranger-token":
			return &authenticator.Response{User: &user.DefaultInfo{Name: "system:serviceaccount:default:default"}}, true, nil
		}
		return nil, false, errors.New("invalid bearer token")
	})
	authn := unionauthn.NewFailOnError(unionauthn.New(bearertoken.New(tokens)), anonymous.NewAuthenticator(nil))
	paths, err := path.NewAuthorizer(probePaths)
	if err != nil {
		t.Fatal(err)
	}
	var asked []string
	sar := authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		asked = append(asked, a.GetUser().GetName()+" "+a.GetVerb()+" "+a.GetPath())
		if a.GetUser().GetName() == "system:serviceaccount:monitoring:prometheus" && !a.IsResourceRequest() && a.GetVerb() == "get" && a.GetPath() == "/metrics" {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionNoOpinion, "", nil
	})
	authz, err := unionauthz.New(unionauthz.NamedAuthorizer{AuthorizerName: "paths", Authorizer: paths}, unionauthz.NamedAuthorizer{AuthorizerName: "sar", Authorizer: sar})
	if err != nil {
		t.Fatal(err)
	}
	var ready atomic.Bool
	ready.Store(true)
	h := secureserve.Authorized(handler(&ready, checker{}, true), authn, authz)

	cases := []struct {
		path, token string
		want        int
	}{
		{"/metrics", "", http.StatusForbidden},
		{"/metrics", "stranger-token", http.StatusForbidden},
		{"/metrics", "forged", http.StatusUnauthorized},
		{"/metrics", "scraper-token", http.StatusOK},
		{"/debug/pprof/heap", "", http.StatusForbidden},
		{"/debug/pprof/heap", "scraper-token", http.StatusForbidden},
		{"/healthz", "", http.StatusOK},
		{"/livez", "", http.StatusOK},
		{"/readyz", "", http.StatusOK},
		{"/readyz/informer-sync", "", http.StatusOK},
	}
	for _, tc := range cases {
		req := httptest.NewRequest(http.MethodGet, tc.path, nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("GET %s with token %q: %d, want %d (%s)", tc.path, tc.token, rec.Code, tc.want, rec.Body.String())
		}
		if tc.want == http.StatusOK && tc.path == "/metrics" && !strings.Contains(rec.Body.String(), "metricscale_autoscaler_") {
			t.Errorf("GET /metrics served no metricscale_autoscaler_ series")
		}
	}
	// The probes' paths never reach the API server.
	for _, a := range asked {
		if !strings.Contains(a, "/metrics") && !strings.Contains(a, "/debug/pprof") {
			t.Errorf("asked the API server about %q", a)
		}
	}
}

// TestInsecureMetricsFlag: secure by default; --insecure-metrics asks for
// plain HTTP.
func TestInsecureMetricsFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want bool
	}{{nil, false}, {[]string{"--insecure-metrics"}, true}} {
		o := NewOptions()
		fs := pflag.NewFlagSet("autoscaler", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if o.InsecureMetrics != tc.want {
			t.Errorf("%v: InsecureMetrics %v, want %v", tc.args, o.InsecureMetrics, tc.want)
		}
	}
}
