package app

import (
	"net/http"

	"k8s.io/klog/v2"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/apiserver"

	"github.com/metricscale/metricscale/adapter/fastpath"
)

// encodedCacheBytes bounds the fast path's cache of encoded large answers
// (see fastpath.Config.EncodedCacheBytes).
const encodedCacheBytes = 64 << 20

// metricSource is the provider registry, as the fast path asks it.
type metricSource interface {
	fastpath.ExternalSource
	fastpath.CustomSource
}

// withFastPath puts the fast path for external metric lists and custom metrics of
// selected objects in front of the
// generic handler chain, unless --fast-path=false or the generic config
// uses a filter the fast path would skip (then it says which).
func (o *Options) withFastPath(chain http.Handler, c *genericConfig, src metricSource) http.Handler {
	if !o.FastPath {
		return chain
	}
	if why := fastpath.Eligible(c); why != "" {
		klog.InfoS("Serving every request through the generic handler chain (no fast path)", "reason", why)
		return chain
	}
	klog.InfoS("Serving external metric lists and custom metrics of selected objects on the fast path (--fast-path)")
	return fastpath.New(chain, fastpath.Config{
		Authenticator:       c.Authentication.Authenticator,
		Authorizer:          c.Authorization.Authorizer,
		RequestInfoResolver: c.RequestInfoResolver,
		Serializer:          c.Serializer,
		APISerializer:       apiserver.Codecs,
		External:            src,
		Custom:              src,
		MaxInflight:         c.MaxRequestsInFlight,
		RequestTimeout:      c.RequestTimeout,
		WaitGroup:           c.NonLongRunningRequestWaitGroup,
		EncodedCacheBytes:   encodedCacheBytes,
	})
}
