package app

import (
	"fmt"
	"net/http"
	"sync"

	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/apiserver/pkg/server/mux"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/registry"
	"github.com/metricscale/metricscale/providers/telemetry"
)

// providerzPath reports each on-demand provider's backend health, one
// check per provider (/providerz/provider-NAME, ?verbose lists them all).
// It is not part of /readyz: one broker down must not make the adapter
// unready, which would take every metric of its APIServices away.
const providerzPath = "/providerz"

// backendHealthChecks are the providers that report their backend's
// health, as health checks.
func backendHealthChecks(reg *registry.Registry) []healthz.HealthChecker {
	var checks []healthz.HealthChecker
	for _, in := range reg.Instances() {
		if hr, ok := in.Provider.(providers.HealthReporter); ok {
			name := in.Provider.Name()
			checks = append(checks, healthz.NamedCheck("provider-"+name, func(*http.Request) error {
				if err := hr.Health(); err != nil {
					return fmt.Errorf("provider %q: %w", name, err)
				}
				return nil
			}))
		}
	}
	return checks
}

// installProviderz serves providerzPath behind the server's authentication
// and authorization (it may name backend hosts, so it is not anonymous). The
// checks follow the registry: a config reload that adds or removes a
// provider changes them.
func installProviderz(m *mux.PathRecorderMux, reg *registry.Registry) {
	h := &providerz{reg: reg}
	m.Handle(providerzPath, h)
	m.HandlePrefix(providerzPath+"/", h)
}

// providerz serves the health checks of the registry's current providers,
// rebuilt when a reload swapped them.
type providerz struct {
	reg *registry.Registry

	mu    sync.Mutex
	gen   uint64
	inner *mux.PathRecorderMux
}

func (p *providerz) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	p.mu.Lock()
	// The generation is read before the instances: a swap in between is
	// seen at the next request.
	if gen := p.reg.Generation(); p.inner == nil || gen != p.gen {
		inner := mux.NewPathRecorderMux("providerz")
		healthz.InstallPathHandler(inner, providerzPath, backendHealthChecks(p.reg)...)
		p.inner, p.gen = inner, gen
	}
	inner := p.inner
	p.mu.Unlock()
	inner.ServeHTTP(w, req)
}

// updateProviderUp sets metricscale_adapter_provider_up for every provider
// that reports its backend's health.
func updateProviderUp(reg *registry.Registry) {
	for _, in := range reg.Instances() {
		if hr, ok := in.Provider.(providers.HealthReporter); ok {
			up := 1.0
			if hr.Health() != nil {
				up = 0
			}
			telemetry.ProviderUp.WithLabelValues(in.Provider.Name()).Set(up)
		}
	}
}
