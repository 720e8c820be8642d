package app

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
)

func TestRestrictAnonymous(t *testing.T) {
	t.Parallel()
	as := func(name string) authenticator.Request {
		return authenticator.RequestFunc(func(*http.Request) (*authenticator.Response, bool, error) {
			return &authenticator.Response{User: &user.DefaultInfo{Name: name}}, true, nil
		})
	}
	tests := []struct {
		user, path string
		ok         bool
	}{
		{user.Anonymous, "/healthz", true},
		{user.Anonymous, "/readyz/ping", true},
		{user.Anonymous, "/livez", true},
		{user.Anonymous, "/healthzz", false},
		{user.Anonymous, "/metrics", false},
		{user.Anonymous, "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/q", false},
		{"alice", "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/q", true},
		// a path that only looks like a health path once uncleaned
		{user.Anonymous, "/healthz/../apis/external.metrics.k8s.io/v1beta1/namespaces/default/q", false},
		{user.Anonymous, "/readyz/../../apis/custom.metrics.k8s.io/v1beta2", false},
		{user.Anonymous, "/healthz/%2e%2e/apis/custom.metrics.k8s.io/v1beta2", false},
		{user.Anonymous, "/healthz/..%2Fapis/custom.metrics.k8s.io/v1beta2", false},
		{user.Anonymous, "/healthz%2F..%2Fapis/custom.metrics.k8s.io/v1beta2", false},
		{user.Anonymous, "/livez/./../metrics", false},
		{user.Anonymous, "//healthz", false},
		{user.Anonymous, "/healthz//ping", false},
		{user.Anonymous, "/healthz/", false},
		{user.Anonymous, "/healthz/%70ing", false},
	}
	for _, tc := range tests {
		a := restrictAnonymous(as(tc.user), healthPaths)
		_, ok, err := a.AuthenticateRequest(httptest.NewRequest("GET", tc.path, nil))
		if err != nil || ok != tc.ok {
			t.Errorf("%s %s: ok=%v err=%v, want ok=%v", tc.user, tc.path, ok, err, tc.ok)
		}
	}
}

func TestValidateSelectors(t *testing.T) {
	t.Parallel()
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(299) })
	h := validateSelectors(next)
	tests := []struct {
		url  string
		code int
		want string // in a 400's message: the parameter and the selector
	}{
		{"/apis/custom.metrics.k8s.io/v1beta2/namespaces/d/pods/*/m?metricLabelSelector=a%3Db", 299, ""},
		{"/apis/custom.metrics.k8s.io/v1beta2/namespaces/d/pods/*/m?metricLabelSelector=%3D%3D", 400, `invalid metricLabelSelector \"==\"`},
		{"/apis/custom.metrics.k8s.io/v1beta2/namespaces/d/pods/*/m?labelSelector=a", 299, ""},
		{"/apis/custom.metrics.k8s.io/v1beta2/namespaces/d/pods/*/m?labelSelector=a+in+%28", 400, `invalid labelSelector \"a in (\"`},
		{"/apis/external.metrics.k8s.io/v1beta1/namespaces/d/m?labelSelector=queue%3Dq-1", 299, ""},
		{"/apis/external.metrics.k8s.io/v1beta1/namespaces/d/m?labelSelector=queue+in+%28", 400, `invalid labelSelector \"queue in (\"`},
		// metricLabelSelector is no parameter of external metrics
		{"/apis/external.metrics.k8s.io/v1beta1/namespaces/d/m?metricLabelSelector=%3D%3D", 299, ""},
		{"/healthz?metricLabelSelector=%3D%3D", 299, ""},
		{"/apis/apps/v1/deployments?labelSelector=%3D%3D", 299, ""},
	}
	for _, tc := range tests {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", tc.url, nil))
		if rec.Code != tc.code {
			t.Errorf("%s: %d, want %d (%s)", tc.url, rec.Code, tc.code, rec.Body)
		}
		if tc.code == 400 && !strings.Contains(rec.Body.String(), tc.want) {
			t.Errorf("%s: 400 does not say %s: %s", tc.url, tc.want, rec.Body)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--push-token-file=/x"}, ""},
		{[]string{"--push-port=0"}, ""},
		{[]string{}, "--push-token-file: required"},
		{[]string{"--push-token-file=/x", "--series-ttl=0s"}, "--series-ttl"},
		{[]string{"--push-token-file=/x", "--max-age=-1s"}, "--max-age"},
		{[]string{"--push-token-file=/x", "--push-port=70000"}, "--push-port"},
		{[]string{"--push-token-file=/x", "--push-bind-address=localhost"}, "--push-bind-address"},
		{[]string{"--push-token-file=/x", "--push-tls-cert-file=/c"}, "go together"},
		{[]string{"--push-token-file=/x", "--discovery-interval=0s"}, "--discovery-interval"},
		{[]string{"--push-token-file=/x", "--push-peers=http://127.0.0.1:6445,127.0.0.1:6446"}, ""},
		{[]string{"--push-token-file=/x", "--push-peers=https://a:1"}, "plain http"},
		{[]string{"--push-token-file=/x", "--push-peers=a:1", "--push-peers-dns=x", "--push-self-ip=10.0.0.1"}, "give one"},
	}
	for _, tc := range tests {
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		o := NewOptions(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		err := o.Validate()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%v: err = %v, want %q", tc.args, err, tc.want)
		}
	}
}
