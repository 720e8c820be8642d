package validation

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestObject: Object reports the HPA part's errors (after defaulting) and
// the MetricAutoscaler's own, and leaves the spec as it was.
func TestObject(t *testing.T) {
	t.Parallel()
	external := map[string]any{"type": "External", "external": map[string]any{
		"metric": map[string]any{"name": "queue"},
		"target": map[string]any{"type": "AverageValue", "averageValue": "10"},
	}}
	base := func() map[string]any {
		return map[string]any{
			"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
			"maxReplicas":    5,
			"metrics":        []any{external},
		}
	}
	for _, tc := range []struct {
		name   string
		mutate func(map[string]any)
		opts   Options
		want   []string // substrings of the described errors, in order
	}{
		{name: "valid", mutate: func(map[string]any) {}},
		{name: "zero min with the gate", mutate: func(s map[string]any) { s["minReplicas"] = 0 }, opts: Options{ScaleToZero: true}},
		{name: "zero min without the gate", mutate: func(s map[string]any) { s["minReplicas"] = 0 }, want: []string{"spec.minReplicas: must be greater than or equal to 1"}},
		{name: "hpa part and schedule", mutate: func(s map[string]any) {
			s["scaleTargetRef"].(map[string]any)["name"] = ""
			s["schedules"] = []any{map[string]any{"name": "day", "start": "not cron", "duration": "1h", "minReplicas": 2}}
		}, want: []string{"spec.scaleTargetRef.name: required", "spec.schedules[0]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			raw := base()
			tc.mutate(raw)
			spec := decodeSpec(t, raw)
			before := spec.DeepCopy()
			errs := Object(spec, field.NewPath("spec"), tc.opts)
			if len(errs) != len(tc.want) {
				t.Fatalf("errors %v, want %d", errs, len(tc.want))
			}
			for i, w := range tc.want {
				if got := Describe(errs[i]); !strings.Contains(got, w) {
					t.Errorf("error %d is %q, want it to contain %q", i, got, w)
				}
			}
			if !reflect.DeepEqual(spec, before) {
				t.Errorf("spec modified: %+v, was %+v", spec, before)
			}
		})
	}
}
