package v1alpha1_test

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	"github.com/metricscale/metricscale/autoscaler/validation/validationtest"
)

// crdValidator validates MetricAutoscalers as the API server does on
// create, from manifests/autoscaler/crd.yaml: defaulting, pruning, the
// OpenAPI schema, then the CEL rules.
type crdValidator struct {
	structural *structuralschema.Structural
	schema     apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

func loadCRD(t *testing.T) *crdValidator {
	t.Helper()
	data, err := os.ReadFile("../../../manifests/autoscaler/crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var v1 apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &v1); err != nil {
		t.Fatal(err)
	}
	var crd apiextensions.CustomResourceDefinition
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(&v1, &crd, nil); err != nil {
		t.Fatal(err)
	}
	// The API server would refuse a CRD whose rules do not compile or
	// cost too much.
	crd.Status.StoredVersions = []string{crd.Spec.Versions[0].Name}
	if errs := crdvalidation.ValidateCustomResourceDefinition(context.Background(), &crd); len(errs) > 0 {
		t.Fatalf("the API server would reject the CRD: %v", errs.ToAggregate())
	}
	// One version: the internal form keeps its schema at the top level.
	props := crd.Spec.Validation.OpenAPIV3Schema
	structural, err := structuralschema.NewStructural(props)
	if err != nil {
		t.Fatal(err)
	}
	sv, _, err := apiservervalidation.NewSchemaValidator(props)
	if err != nil {
		t.Fatal(err)
	}
	return &crdValidator{structural: structural, schema: sv, cel: cel.NewValidator(structural, true, celconfig.PerCallLimit)}
}

func (v *crdValidator) validate(t *testing.T, spec map[string]any) field.ErrorList {
	t.Helper()
	obj := map[string]any{
		"apiVersion": "autoscaling.metricscale.dev/v1alpha1", "kind": "MetricAutoscaler",
		"metadata": map[string]any{"name": "web", "namespace": "default"},
		"spec":     spec,
	}
	// Through JSON, as a request body: numbers become int64 or float64.
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var u map[string]any
	if err := json.Unmarshal(data, &u); err != nil {
		t.Fatal(err)
	}
	normalizeNumbers(u)
	defaulting.Default(u, v.structural)
	pruning.Prune(u, v.structural, true)
	errs := apiservervalidation.ValidateCustomResource(nil, u, v.schema)
	celErrs, _ := v.cel.Validate(context.Background(), nil, v.structural, u, nil, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

// normalizeNumbers turns whole float64s into int64, as the API server's
// JSON decoding does.
func normalizeNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalizeNumbers(e)
		}
	case float64:
		if x == float64(int64(x)) {
			return int64(x)
		}
	}
	return v
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
