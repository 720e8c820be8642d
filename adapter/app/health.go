package app

import (
	"fmt"
	"io"
	"net/http"

	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/apiserver/pkg/server/mux"
	"k8s.io/klog/v2"

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
// and authorization (it may name backend hosts, so it is not anonymous).
func installProviderz(m *mux.PathRecorderMux, reg *registry.Registry) {
	checks := backendHealthChecks(reg)
	if len(checks) == 0 {
		return
	}
	healthz.InstallPathHandler(m, providerzPath, checks...)
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

// closeProviders releases the connections of providers that hold some.
func closeProviders(reg *registry.Registry) {
	for _, in := range reg.Instances() {
		if c, ok := in.Provider.(io.Closer); ok {
			if err := c.Close(); err != nil {
				klog.ErrorS(err, "Closing provider", "provider", in.Provider.Name())
			}
		}
	}
}
