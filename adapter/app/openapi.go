package app

import (
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	openapicommon "k8s.io/kube-openapi/pkg/common"
	cmapiserver "sigs.k8s.io/custom-metrics-apiserver/pkg/apiserver"
	cmcore "sigs.k8s.io/custom-metrics-apiserver/pkg/generated/openapi/core"
	cmcustom "sigs.k8s.io/custom-metrics-apiserver/pkg/generated/openapi/custommetrics"
	cmexternal "sigs.k8s.io/custom-metrics-apiserver/pkg/generated/openapi/externalmetrics"

	"github.com/metricscale/metricscale/adapter/resourcemetrics"
)

// withResourceMetricsOpenAPI sets the OpenAPI configs (v2 and v3) that
// AdapterBase would build, plus metrics.k8s.io's definitions: AdapterBase
// merges only custom and external metrics', and installing a group whose
// types have no definition fails. It must run before Config(), which keeps
// configs already set. The adapter always serves custom and external
// metrics, so both are merged.
func (o *Options) withResourceMetricsOpenAPI() {
	defs := mergeDefinitions(cmcore.GetOpenAPIDefinitions, cmcustom.GetOpenAPIDefinitions,
		cmexternal.GetOpenAPIDefinitions, resourcemetrics.GetOpenAPIDefinitions)
	namer := openapinamer.NewDefinitionNamer(cmapiserver.Scheme, resourcemetrics.Scheme)
	v2 := genericapiserver.DefaultOpenAPIConfig(defs, namer)
	v2.Info.Title, v2.Info.Version = o.Name, "1.0.0"
	v3 := genericapiserver.DefaultOpenAPIV3Config(defs, namer)
	v3.Info.Title, v3.Info.Version = o.Name, "1.0.0"
	o.OpenAPIConfig, o.OpenAPIV3Config = v2, v3
}

// mergeDefinitions returns the union of the getters' definitions; shared
// types (meta/v1, Quantity) are generated identically by each.
func mergeDefinitions(getters ...openapicommon.GetOpenAPIDefinitions) openapicommon.GetOpenAPIDefinitions {
	return func(ref openapicommon.ReferenceCallback) map[string]openapicommon.OpenAPIDefinition {
		out := map[string]openapicommon.OpenAPIDefinition{}
		for _, get := range getters {
			for k, v := range get(ref) {
				out[k] = v
			}
		}
		return out
	}
}
