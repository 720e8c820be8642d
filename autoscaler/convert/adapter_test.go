package convert_test

import (
	"strings"
	"testing"

	"github.com/metricscale/metricscale/autoscaler/convert"
)

func TestMergeAdapterConfig(t *testing.T) {
	t.Parallel()
	converted := &convert.AdapterConfig{
		Providers: []convert.AdapterProvider{{Name: "keda-redis", Type: "redis", Options: map[string]any{
			"address": "redis:6379",
			"metrics": []any{map[string]any{"name": "keda-ns-so-s0-redis", "type": "listLength", "key": "jobs"}},
		}}},
		Routes: []convert.AdapterRoute{{Metric: "keda-ns-so-s0-redis", Provider: "keda-redis", Kind: "external"}},
	}
	tests := []struct {
		name       string
		base       string
		wantRoutes []string // provider of each route, in order
		wantErr    string
	}{
		{name: "no base: the adapter's default memory provider stays the catch-all", base: "",
			wantRoutes: []string{"keda-redis", "memory"}},
		{name: "one provider, implicit route made explicit", base: "providers:\n- name: push\n  type: memory\n",
			wantRoutes: []string{"keda-redis", "push"}},
		{name: "a name clash renames the converted provider, routes first", base: `
providers:
- {name: keda-redis, type: memory}
- {name: mem, type: memory}
routes:
- {metric: "keda_*", provider: keda-redis}
- {metric: "*", provider: mem}
discovery: {maxMetrics: 50}
`, wantRoutes: []string{"keda-redis-2", "keda-redis", "mem"}},
		{name: "bad base", base: "providers: {}\n", wantErr: "providers: want a non-empty list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, err := convert.MergeAdapterConfig([]byte(tt.base), converted)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c := checkAdapterConfig(t, out)
			var got []string
			for _, r := range c.Routes {
				got = append(got, r.Provider)
			}
			if strings.Join(got, ",") != strings.Join(tt.wantRoutes, ",") {
				t.Errorf("routes to %v, want %v:\n%s", got, tt.wantRoutes, out)
			}
			if strings.Contains(tt.base, "maxMetrics: 50") && c.Discovery.MaxMetrics != 50 {
				t.Errorf("the base's discovery section was lost:\n%s", out)
			}
		})
	}
}
