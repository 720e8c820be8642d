package v1alpha1_test

import (
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1/crdtest"
	"github.com/metricscale/metricscale/autoscaler/validation/validationtest"
)

func loadCRD(t *testing.T) *crdValidator {
	t.Helper()
	return &crdValidator{crdtest.Load(t, "../../../manifests/autoscaler/crd.yaml")}
}

// crdValidator validates a spec in a MetricAutoscaler as the API server
// would on create.
type crdValidator struct{ *crdtest.Validator }

func (v *crdValidator) validate(t *testing.T, spec map[string]any) field.ErrorList {
	t.Helper()
	_, _, errs := v.Admit(map[string]any{
		"apiVersion": "autoscaling.metricscale.dev/v1alpha1", "kind": "MetricAutoscaler",
		"metadata": map[string]any{"name": "web", "namespace": "default"},
		"spec":     spec,
	})
	return errs
}

var index = regexp.MustCompile(`\[\d+\]`)

// TestCRDRejectsInvalidSpecs: the CRD rejects every spec of the table the
// simulator's validation is tested with, at (or above) the same field.
func TestCRDRejectsInvalidSpecs(t *testing.T) {
	t.Parallel()
	v := loadCRD(t)
	table, err := validationtest.InvalidSpecs()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range table {
		t.Run(tc.Name, func(t *testing.T) {
			errs := v.validate(t, tc.Spec)
			if len(errs) == 0 {
				t.Fatalf("accepted; the API server rejects it at %s (%s)", tc.Field, tc.Detail)
			}
			want := index.ReplaceAllString(tc.Field, "")
			for _, e := range errs {
				if f := index.ReplaceAllString(e.Field, ""); f != "spec" && strings.HasPrefix(want, f) {
					return
				}
			}
			t.Errorf("rejected, but not at %s: %v", tc.Field, errs.ToAggregate())
		})
	}
}

// TestCRDAcceptsValidSpecs: the table's base, a minimal spec, scale to
// zero and the README's example pass.
func TestCRDAcceptsValidSpecs(t *testing.T) {
	t.Parallel()
	v := loadCRD(t)
	table, err := validationtest.InvalidSpecs()
	if err != nil || len(table) == 0 {
		t.Fatal(err)
	}
	valid := map[string]map[string]any{
		"minimal": {"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": 3},
		"every source": {
			"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
			"minReplicas":    0, "maxReplicas": 10, "syncPeriod": "1s",
			"metrics": []any{
				map[string]any{"type": "Resource", "resource": map[string]any{"name": "cpu", "target": map[string]any{"type": "Utilization", "averageUtilization": 50}}},
				map[string]any{"type": "ContainerResource", "containerResource": map[string]any{"name": "memory", "container": "app", "target": map[string]any{"type": "AverageValue", "averageValue": "100Mi"}}},
				map[string]any{"type": "Pods", "pods": map[string]any{"metric": map[string]any{"name": "rps"}, "target": map[string]any{"type": "AverageValue", "averageValue": 5}}},
				map[string]any{"type": "Object", "object": map[string]any{"describedObject": map[string]any{"apiVersion": "v1", "kind": "Service", "name": "web"}, "metric": map[string]any{"name": "rps"}, "target": map[string]any{"type": "Value", "value": "0.5"}}},
				map[string]any{"type": "External", "external": map[string]any{"metric": map[string]any{"name": "queue", "selector": map[string]any{"matchLabels": map[string]any{"queue": "jobs"}}}, "target": map[string]any{"type": "AverageValue", "averageValue": "30"}}},
			},
			"behavior": map[string]any{
				"scaleUp":   map[string]any{"tolerance": "0.05", "policies": []any{map[string]any{"type": "Pods", "value": 2147483647, "periodSeconds": 1800}}},
				"scaleDown": map[string]any{"stabilizationWindowSeconds": 3600, "selectPolicy": "Disabled"},
			},
		},
	}
	valid["table base"] = table[0].Spec
	valid["table base"]["maxReplicas"], valid["table base"]["minReplicas"] = 10, 1
	for name, spec := range valid {
		if errs := v.validate(t, spec); len(errs) > 0 {
			t.Errorf("%s: rejected: %v", name, errs.ToAggregate())
		}
	}
}
