package objects

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/metricscale/metricscale/providers"
)

// fourPods are the pods the tests select from: app=web in two namespaces,
// app=db in one.
func fourPods() []runtime.Object {
	pod := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	return []runtime.Object{
		obj(pod, "default", "web-1", map[string]string{"app": "web"}),
		obj(pod, "default", "web-2", map[string]string{"app": "web"}),
		obj(pod, "default", "db-1", map[string]string{"app": "db"}),
		obj(pod, "other", "web-9", map[string]string{"app": "web"}),
	}
}

func obj(gvk schema.GroupVersionKind, ns, name string, lbls map[string]string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}},
	}
}

func mapper() apimeta.RESTMapper {
	m := apimeta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, apimeta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, apimeta.RESTScopeRoot)
	m.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, apimeta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}, apimeta.RESTScopeNamespace)
	return m
}

func TestListNames(t *testing.T) {
	t.Parallel()
	dep := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	scheme := metadatafake.NewTestScheme()
	metav1.AddMetaToScheme(scheme)
	client := metadatafake.NewSimpleMetadataClient(scheme,
		append(fourPods(), obj(dep, "default", "web", map[string]string{"tier": "front"}))...)
	lists := 0
	client.PrependReactor("list", "*", func(clienttesting.Action) (bool, runtime.Object, error) {
		lists++
		return false, nil, nil
	})
	l := New(client, mapper(), schema.GroupResource{Resource: "pods"}, schema.GroupResource{Group: "apps", Resource: "deployments"})
	if _, err := l.ListNames(context.Background(), schema.GroupResource{Group: "apps", Resource: "deployments"}, "default", labels.Everything()); err == nil {
		t.Error("a lister that is not started answered")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l.Start(ctx)

	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	names := func(gr schema.GroupResource, ns, sel string) []string {
		t.Helper()
		s, err := labels.Parse(sel)
		if err != nil {
			t.Fatal(err)
		}
		out, err := l.ListNames(wctx, gr, ns, s)
		if err != nil {
			t.Fatalf("ListNames(%s, %s, %s): %v", gr, ns, sel, err)
		}
		sort.Strings(out)
		return out
	}
	pods := schema.GroupResource{Resource: "pods"}
	if got := strings.Join(names(pods, "default", "app=web"), ","); got != "web-1,web-2" {
		t.Errorf("pods app=web in default = %s", got)
	}
	if got := strings.Join(names(pods, "", "app=web"), ","); got != "web-1,web-2,web-9" {
		t.Errorf("pods app=web everywhere = %s", got)
	}
	if !l.PodsSynced() {
		t.Error("PodsSynced is false after a query answered")
	}
	// another resource gets its informer on first use
	if got := strings.Join(names(schema.GroupResource{Group: "apps", Resource: "deployments"}, "default", "tier=front"), ","); got != "web" {
		t.Errorf("deployments = %s", got)
	}
	listsAfterSync := lists
	for i := 0; i < 5; i++ {
		names(pods, "default", "app=db")
	}
	if lists != listsAfterSync {
		t.Errorf("queries LISTed the API server %d times", lists-listsAfterSync)
	}
	// the cache drops what selector queries do not need
	e := l.informers[pods]
	for _, o := range e.informer.GetStore().List() {
		if m := o.(*metav1.PartialObjectMetadata); m.ManagedFields != nil {
			t.Errorf("%s kept its managed fields", m.Name)
		}
	}

	_, err := l.ListNames(wctx, schema.GroupResource{Resource: "widgets"}, "default", labels.Everything())
	var pe *providers.Error
	if !errors.As(err, &pe) || pe.Code() != 404 {
		t.Errorf("unknown resource: %v", err)
	}
}

// TestListNamesTimesOutWithTheWatchError: the first query on a resource
// starts its informer and waits for its cache, at most until the query's
// deadline, then fails with a 503 carrying the watch error; pods, watched
// from their first query too, behave as any other resource.
func TestListNamesTimesOutWithTheWatchError(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		gr       schema.GroupResource
		listed   string // the resource in the fake's list action
		wantName string // in the error
	}{
		{"statefulsets", schema.GroupResource{Group: "apps", Resource: "statefulsets"}, "statefulsets", "statefulsets.apps"},
		{"pods", schema.GroupResource{Resource: "pods"}, "pods", "pods"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			scheme := metadatafake.NewTestScheme()
			metav1.AddMetaToScheme(scheme)
			client := metadatafake.NewSimpleMetadataClient(scheme)
			client.PrependReactor("list", tc.listed, func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, errors.New(tc.wantName + ` is forbidden: User "system:serviceaccount:metricscale:metricscale-adapter" cannot list`)
			})
			l := New(client, mapper(), tc.gr)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			l.Start(ctx)
			qctx, qcancel := context.WithTimeout(ctx, 500*time.Millisecond)
			defer qcancel()
			start := time.Now()
			_, err := l.ListNames(qctx, tc.gr, "default", labels.Everything())
			var pe *providers.Error
			if !errors.As(err, &pe) || pe.Code() != 503 {
				t.Fatalf("err = %v, want a 503", err)
			}
			if time.Since(start) > 2*time.Second {
				t.Errorf("took %s, want about the 500ms deadline", time.Since(start))
			}
			if !strings.Contains(err.Error(), "watch cache of "+tc.wantName) || !strings.Contains(err.Error(), "forbidden") {
				t.Errorf("error does not name the resource and the watch error: %v", err)
			}
		})
	}
}

