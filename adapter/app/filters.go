package app

import (
	"net/http"
	"path"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/apiserver"
)

type genericConfig = genericapiserver.Config

// healthPaths are the only paths an anonymous request may reach (kubelet
// probes carry no credentials); they are also the default
// --authorization-always-allow-paths.
var healthPaths = []string{"/healthz", "/readyz", "/livez"}

// restrictAnonymous wraps the delegated authenticator so that a request no
// authenticator recognised is refused (401) everywhere but the health
// paths, instead of reaching authorization as system:anonymous.
func restrictAnonymous(inner authenticator.Request, allowed []string) authenticator.Request {
	return authenticator.RequestFunc(func(req *http.Request) (*authenticator.Response, bool, error) {
		resp, ok, err := inner.AuthenticateRequest(req)
		if ok && resp != nil && resp.User != nil && resp.User.GetName() == user.Anonymous && !anonymousAllowed(req, allowed) {
			return nil, false, nil
		}
		return resp, ok, err
	})
}

// anonymousAllowed reports whether an anonymous request may go on: its path
// must be clean (path.Clean leaves it unchanged: no "..", ".", "//" or
// trailing slash), carry no percent-encoding (so no encoded "/" or "."
// reaches the router as something else), and be one of the allowed paths or
// below one. "/healthz/../apis/..." is not a health path.
func anonymousAllowed(req *http.Request, allowed []string) bool {
	if req.URL == nil {
		return false
	}
	p := req.URL.Path
	if p == "" || path.Clean(p) != p || strings.Contains(req.URL.EscapedPath(), "%") || strings.Contains(req.URL.RawPath, "%") {
		return false
	}
	return pathAllowed(p, allowed)
}

func pathAllowed(p string, allowed []string) bool {
	for _, a := range allowed {
		if p == a || strings.HasPrefix(p, a+"/") {
			return true
		}
	}
	return false
}

// validateSelectors answers 400, naming the parameter and the selector, for
// a metrics API request whose labelSelector or (custom metrics)
// metricLabelSelector does not parse: custom-metrics-apiserver would answer
// 500 for the latter, and a 400 without the selector for the former.
func validateSelectors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		p := req.URL.Path
		custom := strings.HasPrefix(p, "/apis/custom.metrics.k8s.io/")
		if (custom || strings.HasPrefix(p, "/apis/external.metrics.k8s.io/")) && strings.Contains(req.URL.RawQuery, "elector") {
			params := []string{"labelSelector"}
			if custom {
				params = append(params, "metricLabelSelector")
			}
			query := req.URL.Query()
			for _, param := range params {
				for _, v := range query[param] {
					if _, err := labels.Parse(v); err != nil {
						bad := apierrors.NewBadRequest("invalid " + param + " " + quote(v) + ": " + err.Error())
						responsewriters.ErrorNegotiated(bad, apiserver.Codecs, schema.GroupVersion{}, w, req)
						return
					}
				}
			}
		}
		next.ServeHTTP(w, req)
	})
}

func quote(s string) string { return "\"" + strings.ReplaceAll(s, "\"", "\\\"") + "\"" }
