// Package crdtest checks MetricAutoscalers against the CRD manifest as the
// API server would on create, for the tests of the CRD itself and of the
// tools that write MetricAutoscalers.
package crdtest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
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
)

// Validator admits objects as the API server does with the CRD: defaulting,
// pruning, the OpenAPI schema, then the CEL rules.
type Validator struct {
	structural *structuralschema.Structural
	schema     apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

// Load reads the CRD at path (manifests/autoscaler/crd.yaml, relative to the
// calling test's package) and fails t if the API server would refuse the CRD
// itself: rules that do not compile or cost too much.
func Load(t testing.TB, path string) *Validator {
	t.Helper()
	data, err := os.ReadFile(path)
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
	return &Validator{structural: structural, schema: sv, cel: cel.NewValidator(structural, true, celconfig.PerCallLimit)}
}

// Admit takes obj as a request body (obj itself is not changed) and returns
// it as the API server would store it, whether pruning dropped any field
// unknown to the schema, and the errors it would refuse it for.
func (v *Validator) Admit(obj map[string]any) (stored map[string]any, pruned bool, errs field.ErrorList) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, false, field.ErrorList{field.InternalError(nil, err)}
	}
	var u map[string]any
	if err := json.Unmarshal(data, &u); err != nil {
		return nil, false, field.ErrorList{field.InternalError(nil, err)}
	}
	normalizeNumbers(u)
	defaulting.Default(u, v.structural)
	defaulted, _ := json.Marshal(u)
	pruning.Prune(u, v.structural, true)
	after, _ := json.Marshal(u)
	errs = apiservervalidation.ValidateCustomResource(nil, u, v.schema)
	celErrs, _ := v.cel.Validate(context.Background(), nil, v.structural, u, nil, celconfig.RuntimeCELCostBudget)
	return u, !bytes.Equal(defaulted, after), append(errs, celErrs...)
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
