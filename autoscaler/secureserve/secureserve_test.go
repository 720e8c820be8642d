package secureserve

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/metricscale/metricscale/certs/certstest"
	"github.com/metricscale/metricscale/hack/freeport"
)

// apiServer answers what the delegating authenticator and authorizer ask
// an API server: the token "scraper-token" is the ServiceAccount
// monitoring/prometheus, which may get the non-resource URL /metrics; any
// other token is not authenticated; the client CA ConfigMap is absent.
func apiServer(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /apis/authentication.k8s.io/v1/tokenreviews", func(w http.ResponseWriter, r *http.Request) {
		var tr authenticationv1.TokenReview
		if err := json.NewDecoder(r.Body).Decode(&tr); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if tr.Spec.Token == "scraper-token" {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "system:serviceaccount:monitoring:prometheus"}}
		}
		tr.APIVersion, tr.Kind = "authentication.k8s.io/v1", "TokenReview"
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&tr)
	})
	mux.HandleFunc("POST /apis/authorization.k8s.io/v1/subjectaccessreviews", func(w http.ResponseWriter, r *http.Request) {
		var sar authorizationv1.SubjectAccessReview
		if err := json.NewDecoder(r.Body).Decode(&sar); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		nr := sar.Spec.NonResourceAttributes
		sar.Status.Allowed = sar.Spec.User == "system:serviceaccount:monitoring:prometheus" && nr != nil && nr.Path == "/metrics" && nr.Verb == "get"
		sar.APIVersion, sar.Kind = "authorization.k8s.io/v1", "SubjectAccessReview"
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&sar)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"%s not found"}`, r.URL.Path)
	})
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: %q, insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: autoscaler}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
`, srv.URL)
	if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return kc
}

// TestListenDelegates: a server built by Listen with a self-signed
// certificate authenticates with TokenReviews and authorizes with
// SubjectAccessReviews of the kubeconfig's API server, behind Authorized:
// anonymous and unauthorized callers get 403, an unknown token 401, an
// authorized one 200; the always-allowed paths answer anyone.
func TestListenDelegates(t *testing.T) {
	t.Parallel()
	addr := "127.0.0.1:" + strconv.Itoa(freeport.For(t))
	srv, err := Options{Flag: "--bind-address", BindAddress: addr, Kubeconfig: apiServer(t), AlwaysAllowPaths: []string{"/healthz"}}.Listen("test")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	if err := srv.Serve(ctx, Authorized(ok, srv.Authenticator, srv.Authorizer)); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the self-signed certificate under test
	for _, tc := range []struct {
		path, token string
		want        int
	}{
		{"/metrics", "", http.StatusForbidden},
		{"/metrics", "forged", http.StatusUnauthorized},
		{"/metrics", "scraper-token", http.StatusOK},
		{"/debug/pprof/heap", "scraper-token", http.StatusForbidden},
		{"/healthz", "", http.StatusOK},
	} {
		req, _ := http.NewRequest(http.MethodGet, "https://"+addr+tc.path, nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("GET %s with token %q: %d, want %d", tc.path, tc.token, resp.StatusCode, tc.want)
		}
	}
}

// TestListenRefusesBadAddresses names the flag.
func TestListenRefusesBadAddresses(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"8080", "localhost:8080", "127.0.0.1:0", "127.0.0.1:http"} {
		_, err := Options{Flag: "--bind-address", BindAddress: addr}.Listen("test")
		if err == nil || !strings.Contains(err.Error(), "--bind-address") {
			t.Errorf("%q: %v, want an error naming --bind-address", addr, err)
		}
	}
}

// TestListenAnonymous: an Anonymous server needs no API server (no
// kubeconfig: the delegating authenticator would fail to build without
// one outside a cluster), serves its given certificate and answers callers
// without credentials.
func TestListenAnonymous(t *testing.T) {
	t.Parallel()
	dir, caPEM := certstest.Serving(t, "127.0.0.1")
	addr := "127.0.0.1:" + strconv.Itoa(freeport.For(t))
	srv, err := Options{Flag: "--webhook-port", BindAddress: addr, CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"), Anonymous: true}.Listen("test")
	if err != nil {
		t.Fatal(err)
	}
	if srv.Authenticator != nil || srv.Authorizer != nil {
		t.Error("an anonymous server has an authenticator or authorizer")
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := srv.Serve(ctx, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })); err != nil {
		t.Fatal(err)
	}
	client := certstest.Client(t, caPEM)
	resp, err := client.Get("https://" + addr + "/validate")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET without credentials: %d, want 200", resp.StatusCode)
	}
}
