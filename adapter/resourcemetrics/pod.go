package resourcemetrics

import (
	"context"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/klog/v2"
	"k8s.io/metrics/pkg/apis/metrics"
	"k8s.io/utils/clock"

	"github.com/metricscale/metricscale/adapter/objects"
	"github.com/metricscale/metricscale/providers"
)

// podStorage is the REST storage of PodMetrics (namespaced, get and list).
type podStorage struct {
	src   Source
	pods  objects.Cache
	clock clock.PassiveClock
}

var (
	_ rest.Storage              = (*podStorage)(nil)
	_ rest.KindProvider         = (*podStorage)(nil)
	_ rest.Scoper               = (*podStorage)(nil)
	_ rest.Getter               = (*podStorage)(nil)
	_ rest.Lister               = (*podStorage)(nil)
	_ rest.TableConvertor       = (*podStorage)(nil)
	_ rest.SingularNameProvider = (*podStorage)(nil)
)

func (s *podStorage) New() runtime.Object     { return &metrics.PodMetrics{} }
func (s *podStorage) NewList() runtime.Object { return &metrics.PodMetricsList{} }
func (s *podStorage) Destroy()                {}
func (s *podStorage) Kind() string            { return "PodMetrics" }
func (s *podStorage) NamespaceScoped() bool   { return true }
func (s *podStorage) GetSingularName() string { return "podmetrics" }

// List answers the pods of the request's namespace (all namespaces when
// empty) that match the selectors and have a value.
func (s *podStorage) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	lsel, fsel, err := selectors(opts, true)
	if err != nil {
		return nil, err
	}
	if !s.pods.HasSynced() {
		return nil, notSynced("pods")
	}
	ns := genericapirequest.NamespaceValue(ctx)
	objs, err := s.pods.Lister.ByNamespace(ns).List(lsel)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	pods := make([]*metav1.PartialObjectMetadata, 0, len(objs))
	for _, o := range objs {
		if m, ok := o.(*metav1.PartialObjectMetadata); ok && fieldsMatch(fsel, m) {
			pods = append(pods, m)
		}
	}
	items, err := s.metrics(ctx, pods)
	if err != nil {
		return nil, err
	}
	return &metrics.PodMetricsList{Items: items}, nil
}

// Get answers one pod: a 404 naming the pod if it does not exist or has no
// value.
func (s *podStorage) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	if !s.pods.HasSynced() {
		return nil, notSynced("pods")
	}
	ns := genericapirequest.NamespaceValue(ctx)
	o, err := s.pods.Lister.ByNamespace(ns).Get(name)
	if err != nil {
		return nil, err // the lister's 404 names the pod
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
		return nil, noUsage(podMetricsGR, name, "pod "+ns+"/"+name)
	}
	return &items[0], nil
}

// metrics asks the source for pods and builds the items, sorted by
// namespace and name, for the pods that have a value.
func (s *podStorage) metrics(ctx context.Context, pods []*metav1.PartialObjectMetadata) ([]metrics.PodMetrics, error) {
	if len(pods) == 0 {
		return []metrics.PodMetrics{}, nil
	}
	names := make([]types.NamespacedName, len(pods))
	byName := make(map[types.NamespacedName]*metav1.PartialObjectMetadata, len(pods))
	for i, p := range pods {
		names[i] = types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
		byName[names[i]] = p
	}
	usage, err := s.src.GetPodMetrics(ctx, names)
	if err != nil {
		// already an API error naming the provider; wrapping it would turn
		// it into a 500
		return nil, err
	}
	now := metav1.NewTime(s.clock.Now())
	items := make([]metrics.PodMetrics, 0, len(usage))
	for _, u := range usage {
		p, ok := byName[u.Pod]
		if !ok {
			klog.V(4).InfoS("Resource provider answered for a pod not asked about, leaving it out", "pod", klog.KRef(u.Pod.Namespace, u.Pod.Name))
			continue
		}
		items = append(items, podMetrics(p, u, now))
	}
	sort.Slice(items, func(i, j int) bool {
		if items[i].Namespace != items[j].Namespace {
			return items[i].Namespace < items[j].Namespace
		}
		return items[i].Name < items[j].Name
	})
	return items, nil
}

func podMetrics(p *metav1.PartialObjectMetadata, u providers.PodUsage, now metav1.Time) metrics.PodMetrics {
	pm := metrics.PodMetrics{
		// like metrics-server: the object is made now, its labels are the pod's
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels, CreationTimestamp: now},
		Timestamp:  metav1.NewTime(u.Timestamp),
		Window:     metav1.Duration{Duration: u.Window},
		Containers: make([]metrics.ContainerMetrics, 0, len(u.Containers)),
	}
	for _, c := range u.Containers {
		pm.Containers = append(pm.Containers, metrics.ContainerMetrics{
			Name:  c.Name,
			Usage: corev1.ResourceList{corev1.ResourceCPU: c.CPU, corev1.ResourceMemory: c.Memory},
		})
	}
	return pm
}
