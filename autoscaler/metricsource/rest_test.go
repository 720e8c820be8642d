package metricsource

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	custommetricsv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	externalmetricsv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"

	"github.com/metricscale/metricscale/providers/changefeed"
)

type v1beta2Only struct{}

func (v1beta2Only) PreferredVersion() (schema.GroupVersion, error) {
	return custommetricsv1beta2.SchemeGroupVersion, nil
}
func (v1beta2Only) Invalidate() {}

// TestRESTPaths: the reads go to the paths the HPA controller's clients
// use, with the selectors as query parameters, and decode the answers.
func TestRESTPaths(t *testing.T) {
	t.Parallel()
	ts := metav1.NewTime(time.Unix(1767225600, 0))
	value := func(name string, v string) custommetricsv1beta2.MetricValue {
		return custommetricsv1beta2.MetricValue{DescribedObject: corev1.ObjectReference{Name: name}, Metric: custommetricsv1beta2.MetricIdentifier{Name: "m"}, Value: resource.MustParse(v), Timestamp: ts}
	}
	custom := func(items ...custommetricsv1beta2.MetricValue) any {
		return custommetricsv1beta2.MetricValueList{TypeMeta: metav1.TypeMeta{APIVersion: "custom.metrics.k8s.io/v1beta2", Kind: "MetricValueList"}, Items: items}
	}
	answers := map[string]any{
		"/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/rps?labelSelector=app%3Dweb&metricLabelSelector=code%3D200": custom(value("web-0", "2"), value("web-1", "500m")),
		"/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/deployments.apps/web/hits":                                         custom(value("web", "7")),
		"/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/metrics/queue":                                                     custom(value("default", "3")),
		"/apis/external.metrics.k8s.io/v1beta1/namespaces/default/lag?labelSelector=topic%3Da": externalmetricsv1beta1.ExternalMetricValueList{
			TypeMeta: metav1.TypeMeta{APIVersion: "external.metrics.k8s.io/v1beta1", Kind: "ExternalMetricValueList"},
			Items:    []externalmetricsv1beta1.ExternalMetricValue{{MetricName: "lag", Value: resource.MustParse("4"), Timestamp: ts}, {MetricName: "lag", Value: resource.MustParse("1.5"), Timestamp: ts}},
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		uri := r.URL.Path // decoded: "*" is sent as %2A
		if r.URL.RawQuery != "" {
			uri += "?" + r.URL.RawQuery
		}
		a, ok := answers[uri]
		if !ok {
			t.Errorf("unexpected request %s", uri)
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(a)
	}))
	t.Cleanup(srv.Close)
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Version: "v1"}, {Group: "apps", Version: "v1"}})
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, meta.RESTScopeNamespace)
	var observed []string
	src, err := NewREST(&rest.Config{Host: srv.URL, QPS: -1}, mapper, v1beta2Only{}, func(api string, _ time.Duration, err error) {
		if err != nil {
			api += " failed"
		}
		observed = append(observed, api)
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pods, _, err := src.PodsMetric(ctx, "rps", "default", labels.SelectorFromSet(labels.Set{"app": "web"}), labels.SelectorFromSet(labels.Set{"code": "200"}))
	if err != nil || len(pods) != 2 || pods["web-0"].Value != 2000 || pods["web-1"].Value != 500 {
		t.Errorf("pods: %v, %v", pods, err)
	}
	v, _, err := src.ObjectMetric(ctx, "hits", "default", &autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}, labels.Everything())
	if err != nil || v != 7000 {
		t.Errorf("object: %d, %v", v, err)
	}
	v, _, err = src.ObjectMetric(ctx, "queue", "default", &autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Kind: "Namespace", Name: "ignored"}, labels.Everything())
	if err != nil || v != 3000 {
		t.Errorf("namespace: %d, %v", v, err)
	}
	ext, _, err := src.ExternalMetric(ctx, "lag", "default", labels.SelectorFromSet(labels.Set{"topic": "a"}))
	if err != nil || len(ext) != 2 || ext[0] != 4000 || ext[1] != 1500 {
		t.Errorf("external: %v, %v", ext, err)
	}
	if got := len(observed); got != 4 {
		t.Errorf("observed %v, want 4 reads", observed)
	}
}

