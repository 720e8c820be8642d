package resourcemetrics

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/tools/cache"
	"k8s.io/metrics/pkg/apis/metrics"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/metricscale/metricscale/adapter/objects"
	"github.com/metricscale/metricscale/providers"
)

// fakeSource answers usage for the names in pods/nodes and records what
// it was asked.
type fakeSource struct {
	pods   map[types.NamespacedName]providers.PodUsage
	nodes  map[string]providers.NodeUsage
	err    error
	asked  []string
	extras bool // also answer for an object not asked about
}

func (f *fakeSource) GetPodMetrics(_ context.Context, pods []types.NamespacedName) ([]providers.PodUsage, error) {
	if f.err != nil {
		return nil, f.err
	}
	var out []providers.PodUsage
	for _, p := range pods {
		f.asked = append(f.asked, p.String())
		if u, ok := f.pods[p]; ok {
			out = append(out, u)
		}
	}
	if f.extras {
		out = append(out, providers.PodUsage{Pod: types.NamespacedName{Namespace: "x", Name: "stray"}})
	}
	return out, nil
}

func (f *fakeSource) GetNodeMetrics(_ context.Context, nodes []string) ([]providers.NodeUsage, error) {
	if f.err != nil {
		return nil, f.err
	}
	var out []providers.NodeUsage
	for _, n := range nodes {
		f.asked = append(f.asked, n)
		if u, ok := f.nodes[n]; ok {
			out = append(out, u)
		}
	}
	return out, nil
}

func meta(ns, name string, lbls map[string]string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls}}
}

func cacheOf(synced bool, objs ...*metav1.PartialObjectMetadata) objects.Cache {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		_ = idx.Add(o)
	}
	return objects.Cache{Lister: cache.NewGenericLister(idx, metrics.Resource("x")), HasSynced: func() bool { return synced }}
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func podUsage(ns, name string, cpuMilli int64) providers.PodUsage {
	return providers.PodUsage{
		Pod: types.NamespacedName{Namespace: ns, Name: name}, Timestamp: t0, Window: 30 * time.Second,
		Containers: []providers.ContainerUsage{{Name: "app", CPU: *resource.NewMilliQuantity(cpuMilli, resource.DecimalSI), Memory: *resource.NewQuantity(1<<20, resource.BinarySI)}},
	}
}

