package redis

import (
	"github.com/metricscale/metricscale/providers/providertest"
	"strings"
	"testing"
)

// TestHackBackendConfig loads the local cluster's fragment
// (hack/backends/redis.yaml) through Factory.Validate, as check-config does.
func TestHackBackendConfig(t *testing.T) {
	t.Parallel()
	s, err := decodeOptions("providers[0].options", providertest.BackendFragment(t, Type, Factory{}))
	if err != nil {
		t.Fatal(err)
	}
	if s.addr != "127.0.0.1:16379" {
		t.Errorf("address %s, want 127.0.0.1:16379 (hack/backends/redis.go)", s.addr)
	}
	list := false
	for _, m := range s.metrics {
		if !strings.HasPrefix(m.Name, "redis_") {
			t.Errorf("metric %s is not named redis_*: the route would not reach it", m.Name)
		}
		list = list || (m.Type == ListLength && m.Key == "e2e-jobs")
	}
	if !list {
		t.Error("no listLength metric over the key e2e-jobs")
	}
}