// TestOnlyAllowedResourcesAreWatched: a selector query on a resource the
// configuration does not allow starts no informer (the RBAC would refuse
// its watch anyway) and gets a 400 naming the resource and the fix.
func TestOnlyAllowedResourcesAreWatched(t *testing.T) {
	t.Parallel()
	dep := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	scheme := metadatafake.NewTestScheme()
	metav1.AddMetaToScheme(scheme)
	client := metadatafake.NewSimpleMetadataClient(scheme, obj(dep, "default", "web", nil))
	deploymentLists := 0
	client.PrependReactor("list", "deployments", func(clienttesting.Action) (bool, runtime.Object, error) {
		deploymentLists++
		return false, nil, nil
	})
	l := New(client, mapper()) // the default: pods and namespaces
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l.Start(ctx)
	qctx, qcancel := context.WithTimeout(ctx, 2*time.Second)
	defer qcancel()
	for _, gr := range []schema.GroupResource{{Group: "apps", Resource: "deployments"}, {Resource: "deployments"}, {Resource: "deployment"}} {
		_, err := l.ListNames(qctx, gr, "default", labels.Everything())
		var pe *providers.Error
		if !errors.As(err, &pe) || pe.Code() != 400 {
			t.Errorf("%s: err = %v, want a 400", gr, err)
			continue
		}
		for _, want := range []string{"deployments.apps", "selectorResources"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not mention %q", gr, err, want)
			}
		}
	}
	l.mu.Lock()
	_, watched := l.informers[schema.GroupResource{Group: "apps", Resource: "deployments"}]
	l.mu.Unlock()
	if watched || deploymentLists != 0 {
		t.Errorf("deployments watched (%v) or listed (%d times) without being allowed", watched, deploymentLists)
	}
}

