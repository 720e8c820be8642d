package recordserver

import (
	"context"

	"github.com/metricscale/metricscale/autoscaler/secureserve"
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
	srv, err := secureserve.Options{
		Flag: "--secure-bind-address", BindAddress: o.BindAddress,
		CertFile: o.CertFile, KeyFile: o.KeyFile, CertDir: o.CertDir, PairName: "record",
		Kubeconfig: o.Kubeconfig,
		// Every request is a resource request, authorized by the API server.
		AlwaysAllowPaths: nil,
	}.Listen("recordings")
	if err != nil {
		return err
	}
	h.Authenticator, h.Authorizer = srv.Authenticator, srv.Authorizer
	return srv.Serve(ctx, h)
}
