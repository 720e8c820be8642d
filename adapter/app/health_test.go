package app

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/server/mux"
	"k8s.io/component-base/metrics/testutil"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/ondemand"
	"github.com/metricscale/metricscale/providers/registry"
	"github.com/metricscale/metricscale/providers/telemetry"
)

// TestProviderHealth: /providerz and provider_up follow an on-demand
// provider's last read, and a provider without a backend is not listed.
func TestProviderHealth(t *testing.T) {
	down := errors.New("dial tcp 127.0.0.1:16379: connection refused")
	var fail bool
	p, err := ondemand.New("redis", []ondemand.Metric{{Name: "redis_len", Read: func(context.Context) ([]ondemand.Series, error) {
		if fail {
			return nil, down
		}
		return []ondemand.Series{{Value: 1}}, nil
	}}}, ondemand.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mem, err := ondemand.New("static", []ondemand.Metric{{Name: "other", Read: func(context.Context) ([]ondemand.Series, error) { return nil, nil }}}, ondemand.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.New([]*registry.Instance{{Provider: p, Timeout: time.Second}, {Provider: noHealth{mem}, Timeout: time.Second}},
		[]registry.Route{{Metric: "redis_*", Provider: "redis"}, {Metric: "*", Provider: "static"}}, nil, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := mux.NewPathRecorderMux("test")
	installProviderz(m, reg)
	telemetry.Register()
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		m.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	read := func() {
		_, _ = p.GetExternalMetric(context.Background(), "default", nil, providers.ExternalMetricInfo{Metric: "redis_len"})
		updateProviderUp(reg)
	}
	up := func() float64 {
		v, err := testutil.GetGaugeMetricValue(telemetry.ProviderUp.WithLabelValues("redis"))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	read()
	if code, body := get(providerzPath + "?verbose"); code != http.StatusOK || !strings.Contains(body, "[+]provider-redis ok") || strings.Contains(body, "static") {
		t.Errorf("healthy: %d %q; want 200 listing provider-redis only", code, body)
	}
	if up() != 1 {
		t.Errorf("provider_up = %v while healthy", up())
	}

	fail = true
	read()
	code, body := get(providerzPath + "?verbose")
	if code != http.StatusInternalServerError || !strings.Contains(body, "[-]provider-redis failed") {
		t.Errorf("down: %d %q; want a failure for provider-redis", code, body)
	}
	if code, _ := get(providerzPath + "/provider-redis"); code != http.StatusInternalServerError {
		t.Errorf("/providerz/provider-redis while down: %d", code)
	}
	if up() != 0 {
		t.Errorf("provider_up = %v while down", up())
	}
}

// noHealth hides an ondemand provider's Health, like a memory store.
type noHealth struct{ *ondemand.Provider }

func (n noHealth) Health() {}
