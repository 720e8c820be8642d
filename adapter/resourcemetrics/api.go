// Package resourcemetrics serves metrics.k8s.io/v1beta1 — PodMetrics and
// NodeMetrics, read-only, as metrics-server serves them — so kubectl top and
// kube-controller-manager's CPU and memory HPAs work from the adapter's
// resource route. Which pods and nodes exist, and their labels, come from
// the adapter's metadata-only watch caches (never a LIST per request); the
// usage comes from a Source, the registry's resource route. A pod or node
// without a value is left out of a list and is a 404 for a get.
package resourcemetrics

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/metrics/pkg/apis/metrics"
	"k8s.io/metrics/pkg/apis/metrics/install"
	"k8s.io/metrics/pkg/apis/metrics/v1beta1"
	"k8s.io/utils/clock"

	"github.com/metricscale/metricscale/adapter/objects"
	"github.com/metricscale/metricscale/providers"
)

// Scheme holds the metrics.k8s.io types (internal and versioned); Codecs
// serves them. The adapter's OpenAPI namer needs Scheme too.
var (
	Scheme = runtime.NewScheme()
	Codecs = serializer.NewCodecFactory(Scheme)
)

func init() {
	install.Install(Scheme)
	// list and get options arrive as meta/v1 types
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
}

// Source answers usage for pods and nodes; providers/registry implements it
// with its resource route. Its errors already carry API semantics (404, 503
// naming the provider) and are returned unchanged.
type Source interface {
	GetPodMetrics(ctx context.Context, pods []types.NamespacedName) ([]providers.PodUsage, error)
	GetNodeMetrics(ctx context.Context, nodes []string) ([]providers.NodeUsage, error)
}

var (
	podMetricsGR  = metrics.Resource("podmetrics")
	nodeMetricsGR = metrics.Resource("nodemetrics")
)

// NewAPIGroupInfo returns metrics.k8s.io with v1beta1's two resources.
func NewAPIGroupInfo(src Source, pods, nodes objects.Cache, clk clock.PassiveClock) genericapiserver.APIGroupInfo {
	if clk == nil {
		clk = clock.RealClock{}
	}
	info := genericapiserver.NewDefaultAPIGroupInfo(metrics.GroupName, Scheme, metav1.ParameterCodec, Codecs)
	info.VersionedResourcesStorageMap[v1beta1.SchemeGroupVersion.Version] = map[string]rest.Storage{
		"pods":  &podStorage{src: src, pods: pods, clock: clk},
		"nodes": &nodeStorage{src: src, nodes: nodes, clock: clk},
	}
	return info
}

// Install adds metrics.k8s.io to server. The server's OpenAPI configs must
// hold the group's definitions (GetOpenAPIDefinitions) and name them with
// Scheme, or installing fails.
func Install(server *genericapiserver.GenericAPIServer, src Source, pods, nodes objects.Cache) error {
	info := NewAPIGroupInfo(src, pods, nodes, nil)
	if err := server.InstallAPIGroup(&info); err != nil {
		return fmt.Errorf("installing the %s API group: %w", metrics.GroupName, err)
	}
	return nil
}

// notSynced is the 503 for a request that arrives before a watch cache is
// filled: an empty list would read as "no metrics".
func notSynced(resource string) error {
	return apierrors.NewServiceUnavailable(fmt.Sprintf("the watch cache of %s is not filled yet", resource))
}

// noUsage is the 404 for an object that exists but has no usage value.
func noUsage(gr schema.GroupResource, name, what string) error {
	err := apierrors.NewNotFound(gr, name)
	err.ErrStatus.Message = fmt.Sprintf("%s %q not found: no CPU and memory usage of %s", gr, name, what)
	return err
}