// TestNodesForResourceMetrics: WatchNodes fills a node cache that Nodes
// reads (names and labels), WatchPods a pod cache that Pods reads, and
// watching nodes does not make them a resource selector queries may name.
func TestNodesForResourceMetrics(t *testing.T) {
	t.Parallel()
	pod := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	node := schema.GroupVersionKind{Version: "v1", Kind: "Node"}
	scheme := metadatafake.NewTestScheme()
	metav1.AddMetaToScheme(scheme)
	client := metadatafake.NewSimpleMetadataClient(scheme,
		obj(pod, "default", "web-1", map[string]string{"app": "web"}),
		obj(node, "", "node-a", map[string]string{"zone": "a"}),
		obj(node, "", "node-b", map[string]string{"zone": "b"}),
	)
	m := mapper().(*apimeta.DefaultRESTMapper)
	m.Add(node, apimeta.RESTScopeRoot)
	l := New(client, m)
	if l.NodesSynced() || l.PodsSynced() {
		t.Error("NodesSynced or PodsSynced before WatchNodes and WatchPods")
	}
	l.WatchPods()
	l.WatchNodes()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l.Start(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for !l.NodesSynced() || !l.PodsSynced() {
		if time.Now().After(deadline) {
			t.Fatal("caches not synced after 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !l.Nodes().HasSynced() || !l.Pods().HasSynced() {
		t.Error("Cache.HasSynced is false after sync")
	}
	zoneA, _ := labels.Parse("zone=a")
	nodes, err := l.Nodes().Lister.List(zoneA)
	if err != nil || len(nodes) != 1 || nodes[0].(*metav1.PartialObjectMetadata).Name != "node-a" {
		t.Errorf("nodes zone=a = %v, %v; want node-a", nodes, err)
	}
	if _, err := l.Nodes().Lister.Get("node-x"); err == nil || !strings.Contains(err.Error(), `"node-x" not found`) {
		t.Errorf("Get(node-x) = %v, want a 404 naming it", err)
	}
	p, err := l.Pods().Lister.ByNamespace("default").Get("web-1")
	if err != nil || p.(*metav1.PartialObjectMetadata).Labels["app"] != "web" {
		t.Errorf("pod web-1 = %v, %v", p, err)
	}
	qctx, qcancel := context.WithTimeout(ctx, 2*time.Second)
	defer qcancel()
	_, err = l.ListNames(qctx, schema.GroupResource{Resource: "nodes"}, "", labels.Everything())
	var pe *providers.Error
	if !errors.As(err, &pe) || pe.Code() != 400 {
		t.Errorf("selector query on nodes: %v, want a 400 (not in selectorResources)", err)
	}
}

// TestSetAllowed: a config reload that adds a resource to
// selectorResources makes it answer (watched from its first query), and one
// that removes it makes it a 400 again.
func TestSetAllowed(t *testing.T) {
	t.Parallel()
	dep := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	scheme := metadatafake.NewTestScheme()
	metav1.AddMetaToScheme(scheme)
	client := metadatafake.NewSimpleMetadataClient(scheme, obj(dep, "default", "web", map[string]string{"app": "web"}))
	l := New(client, mapper())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l.Start(ctx)
	deployments := schema.GroupResource{Group: "apps", Resource: "deployments"}
	status := func() (int, []string) {
		qctx, qcancel := context.WithTimeout(ctx, 10*time.Second)
		defer qcancel()
		names, err := l.ListNames(qctx, deployments, "default", labels.Everything())
		var pe *providers.Error
		if errors.As(err, &pe) {
			return pe.Code(), nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return 200, names
	}
	if code, _ := status(); code != 400 {
		t.Fatalf("before: %d, want 400", code)
	}
	l.SetAllowed(deployments)
	if code, names := status(); code != 200 || strings.Join(names, ",") != "web" {
		t.Errorf("allowed: %d %v, want web", code, names)
	}
	l.SetAllowed() // back to the defaults
	if code, _ := status(); code != 400 {
		t.Errorf("removed again: %d, want 400", code)
	}
	qctx, qcancel := context.WithTimeout(ctx, 10*time.Second)
	defer qcancel()
	if _, err := l.ListNames(qctx, schema.GroupResource{Resource: "pods"}, "default", labels.Everything()); err != nil {
		t.Errorf("pods are always allowed: %v", err)
	}
}

// TestPodsWatch: pods are watched from the first selector query on them, so
// an adapter that never resolves a pod selector (External metrics only)
// never lists or watches pods; that first query (several at once) starts one
// informer and answers from it once it is filled. WatchPods, called when
// metrics.k8s.io is served, watches them from Start on (or at once when
// called after Start), before any query.
func TestPodsWatch(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		before    func(*Lister) // before Start
		after     func(*Lister) // after Start
		wantEager bool
	}{
		{name: "no watch asked: from the first pods query"},
		{name: "nodes watched: pods still from the first query", before: (*Lister).WatchNodes},
		{name: "WatchPods before Start (metrics.k8s.io)", before: (*Lister).WatchPods, wantEager: true},
		{name: "WatchPods after Start", after: (*Lister).WatchPods, wantEager: true},
	}
	ns := schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}
	node := schema.GroupVersionKind{Version: "v1", Kind: "Node"}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			scheme := metadatafake.NewTestScheme()
			metav1.AddMetaToScheme(scheme)
			client := metadatafake.NewSimpleMetadataClient(scheme, append(fourPods(),
				obj(ns, "", "default", map[string]string{"team": "a"}),
				obj(ns, "", "other", map[string]string{"team": "b"}),
				obj(node, "", "node-a", nil))...)
			// podCalls counts the lists and watches of pods that reached
			// the API server.
			podCalls := func() (lists, watches int) {
				for _, a := range client.Actions() {
					if a.GetResource().Resource != "pods" {
						continue
					}
					switch a.GetVerb() {
					case "list":
						lists++
					case "watch":
						watches++
					}
				}
				return lists, watches
			}
			m := mapper().(*apimeta.DefaultRESTMapper)
			m.Add(node, apimeta.RESTScopeRoot)
			l := New(client, m)
			if tc.before != nil {
				tc.before(l)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			l.Start(ctx)
			if tc.after != nil {
				tc.after(l)
			}
			qctx, qcancel := context.WithTimeout(ctx, 10*time.Second)
			defer qcancel()

			// another resource's first query starts its informer, not the
			// pods' one
			got, err := l.ListNames(qctx, schema.GroupResource{Resource: "namespaces"}, "", labels.SelectorFromSet(labels.Set{"team": "a"}))
			if err != nil || strings.Join(got, ",") != "default" {
				t.Fatalf("namespaces team=a = %v, %v; want default", got, err)
			}
			if tc.wantEager {
				for !l.PodsSynced() {
					if qctx.Err() != nil {
						t.Fatal("pods not watched before their first query")
					}
					time.Sleep(10 * time.Millisecond)
				}
				if lists, watches := podCalls(); lists != 1 || watches < 1 {
					t.Errorf("before any pods query: %d lists, %d watches of pods; want 1 and at least 1", lists, watches)
				}
				p, err := l.Pods().Lister.ByNamespace("default").Get("web-1")
				if err != nil || p.(*metav1.PartialObjectMetadata).Labels["app"] != "web" {
					t.Errorf("Pods() web-1 = %v, %v", p, err)
				}
			} else {
				time.Sleep(100 * time.Millisecond) // a stray informer would have listed by now
				l.mu.Lock()
				_, watched := l.informers[PodsGVR.GroupResource()]
				l.mu.Unlock()
				if watched || l.PodsSynced() {
					t.Errorf("pods informer before the first pods query (synced: %v)", l.PodsSynced())
				}
				if lists, watches := podCalls(); lists != 0 || watches != 0 {
					t.Errorf("before the first pods query: %d lists, %d watches of pods reached the API server", lists, watches)
				}
			}

			// the first pods queries, at once: one informer, right answers
			pods := schema.GroupResource{Resource: "pods"}
			queries := []struct {
				ns, sel, want string
			}{
				{"default", "app=web", "web-1,web-2"},
				{"", "app=web", "web-1,web-2,web-9"},
				{"default", "app=db", "db-1"},
				{"other", "app=db", ""},
			}
			answers := make([]string, len(queries))
			errs := make([]error, len(queries))
			var wg sync.WaitGroup
			for i, q := range queries {
				wg.Go(func() {
					sel, err := labels.Parse(q.sel)
					if err != nil {
						errs[i] = err
						return
					}
					names, err := l.ListNames(qctx, pods, q.ns, sel)
					sort.Strings(names)
					answers[i], errs[i] = strings.Join(names, ","), err
				})
			}
			wg.Wait()
			for i, q := range queries {
				if errs[i] != nil || answers[i] != q.want {
					t.Errorf("pods %s in %q = %q, %v; want %q", q.sel, q.ns, answers[i], errs[i], q.want)
				}
			}
			if !l.PodsSynced() {
				t.Error("PodsSynced is false after pods queries answered")
			}
			if lists, _ := podCalls(); lists != 1 {
				t.Errorf("pods listed %d times, want once (one shared informer)", lists)
			}
		})
	}
}