// TestRESTHonoursContext: every read returns when its context ends,
// whatever the adapter does (k8s.io/metrics' custom and external clients
// read with context.TODO()).
func TestRESTHonoursContext(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(srv.Close)
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Version: "v1"}, {Group: "apps", Version: "v1"}})
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, meta.RESTScopeNamespace)
	src, err := NewREST(&rest.Config{Host: srv.URL, QPS: -1}, mapper, v1beta2Only{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ref := &autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Kind: "Pod", Name: "web-0"}
	for name, read := range map[string]func(context.Context) error{
		"resource": func(ctx context.Context) error {
			_, _, err := src.ResourceMetric(ctx, corev1.ResourceCPU, "default", labels.Everything(), "")
			return err
		},
		"pods": func(ctx context.Context) error {
			_, _, err := src.PodsMetric(ctx, "rps", "default", labels.Everything(), labels.Everything())
			return err
		},
		"object": func(ctx context.Context) error {
			_, _, err := src.ObjectMetric(ctx, "rps", "default", ref, labels.Everything())
			return err
		},
		"external": func(ctx context.Context) error {
			_, _, err := src.ExternalMetric(ctx, "lag", "default", labels.Everything())
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			// without the context honoured, this waits for the test timeout
			if err := read(ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("error %v; want the context's deadline", err)
			}
		})
	}
}

// TestExternalQuery: the external read sends the query the parameter codec
// makes of ListOptions{LabelSelector}, as k8s.io/metrics' client does.
func TestExternalQuery(t *testing.T) {
	t.Parallel()
	queries := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queries <- r.URL.RawQuery
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(externalmetricsv1beta1.ExternalMetricValueList{
			TypeMeta: metav1.TypeMeta{APIVersion: "external.metrics.k8s.io/v1beta1", Kind: "ExternalMetricValueList"},
			Items:    []externalmetricsv1beta1.ExternalMetricValue{{MetricName: "lag", Value: resource.MustParse("1")}}})
	}))
	t.Cleanup(srv.Close)
	cfg := &rest.Config{Host: srv.URL}
	src, err := NewREST(cfg, nil, v1beta2Only{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	codec, err := apiClient(cfg, externalmetricsv1beta1.SchemeGroupVersion, scheme.Codecs.WithoutConversion())
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"", "topic=a", "key in (a,b),!gone,tier!=x"} {
		sel, err := labels.Parse(text)
		if err != nil {
			t.Fatal(err)
		}
		want := codec.Get().VersionedParams(&metav1.ListOptions{LabelSelector: sel.String()}, metav1.ParameterCodec).URL().RawQuery
		if _, _, err := src.ExternalMetric(context.Background(), "lag", "ns", sel); err != nil {
			t.Fatal(err)
		}
		if got := <-queries; got != want {
			t.Errorf("selector %q: query %q, want %q", text, got, want)
		}
	}
}

func TestExternalServedBy(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if name := r.URL.Query().Get("labelSelector"); name != "" {
			w.Header().Set(changefeed.ReplicaHeader, strings.TrimPrefix(name, "replica="))
		}
		if r.URL.Path == "/apis/external.metrics.k8s.io/v1beta1/namespaces/ns/broken" {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(externalmetricsv1beta1.ExternalMetricValueList{
			TypeMeta: metav1.TypeMeta{APIVersion: "external.metrics.k8s.io/v1beta1", Kind: "ExternalMetricValueList"},
			Items:    []externalmetricsv1beta1.ExternalMetricValue{{MetricName: "lag", Value: resource.MustParse("1")}}})
	}))
	t.Cleanup(srv.Close)
	src, err := NewREST(&rest.Config{Host: srv.URL}, nil, v1beta2Only{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		metric, selector, want string
		fails                  bool
	}{
		{metric: "lag", selector: "replica=a1", want: "a1"},
		{metric: "lag", selector: "", want: ""}, // an answer that names no replica
		{metric: "broken", selector: "replica=b2", want: "b2", fails: true},
	} {
		served := "stale"
		sel, err := labels.Parse(tc.selector)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = src.ExternalMetric(WithServedBy(context.Background(), &served), tc.metric, "ns", sel)
		if (err != nil) != tc.fails {
			t.Fatalf("%s{%s}: error %v, want failure %v", tc.metric, tc.selector, err, tc.fails)
		}
		if served != tc.want {
			t.Errorf("%s{%s}: served by %q, want %q", tc.metric, tc.selector, served, tc.want)
		}
	}
	// Without WithServedBy nothing is recorded, and the read works.
	if _, _, err := src.ExternalMetric(context.Background(), "lag", "ns", labels.Everything()); err != nil {
		t.Fatal(err)
	}
}
