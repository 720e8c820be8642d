package apiservice

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestExampleConfigs: the apiservice providers of the shipped configs — the
// federation overlay's and the local cluster's — are valid, and the
// cluster's points where TestFederation runs its remote adapter.
func TestExampleConfigs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file, name, url string
	}{
		{"../../manifests/federation/config.yaml", "keda", "https://keda-operator-metrics-apiserver.keda.svc:443"},
		{"../../hack/adapter-config.yaml", "federated", "https://127.0.0.1:6448"},
	} {
		data, err := os.ReadFile(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		var cfg struct {
			Providers []struct {
				Name    string          `json:"name"`
				Type    string          `json:"type"`
				Options json.RawMessage `json:"options"`
			} `json:"providers"`
		}
		if err := yaml.Unmarshal(data, &cfg); err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		found := false
		for i, p := range cfg.Providers {
			if p.Type != Type {
				continue
			}
			found = true
			raw := json.RawMessage(strings.ReplaceAll(string(p.Options), "@CLUSTER_DIR@", t.TempDir()))
			s, err := decodeOptions("providers[].options", raw)
			if err != nil {
				t.Errorf("%s: providers[%d]: %v", tc.file, i, err)
				continue
			}
			if p.Name != tc.name || s.base.String() != tc.url {
				t.Errorf("%s: provider %q at %s, want %q at %s", tc.file, p.Name, s.base, tc.name, tc.url)
			}
		}
		if !found {
			t.Errorf("%s has no %s provider", tc.file, Type)
		}
	}
}
