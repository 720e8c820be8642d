package providertest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/metricscale/metricscale/providers"
)

// BackendFragment loads hack/backends/TYPE.yaml, the local cluster's adapter
// config fragment for a queue backend, from a provider package's tests, and
// checks what hack/cluster.sh relies on: one provider named and typed TYPE
// with a 2s timeout, one route TYPE_* to it, options that f.Validate accepts
// (@CLUSTER_DIR@ replaced as the cluster does). It returns those options for
// the backend's own checks.
func BackendFragment(t *testing.T, typ string, f providers.Factory) json.RawMessage {
	t.Helper()
	path := filepath.Join("..", "..", "hack", "backends", typ+".yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data = []byte(strings.ReplaceAll(string(data), "@CLUSTER_DIR@", t.TempDir()))
	var cfg struct {
		Providers []struct {
			Name    string          `json:"name"`
			Type    string          `json:"type"`
			Timeout metav1.Duration `json:"timeout"`
			Options json.RawMessage `json:"options"`
		} `json:"providers"`
		Routes []struct {
			Metric   string `json:"metric"`
			Provider string `json:"provider"`
		} `json:"routes"`
	}
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(cfg.Providers) != 1 || cfg.Providers[0].Name != typ || cfg.Providers[0].Type != typ || cfg.Providers[0].Timeout.Duration != 2*time.Second {
		t.Fatalf("%s: providers %+v, want one named %s of type %s with timeout 2s", path, cfg.Providers, typ, typ)
	}
	if len(cfg.Routes) != 1 || cfg.Routes[0].Metric != typ+"_*" || cfg.Routes[0].Provider != typ {
		t.Errorf("%s: routes %+v, want %s_* to %s", path, cfg.Routes, typ, typ)
	}
	raw := cfg.Providers[0].Options
	if err := f.Validate("providers[0].options", raw); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return raw
}
