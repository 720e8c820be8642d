package redis

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestHackBackendConfig loads the local cluster's fragment
// (hack/backends/redis.yaml) through Factory.Validate, as check-config does.
func TestHackBackendConfig(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "..", "hack", "backends", "redis.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// hack/cluster.sh substitutes its state folder
	data = []byte(strings.ReplaceAll(string(data), "@CLUSTER_DIR@", t.TempDir()))
	var cfg struct {
		Providers []struct {
			Name    string          `json:"name"`
			Type    string          `json:"type"`
			Timeout string          `json:"timeout"`
			Options json.RawMessage `json:"options"`
		} `json:"providers"`
		Routes []struct {
			Metric   string `json:"metric"`
			Provider string `json:"provider"`
		} `json:"routes"`
	}
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Providers) != 1 || cfg.Providers[0].Name != "redis" || cfg.Providers[0].Type != Type || cfg.Providers[0].Timeout != "2s" {
		t.Fatalf("providers = %+v, want one named redis of type %s with timeout 2s", cfg.Providers, Type)
	}
	if len(cfg.Routes) != 1 || cfg.Routes[0].Metric != "redis_*" || cfg.Routes[0].Provider != "redis" {
		t.Errorf("routes = %+v, want redis_* to redis", cfg.Routes)
	}
	raw := cfg.Providers[0].Options
	if err := (Factory{}).Validate("providers[0].options", raw); err != nil {
		t.Fatal(err)
	}
	s, err := parse("providers[0].options", raw)
	if err != nil {
		t.Fatal(err)
	}
	if s.addr != "127.0.0.1:16379" {
		t.Errorf("address %s, want 127.0.0.1:16379 (hack/backends/redis.sh)", s.addr)
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
