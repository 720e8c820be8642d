package resourcemetrics

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/klog/v2"
	"k8s.io/metrics/pkg/apis/metrics"
	"k8s.io/utils/clock"

	"github.com/metricscale/metricscale/adapter/objects"
)

// nodeStorage is the REST storage of NodeMetrics (cluster-scoped, get and
// list).
type nodeStorage struct {
	src   Source
	nodes objects.Cache
	clock clock.PassiveClock
}

var (
	_ rest.Storage              = (*nodeStorage)(nil)
	_ rest.KindProvider         = (*nodeStorage)(nil)
	_ rest.Scoper               = (*nodeStorage)(nil)
	_ rest.Getter               = (*nodeStorage)(nil)
	_ rest.Lister               = (*nodeStorage)(nil)
	_ rest.TableConvertor       = (*nodeStorage)(nil)
	_ rest.SingularNameProvider = (*nodeStorage)(nil)
)

func (s *nodeStorage) New() runtime.Object     { return &metrics.NodeMetrics{} }
func (s *nodeStorage) NewList() runtime.Object { return &metrics.NodeMetricsList{} }
func (s *nodeStorage) Destroy()                {}
func (s *nodeStorage) Kind() string            { return "NodeMetrics" }
func (s *nodeStorage) NamespaceScoped() bool   { return false }
func (s *nodeStorage) GetSingularName() string { return "nodemetrics" }

// List answers the nodes that match the selectors and have a value.
func (s *nodeStorage) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	lsel, fsel, err := selectors(opts, false)
	if err != nil {
		return nil, err
	}
	if !s.nodes.HasSynced() {
		return nil, notSynced("nodes")
	}
	objs, err := s.nodes.Lister.List(lsel)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	nodes := make([]*metav1.PartialObjectMetadata, 0, len(objs))
	for _, o := range objs {
		if m, ok := o.(*metav1.PartialObjectMetadata); ok && fieldsMatch(fsel, m) {
			nodes = append(nodes, m)
		}
	}
	items, err := s.metrics(ctx, nodes)
	if err != nil {
		return nil, err
	}
	return &metrics.NodeMetricsList{Items: items}, nil
}

// Get answers one node: a 404 naming the node if it does not exist or has
// no value.
func (s *nodeStorage) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	if !s.nodes.HasSynced() {
		return nil, notSynced("nodes")
	}
	o, err := s.nodes.Lister.Get(name)
	if err != nil {
		return nil, err // the lister's 404 names the node
	}
	m, ok := o.(*metav1.PartialObjectMetadata)
	if !ok {
		return nil, apierrors.NewInternalError(errUnexpected(o))
	}
	items, err := s.metrics(ctx, []*metav1.PartialObjectMetadata{m})
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, noUsage(nodeMetricsGR, name, "node "+name)
	}
	return &items[0], nil
}

func (s *nodeStorage) metrics(ctx context.Context, nodes []*metav1.PartialObjectMetadata) ([]metrics.NodeMetrics, error) {
	if len(nodes) == 0 {
		return []metrics.NodeMetrics{}, nil
	}
	names := make([]string, len(nodes))
	byName := make(map[string]*metav1.PartialObjectMetadata, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
		byName[n.Name] = n
	}
	usage, err := s.src.GetNodeMetrics(ctx, names)
	if err != nil {
		return nil, err // an API error naming the provider, see podStorage
	}
	now := metav1.NewTime(s.clock.Now())
	items := make([]metrics.NodeMetrics, 0, len(usage))
	for _, u := range usage {
		n, ok := byName[u.Node]
		if !ok {
			klog.V(4).InfoS("Resource provider answered for a node not asked about, leaving it out", "node", u.Node)
			continue
		}
		items = append(items, metrics.NodeMetrics{
			ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels, CreationTimestamp: now},
			Timestamp:  metav1.NewTime(u.Timestamp),
			Window:     metav1.Duration{Duration: u.Window},
			Usage:      corev1.ResourceList{corev1.ResourceCPU: u.CPU, corev1.ResourceMemory: u.Memory},
		})
	}
	sort.Slice(items, func(i, j int) bool { return items[i].Name < items[j].Name })
	return items, nil
}

func errUnexpected(o runtime.Object) error {
	return fmt.Errorf("unexpected object %T in a metadata cache", o)
}
