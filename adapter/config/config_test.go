package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/memory"
)

var factories = map[string]providers.Factory{memory.Type: memory.Factory{}}

func TestParseValid(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(`
providers:
- name: mem
  type: memory
  options: {maxAge: 30s}
- name: queues
  type: memory
  timeout: 2s
routes:
- metric: "queue_*"
  provider: queues
  kind: external
- metric: "*"
  provider: mem
discovery:
  maxMetrics: 50
`), factories)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Providers) != 2 || c.Providers[0].Timeout.Duration != DefaultTimeout || c.Providers[1].Timeout.Duration != 2*time.Second {
		t.Errorf("providers = %+v", c.Providers)
	}
	if string(c.Providers[0].Options) != `{"maxAge":"30s"}` {
		t.Errorf("options = %s", c.Providers[0].Options)
	}
	if len(c.Routes) != 2 || c.Routes[0].Kind != KindExternal || c.Discovery.MaxMetrics != 50 {
		t.Errorf("config = %+v", c)
	}
}

func TestSingleProviderGetsCatchAllRoute(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte("providers: [{name: m, type: memory}]"), factories)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Routes) != 1 || c.Routes[0].Metric != "*" || c.Routes[0].Provider != "m" || c.Discovery.MaxMetrics != DefaultMaxMetrics {
		t.Errorf("defaults = %+v", c)
	}
}

func TestParseErrorsNameTheField(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, doc string
		want      []string
	}{
		{"unknown type", "providers: [{name: a, type: memory}, {name: b, type: foo}]\nroutes: [{metric: '*', provider: a}]",
			[]string{`providers[1].type: unknown "foo" (known: memory)`}},
		{"missing fields", "providers: [{type: memory}, {name: b}]",
			[]string{"providers[0].name: required", "providers[1].type: required", "routes: required"}},
		{"bad name, duplicate", "providers: [{name: A_b, type: memory}, {name: x, type: memory}, {name: x, type: memory}]\nroutes: [{metric: '*', provider: x}]",
			[]string{`providers[0].name: invalid "A_b"`, `providers[2].name: duplicate "x"`}},
		{"bad routes", "providers: [{name: a, type: memory}]\nroutes: [{metric: '[', provider: a}, {metric: x, provider: nope}, {metric: y, provider: a, kind: both}, {provider: a}]",
			[]string{`routes[0].metric: invalid pattern "["`, `routes[1].provider: unknown provider "nope"`, `routes[2].kind: unknown "both"`, "routes[3].metric: required"}},
		{"bad options", "providers: [{name: a, type: memory, options: {maxAge: -1s}}]",
			[]string{"providers[0].options.maxAge: must be positive"}},
		{"unknown option", "providers: [{name: a, type: memory, options: {foo: 1}}]",
			[]string{"providers[0].options", `unknown field "foo"`}},
		{"timeout", "providers: [{name: a, type: memory, timeout: 5m}]",
			[]string{"providers[0].timeout: 5m0s is out of range"}},
		{"discovery", "providers: [{name: a, type: memory}]\ndiscovery: {maxMetrics: 1000000}",
			[]string{"discovery.maxMetrics: 1000000 is out of range"}},
		{"unknown top-level field", "providers: [{name: a, type: memory}]\nroute: []",
			[]string{`unknown field "route"`}},
		{"no providers", "routes: []", []string{"providers: at least one provider is required"}},
		{"empty", "  \n", []string{"empty config"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tc.doc), factories)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml"), factories); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file: %v", err)
	}
	f := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(f, []byte("providers: [{name: a, type: bogus}]"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(f, factories); err == nil || !strings.Contains(err.Error(), "c.yaml: providers[0].type") {
		t.Errorf("invalid file: %v", err)
	}
	for _, example := range []string{"testdata/two-memory.yaml"} {
		if _, err := Load(example, factories); err != nil {
			t.Errorf("%s: %v", example, err)
		}
	}
	if err := Default().Validate(factories); err != nil {
		t.Errorf("default config invalid: %v", err)
	}
}