func TestPodList(t *testing.T) {
	t.Parallel()
	pods := cacheOf(true,
		meta("default", "web-1", map[string]string{"app": "web"}),
		meta("default", "web-2", map[string]string{"app": "web"}),
		meta("default", "db-1", map[string]string{"app": "db"}),
		meta("other", "web-9", map[string]string{"app": "web"}),
	)
	src := map[types.NamespacedName]providers.PodUsage{}
	for _, u := range []providers.PodUsage{podUsage("default", "web-2", 200), podUsage("default", "web-1", 100), podUsage("other", "web-9", 900)} {
		src[u.Pod] = u
	}
	for _, tc := range []struct {
		name, ns, labels, fields string
		want, asked              string
	}{
		{name: "namespace, db-1 has no value", ns: "default", want: "default/web-1=100m default/web-2=200m", asked: "default/db-1 default/web-1 default/web-2"},
		{name: "label selector", ns: "default", labels: "app=web", want: "default/web-1=100m default/web-2=200m", asked: "default/web-1 default/web-2"},
		{name: "nothing selected asks nothing", ns: "default", labels: "app=none", want: "", asked: ""},
		{name: "all namespaces", ns: "", labels: "app=web", want: "default/web-1=100m default/web-2=200m other/web-9=900m", asked: "default/web-1 default/web-2 other/web-9"},
		{name: "field selector on name", ns: "default", fields: "metadata.name=web-2", want: "default/web-2=200m", asked: "default/web-2"},
		{name: "field selector on namespace", ns: "", fields: "metadata.namespace!=default", want: "other/web-9=900m", asked: "other/web-9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fs := &fakeSource{pods: src, extras: true}
			s := &podStorage{src: fs, pods: pods, clock: clocktesting.NewFakePassiveClock(t0.Add(time.Minute))}
			opts := &metainternalversion.ListOptions{}
			var err error
			if opts.LabelSelector, err = labels.Parse(tc.labels); err != nil {
				t.Fatal(err)
			}
			if opts.FieldSelector, err = fields.ParseSelector(tc.fields); err != nil {
				t.Fatal(err)
			}
			obj, err := s.List(genericapirequest.WithNamespace(context.Background(), tc.ns), opts)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, pm := range obj.(*metrics.PodMetricsList).Items {
				cpu := pm.Containers[0].Usage["cpu"]
				got = append(got, fmt.Sprintf("%s/%s=%s", pm.Namespace, pm.Name, cpu.String()))
				if pm.Labels["app"] != "web" || !pm.Timestamp.Time.Equal(t0) || pm.Window.Duration != 30*time.Second || !pm.CreationTimestamp.Time.Equal(t0.Add(time.Minute)) {
					t.Errorf("%s: labels %v, timestamp %s, window %s, created %s", pm.Name, pm.Labels, pm.Timestamp, pm.Window, pm.CreationTimestamp)
				}
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Errorf("items = %q, want %q (a stray answer must be left out)", g, tc.want)
			}
			sortedAsked := strings.Join(sorted(fs.asked), " ")
			if sortedAsked != tc.asked {
				t.Errorf("asked the source for %q, want %q", sortedAsked, tc.asked)
			}
		})
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

func TestErrors(t *testing.T) {
	t.Parallel()
	backend := providers.NewBackendError("prom", errors.New("connection refused"))
	pods := cacheOf(true, meta("default", "web-1", nil), meta("default", "db-1", nil))
	nodes := cacheOf(true, meta("", "node-a", nil), meta("", "node-b", nil))
	src := &fakeSource{
		pods:  map[types.NamespacedName]providers.PodUsage{{Namespace: "default", Name: "web-1"}: podUsage("default", "web-1", 1)},
		nodes: map[string]providers.NodeUsage{"node-a": {Node: "node-a"}},
	}
	ctx := genericapirequest.WithNamespace(context.Background(), "default")
	badField := &metainternalversion.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", "a")}
	nsField := &metainternalversion.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.namespace", "a")}
	clk := clocktesting.NewFakePassiveClock(t0)
	for _, tc := range []struct {
		name  string
		call  func() error
		code  int32
		wants []string
	}{
		{"pod without a value", func() error {
			_, err := (&podStorage{src: src, pods: pods, clock: clk}).Get(ctx, "db-1", nil)
			return err
		}, 404, []string{`podmetrics.metrics.k8s.io "db-1" not found`, "pod default/db-1"}},
		{"no such pod", func() error {
			_, err := (&podStorage{src: src, pods: pods, clock: clk}).Get(ctx, "nope", nil)
			return err
		}, 404, []string{`"nope" not found`}},
		{"node without a value", func() error {
			_, err := (&nodeStorage{src: src, nodes: nodes, clock: clk}).Get(ctx, "node-b", nil)
			return err
		}, 404, []string{`nodemetrics.metrics.k8s.io "node-b" not found`}},
		{"the provider's 503 passes unchanged", func() error {
			_, err := (&podStorage{src: &fakeSource{err: backend}, pods: pods, clock: clk}).List(ctx, nil)
			return err
		}, 503, []string{`metrics provider "prom" is unavailable`}},
		{"the provider's 503 on a node get", func() error {
			_, err := (&nodeStorage{src: &fakeSource{err: backend}, nodes: nodes, clock: clk}).Get(ctx, "node-a", nil)
			return err
		}, 503, []string{`"prom"`}},
		{"pods cache not filled", func() error {
			_, err := (&podStorage{src: src, pods: cacheOf(false), clock: clk}).List(ctx, nil)
			return err
		}, 503, []string{"watch cache of pods"}},
		{"nodes cache not filled", func() error {
			_, err := (&nodeStorage{src: src, nodes: cacheOf(false), clock: clk}).Get(ctx, "node-a", nil)
			return err
		}, 503, []string{"watch cache of nodes"}},
		{"unsupported pod field", func() error {
			_, err := (&podStorage{src: src, pods: pods, clock: clk}).List(ctx, badField)
			return err
		}, 400, []string{"spec.nodeName", "metadata.name, metadata.namespace"}},
		{"nodes have no namespace field", func() error {
			_, err := (&nodeStorage{src: src, nodes: nodes, clock: clk}).List(ctx, nsField)
			return err
		}, 400, []string{"metadata.namespace"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.call()
			var st apierrors.APIStatus
			if !errors.As(err, &st) {
				t.Fatalf("err = %v (%T), want an API status (a plain error is a 500)", err, err)
			}
			// the API server reads the status by type, not through %w
			if _, direct := err.(apierrors.APIStatus); !direct {
				t.Errorf("err %T is wrapped: the API server would answer 500", err)
			}
			if st.Status().Code != tc.code {
				t.Errorf("code = %d, want %d (%v)", st.Status().Code, tc.code, err)
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
		})
	}
}

func TestTables(t *testing.T) {
	t.Parallel()
	q := func(s string) resource.Quantity { return resource.MustParse(s) }
	pm := metrics.PodMetrics{ObjectMeta: metav1.ObjectMeta{Name: "web-1"}, Window: metav1.Duration{Duration: time.Minute},
		Containers: []metrics.ContainerMetrics{
			{Name: "a", Usage: map[corev1.ResourceName]resource.Quantity{"cpu": q("250m"), "memory": q("100Mi")}},
			{Name: "b", Usage: map[corev1.ResourceName]resource.Quantity{"cpu": q("50m"), "memory": q("20Mi")}},
		}}
	nm := metrics.NodeMetrics{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Window: metav1.Duration{Duration: 30 * time.Second},
		Usage: map[corev1.ResourceName]resource.Quantity{"cpu": q("2"), "memory": q("4Gi")}}
	ps, ns := &podStorage{}, &nodeStorage{}
	for _, tc := range []struct {
		name string
		conv func() (*metav1.Table, error)
		want string
	}{
		{"pod sums its containers", func() (*metav1.Table, error) { return ps.ConvertToTable(context.Background(), &pm, nil) }, "web-1 300m 120Mi 1m0s"},
		{"pod list", func() (*metav1.Table, error) {
			return ps.ConvertToTable(context.Background(), &metrics.PodMetricsList{Items: []metrics.PodMetrics{pm, pm}}, nil)
		}, "web-1 300m 120Mi 1m0s|web-1 300m 120Mi 1m0s"},
		{"node", func() (*metav1.Table, error) { return ns.ConvertToTable(context.Background(), &nm, nil) }, "node-a 2 4Gi 30s"},
		{"node list", func() (*metav1.Table, error) {
			return ns.ConvertToTable(context.Background(), &metrics.NodeMetricsList{Items: []metrics.NodeMetrics{nm}}, nil)
		}, "node-a 2 4Gi 30s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tbl, err := tc.conv()
			if err != nil {
				t.Fatal(err)
			}
			var rows []string
			for _, r := range tbl.Rows {
				rows = append(rows, strings.TrimSpace(fmt.Sprintln(r.Cells...)))
				if r.Object.Object == nil {
					t.Error("row without its object (kubectl -o wide/includeObject needs it)")
				}
			}
			if got := strings.Join(rows, "|"); got != tc.want {
				t.Errorf("rows = %q, want %q", got, tc.want)
			}
			if len(tbl.ColumnDefinitions) != 4 {
				t.Errorf("columns = %v", tbl.ColumnDefinitions)
			}
		})
	}
	if _, err := ps.ConvertToTable(context.Background(), &nm, nil); err == nil {
		t.Error("pod storage converted a NodeMetrics")
	}
}
