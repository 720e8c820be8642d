package recordserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/options"
	netutils "k8s.io/utils/net"
)

// Options configure the HTTPS server of the recordings.
type Options struct {
	// BindAddress is host:port.
	BindAddress string
	// CertFile and KeyFile serve a certificate of your own; without them
	// one is generated (into CertDir when set, to keep it across restarts
	// and hand its CA to clients, in memory otherwise).
	CertFile, KeyFile, CertDir string
	// Kubeconfig reaches the API server for TokenReviews and
	// SubjectAccessReviews (in-cluster configuration when empty).
	Kubeconfig string
}

// Serve listens on the address, builds the delegated authenticator and
// authorizer, and serves h (given them) until ctx ends. It returns once
// serving started, or with the error that prevented it.
func (o *Options) Serve(ctx context.Context, h *Handler) error {
	host, port, err := net.SplitHostPort(o.BindAddress)
	if err != nil {
		return fmt.Errorf("--secure-bind-address %q: %w", o.BindAddress, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("--secure-bind-address %q: a port between 1 and 65535 is needed", o.BindAddress)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	ip := netutils.ParseIPSloppy(host)
	if ip == nil {
		return fmt.Errorf("--secure-bind-address %q: the host must be an IP address", o.BindAddress)
	}
	serving := options.NewSecureServingOptions()
	serving.BindAddress, serving.BindPort = ip, p
	serving.ServerCert.CertKey = options.CertKey{CertFile: o.CertFile, KeyFile: o.KeyFile}
	serving.ServerCert.CertDirectory, serving.ServerCert.PairName = o.CertDir, ""
	if o.CertDir != "" {
		serving.ServerCert.PairName = "record"
	}
	if err := serving.MaybeDefaultWithSelfSignedCerts("localhost", nil, []net.IP{netutils.ParseIPSloppy("127.0.0.1")}); err != nil {
		return fmt.Errorf("generating the serving certificate: %w", err)
	}
	var info *genericapiserver.SecureServingInfo
	if err := serving.ApplyTo(&info); err != nil {
		return fmt.Errorf("serving on %s: %w", o.BindAddress, err)
	}
	var authn genericapiserver.AuthenticationInfo
	an := options.NewDelegatingAuthenticationOptions()
	an.RemoteKubeConfigFile = o.Kubeconfig
	if err := an.ApplyTo(&authn, info, nil); err != nil {
		_ = info.Listener.Close()
		return fmt.Errorf("delegated authentication: %w", err)
	}
	var authz genericapiserver.AuthorizationInfo
	az := options.NewDelegatingAuthorizationOptions()
	// Every request is a resource request, authorized by the API server.
	az.AlwaysAllowPaths = nil
	az.RemoteKubeConfigFile = o.Kubeconfig
	if err := az.ApplyTo(&authz); err != nil {
		_ = info.Listener.Close()
		return fmt.Errorf("delegated authorization: %w", err)
	}
	if authn.Authenticator == nil || authz.Authorizer == nil {
		_ = info.Listener.Close()
		return errors.New("no delegated authenticator or authorizer: refusing to serve recordings")
	}
	h.Authenticator, h.Authorizer = authn.Authenticator, authz.Authorizer
	if _, _, err := info.Serve(h, 5*time.Second, ctx.Done()); err != nil {
		return fmt.Errorf("serving recordings on %s: %w", o.BindAddress, err)
	}
	return nil
}
