// Package secureserve builds the autoscaler's HTTPS servers as
// kube-controller-manager builds its secure port: a serving certificate
// (given, or self-signed), callers authenticated by the API server
// (TokenReview, or a client certificate of the CA it publishes) and
// authorized by it (SubjectAccessReview), with the autoscaler's
// kubeconfig or in-cluster configuration.
package secureserve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapifilters "k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/endpoints/request"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericfilters "k8s.io/apiserver/pkg/server/filters"
	"k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/kubernetes/scheme"
	netutils "k8s.io/utils/net"
)

// Options configure one HTTPS server.
type Options struct {
	// Flag names BindAddress in errors.
	Flag string
	// BindAddress is IP:port (an empty IP: every address).
	BindAddress string
	// CertFile and KeyFile serve a certificate of your own; without them
	// one is generated, into CertDir as PairName.crt and PairName.key when
	// CertDir is set (to keep it across restarts and hand it to clients as
	// their CA), in memory otherwise.
	CertFile, KeyFile, CertDir, PairName string
	// Kubeconfig reaches the API server for TokenReviews and
	// SubjectAccessReviews (in-cluster configuration when empty).
	Kubeconfig string
	// AlwaysAllowPaths are served to anyone, authenticated or not (the
	// probes' /healthz, /readyz, /livez); nil: none.
	AlwaysAllowPaths []string
	// Anonymous serves without delegated authentication and
	// authorization (the Server's Authenticator and Authorizer stay nil,
	// Kubeconfig is unused): for a server kube-apiserver itself calls, as
	// an admission webhook, to which it presents no credentials unless
	// its --admission-control-config-file gives some.
	Anonymous bool
}

// Server is a listening HTTPS server and the delegated authenticator and
// authorizer of its requests.
type Server struct {
	info          *genericapiserver.SecureServingInfo
	Authenticator authenticator.Request
	Authorizer    authorizer.Authorizer
	what          string
}

// Listen opens the listener and builds the authenticator and authorizer;
// what names the server in errors and logs.
func (o Options) Listen(what string) (*Server, error) {
	host, port, err := net.SplitHostPort(o.BindAddress)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", o.Flag, o.BindAddress, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return nil, fmt.Errorf("%s %q: a port between 1 and 65535 is needed", o.Flag, o.BindAddress)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	ip := netutils.ParseIPSloppy(host)
	if ip == nil {
		return nil, fmt.Errorf("%s %q: the host must be an IP address", o.Flag, o.BindAddress)
	}
	serving := options.NewSecureServingOptions()
	serving.BindAddress, serving.BindPort = ip, p
	serving.ServerCert.CertKey = options.CertKey{CertFile: o.CertFile, KeyFile: o.KeyFile}
	serving.ServerCert.CertDirectory, serving.ServerCert.PairName = o.CertDir, ""
	if o.CertDir != "" {
		serving.ServerCert.PairName = o.PairName
	}
	if err := serving.MaybeDefaultWithSelfSignedCerts("localhost", nil, []net.IP{netutils.ParseIPSloppy("127.0.0.1")}); err != nil {
		return nil, fmt.Errorf("generating the serving certificate of %s: %w", what, err)
	}
	var info *genericapiserver.SecureServingInfo
	if err := serving.ApplyTo(&info); err != nil {
		return nil, fmt.Errorf("serving %s on %s: %w", what, o.BindAddress, err)
	}
	if o.Anonymous {
		return &Server{info: info, what: what}, nil
	}
	var authn genericapiserver.AuthenticationInfo
	an := options.NewDelegatingAuthenticationOptions()
	an.RemoteKubeConfigFile = o.Kubeconfig
	if err := an.ApplyTo(&authn, info, nil); err != nil {
		_ = info.Listener.Close()
		return nil, fmt.Errorf("delegated authentication of %s: %w", what, err)
	}
	var authz genericapiserver.AuthorizationInfo
	az := options.NewDelegatingAuthorizationOptions()
	az.AlwaysAllowPaths = o.AlwaysAllowPaths
	az.RemoteKubeConfigFile = o.Kubeconfig
	if err := az.ApplyTo(&authz); err != nil {
		_ = info.Listener.Close()
		return nil, fmt.Errorf("delegated authorization of %s: %w", what, err)
	}
	if authn.Authenticator == nil || authz.Authorizer == nil {
		_ = info.Listener.Close()
		return nil, fmt.Errorf("no delegated authenticator or authorizer: refusing to serve %s", what)
	}
	return &Server{info: info, Authenticator: authn.Authenticator, Authorizer: authz.Authorizer, what: what}, nil
}

// Serve serves h until ctx ends; it returns once serving started.
func (s *Server) Serve(ctx context.Context, h http.Handler) error {
	if _, _, err := s.info.Serve(h, 5*time.Second, ctx.Done()); err != nil {
		return fmt.Errorf("serving %s: %w", s.what, err)
	}
	return nil
}

// Close closes the listener of a server that will not serve.
func (s *Server) Close() error {
	if s.info == nil || s.info.Listener == nil {
		return errors.New("no listener")
	}
	return s.info.Listener.Close()
}

// codecs write the filters' refusals as a metav1.Status.
var codecs = scheme.Codecs

// Authorized wraps h in kube-controller-manager's filter chain: each
// request authenticated (401 when no authenticator accepts it and anonymous
// requests are off) and authorized as a non-resource request of its path
// and verb (403 when refused).
func Authorized(h http.Handler, authn authenticator.Request, authz authorizer.Authorizer) http.Handler {
	resolver := &request.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")}
	h = genericapifilters.WithAuthorization(h, authz, codecs)
	h = genericapifilters.WithAuthentication(h, authn, genericapifilters.Unauthorized(codecs), nil, nil)
	h = genericapifilters.WithRequestInfo(h, resolver)
	h = genericapifilters.WithCacheControl(h)
	return genericfilters.WithPanicRecovery(h, resolver)
}
