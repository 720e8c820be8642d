package apiservice

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	cmv1beta1 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta1"
	cmv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	emv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"

	"github.com/metricscale/metricscale/certs"
	"github.com/metricscale/metricscale/providers"
)

const secretToken = "s3cr3t-token-never-in-messages"

// fake is a remote adapter whose answers each test scripts, serving the
// real k8s.io/metrics types; it records every request it gets.
type fake struct {
	srv       *httptest.Server
	caFile    string
	tokenFile string

	mu       sync.Mutex
	token    string
	requests []string // "path?query"
	handle   func(w http.ResponseWriter, r *http.Request)
}

func newFake(t *testing.T, handle func(w http.ResponseWriter, r *http.Request)) *fake {
	t.Helper()
	f := &fake{token: secretToken, handle: handle}
	f.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.requests = append(f.requests, r.URL.EscapedPath()+"?"+r.URL.RawQuery)
		tok, h := f.token, f.handle
		f.mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+tok {
			writeJSON(w, http.StatusUnauthorized, &metav1.Status{Status: metav1.StatusFailure, Message: "Unauthorized", Reason: metav1.StatusReasonUnauthorized, Code: 401})
			return
		}
		h(w, r)
	}))
	t.Cleanup(f.srv.Close)
	dir := t.TempDir()
	f.caFile = filepath.Join(dir, "ca.crt")
	f.tokenFile = filepath.Join(dir, "token")
	writeFile(t, f.caFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw})))
	writeFile(t, f.tokenFile, secretToken+"\n")
	return f
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	// write and rename, as the kubelet swaps a projected token
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func (f *fake) setHandler(h func(w http.ResponseWriter, r *http.Request)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handle = h
}

func (f *fake) reqs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.requests...)
}

func (f *fake) provider(t *testing.T, extra string) *Provider {
	t.Helper()
	raw := fmt.Sprintf(`{"url":%q,"caFile":%q,"tokenFile":%q,"timeout":"2s"%s}`, f.srv.URL, f.caFile, f.tokenFile, extra)
	p, err := Factory{}.New("keda", json.RawMessage(raw), providers.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	return p.(*Provider)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func notFound(msg string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, &metav1.Status{Status: metav1.StatusFailure, Message: msg, Reason: metav1.StatusReasonNotFound, Code: 404})
	}
}

// askedFor is what a query path asks about, as a remote reads it: the
// metric (the last segment), the namespace and the object's name ("*" for
// a selector query).
func askedFor(r *http.Request) (metric, namespace, name string) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
	metric = parts[len(parts)-1]
	for i := 0; i+1 < len(parts); i++ {
		if parts[i] == "namespaces" {
			namespace = parts[i+1]
			break
		}
	}
	if len(parts) >= 2 {
		name = parts[len(parts)-2]
	}
	if name == "metrics" { // a namespace's metric: .../namespaces/NAME/metrics/METRIC
		name = namespace
	}
	return metric, namespace, name
}

// customAnswer answers any custom query with one v1beta2 value per name,
// of the metric and in the namespace asked for; with no names given, for
// the object asked for.
func customAnswer(names ...string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		metric, namespace, asked := askedFor(r)
		list := cmv1beta2.MetricValueList{TypeMeta: metav1.TypeMeta{Kind: "MetricValueList", APIVersion: "custom.metrics.k8s.io/v1beta2"}}
		for i, n := range names {
			if n == "" {
				n = asked
			}
			list.Items = append(list.Items, cmv1beta2.MetricValue{
				DescribedObject: corev1.ObjectReference{Kind: "Pod", Namespace: namespace, Name: n, APIVersion: "v1"},
				Metric:          cmv1beta2.MetricIdentifier{Name: metric},
				Timestamp:       metav1.Now(),
				Value:           *resource.NewMilliQuantity(int64(1500*(i+1)), resource.DecimalSI),
			})
		}
		writeJSON(w, http.StatusOK, &list)
	}
}

// externalAnswer answers any external query with one value each, of the
// metric asked for.
func externalAnswer(values ...int64) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		metric, _, _ := askedFor(r)
		list := emv1beta1.ExternalMetricValueList{TypeMeta: metav1.TypeMeta{Kind: "ExternalMetricValueList", APIVersion: "external.metrics.k8s.io/v1beta1"}}
		for i, v := range values {
			list.Items = append(list.Items, emv1beta1.ExternalMetricValue{
				MetricName: metric, MetricLabels: map[string]string{"queue": fmt.Sprint("q", i)},
				Timestamp: metav1.Now(), Value: *resource.NewQuantity(v, resource.DecimalSI),
			})
		}
		writeJSON(w, http.StatusOK, &list)
	}
}

func sel(t *testing.T, s string) labels.Selector {
	t.Helper()
	l, err := labels.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

var (
	pods        = schema.GroupResource{Resource: "pods"}
	deployments = schema.GroupResource{Group: "apps", Resource: "deployments"}
	nodes       = schema.GroupResource{Resource: "nodes"}
	namespaces  = schema.GroupResource{Resource: "namespaces"}
)

// TestForwardedRequests: what reaches the remote for each kind of query —
// paths, namespaces, object names and selectors as the HPA sent them.
func TestForwardedRequests(t *testing.T) {
	t.Parallel()
	const cm = "/apis/custom.metrics.k8s.io/v1beta2"
	const em = "/apis/external.metrics.k8s.io/v1beta1"
	for _, tc := range []struct {
		name  string
		query func(t *testing.T, p *Provider) error
		want  string
	}{
		{"pod by name", func(t *testing.T, p *Provider) error {
			_, err := p.GetMetricByName(context.Background(), types.NamespacedName{Namespace: "ns", Name: "web-1"}, providers.CustomMetricInfo{GroupResource: pods, Namespaced: true, Metric: "http_requests"}, labels.Everything())
			return err
		}, cm + "/namespaces/ns/pods/web-1/http_requests?"},
		{"pod by name, metric selector", func(t *testing.T, p *Provider) error {
			_, err := p.GetMetricByName(context.Background(), types.NamespacedName{Namespace: "ns", Name: "web-1"}, providers.CustomMetricInfo{GroupResource: pods, Metric: "http_requests"}, sel(t, "code in (200,201),path!=health"))
			return err
		}, cm + "/namespaces/ns/pods/web-1/http_requests?metricLabelSelector=code+in+%28200%2C201%29%2Cpath%21%3Dhealth"},
		{"deployment by name", func(t *testing.T, p *Provider) error {
			_, err := p.GetMetricByName(context.Background(), types.NamespacedName{Namespace: "ns", Name: "web"}, providers.CustomMetricInfo{GroupResource: deployments, Metric: "http_requests"}, nil)
			return err
		}, cm + "/namespaces/ns/deployments.apps/web/http_requests?"},
		{"node (cluster-scoped)", func(t *testing.T, p *Provider) error {
			_, err := p.GetMetricByName(context.Background(), types.NamespacedName{Name: "node-1"}, providers.CustomMetricInfo{GroupResource: nodes, Metric: "http_requests"}, nil)
			return err
		}, cm + "/nodes/node-1/http_requests?"},
		{"namespace", func(t *testing.T, p *Provider) error {
			_, err := p.GetMetricByName(context.Background(), types.NamespacedName{Name: "team-a"}, providers.CustomMetricInfo{GroupResource: namespaces, Metric: "http_requests"}, nil)
			return err
		}, cm + "/namespaces/team-a/metrics/http_requests?"},
		{"pods by selector", func(t *testing.T, p *Provider) error {
			_, err := p.GetMetricBySelector(context.Background(), "ns", sel(t, "app=web,tier notin (db)"), providers.CustomMetricInfo{GroupResource: pods, Metric: "http_requests"}, sel(t, "code=200"))
			return err
		}, cm + "/namespaces/ns/pods/%2A/http_requests?labelSelector=app%3Dweb%2Ctier+notin+%28db%29&metricLabelSelector=code%3D200"},
		{"pods, every one", func(t *testing.T, p *Provider) error {
			_, err := p.GetMetricBySelector(context.Background(), "ns", labels.Everything(), providers.CustomMetricInfo{GroupResource: pods, Metric: "http_requests"}, labels.Everything())
			return err
		}, cm + "/namespaces/ns/pods/%2A/http_requests?"},
		{"external", func(t *testing.T, p *Provider) error {
			_, err := p.GetExternalMetric(context.Background(), "ns", labels.Everything(), providers.ExternalMetricInfo{Metric: "s0-rabbitmq-orders"})
			return err
		}, em + "/namespaces/ns/s0-rabbitmq-orders?"},
		{"external, selector", func(t *testing.T, p *Provider) error {
			_, err := p.GetExternalMetric(context.Background(), "ns", sel(t, "queue=orders,shard>2,!canary"), providers.ExternalMetricInfo{Metric: "queue_depth"})
			return err
		}, em + "/namespaces/ns/queue_depth?labelSelector=%21canary%2Cqueue%3Dorders%2Cshard%3E2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
				if strings.HasPrefix(r.URL.Path, "/apis/external") {
					externalAnswer(4)(w, r)
				} else {
					customAnswer("")(w, r)
				}
			})
			if err := tc.query(t, f.provider(t, "")); err != nil {
				t.Fatal(err)
			}
			if got := f.reqs(); len(got) != 1 || got[0] != tc.want {
				t.Errorf("remote got %q, want [%q]", got, tc.want)
			}
		})
	}
}

// TestValues: the remote's answers are decoded into the API types, from
// v1beta2 and from a v1beta1-only remote.
func TestValues(t *testing.T) {
	t.Parallel()
	f := newFake(t, customAnswer("web-1", "web-2"))
	p := f.provider(t, "")
	list, err := p.GetMetricBySelector(context.Background(), "ns", sel(t, "app=web"), providers.CustomMetricInfo{GroupResource: pods, Metric: "http_requests"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 || list.Items[0].DescribedObject.Name != "web-1" || list.Items[1].Value.MilliValue() != 3000 || list.Items[0].Metric.Name != "http_requests" {
		t.Errorf("list %+v", list.Items)
	}

	f.setHandler(externalAnswer(12, 5))
	ext, err := p.GetExternalMetric(context.Background(), "ns", nil, providers.ExternalMetricInfo{Metric: "queue_depth"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ext.Items) != 2 || ext.Items[0].Value.Value() != 12 || ext.Items[1].MetricLabels["queue"] != "q1" {
		t.Errorf("external %+v", ext.Items)
	}

	// a remote serving only custom.metrics.k8s.io/v1beta1
	old := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/apis/custom.metrics.k8s.io/v1beta1":
			writeJSON(w, 200, &metav1.APIResourceList{GroupVersion: "custom.metrics.k8s.io/v1beta1", APIResources: []metav1.APIResource{{Name: "pods/http_requests", Namespaced: true}}})
		case strings.HasPrefix(r.URL.Path, "/apis/custom.metrics.k8s.io/v1beta1/"):
			writeJSON(w, 200, &cmv1beta1.MetricValueList{Items: []cmv1beta1.MetricValue{{
				DescribedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "web-1"},
				MetricName:      "http_requests", Timestamp: metav1.Now(), Value: resource.MustParse("250m"),
			}}})
		default:
			notFound("the server could not find the requested resource")(w, r)
		}
	})
	q := func(p *Provider) (int64, error) {
		mv, err := p.GetMetricByName(context.Background(), types.NamespacedName{Namespace: "ns", Name: "web-1"}, providers.CustomMetricInfo{GroupResource: pods, Metric: "http_requests"}, nil)
		if err != nil {
			return 0, err
		}
		if mv.Metric.Name != "http_requests" {
			t.Errorf("v1beta1 metric name not converted: %+v", mv)
		}
		return mv.Value.MilliValue(), nil
	}
	// before discovery: v1beta2, then v1beta1 after its 404
	p = old.provider(t, "")
	if v, err := q(p); err != nil || v != 250 {
		t.Errorf("before discovery: %d, %v; want 250", v, err)
	}
	// after discovery: straight to v1beta1
	_ = p.Refresh(context.Background()) // external is not served: listed empty, no error
	before := len(old.reqs())
	if v, err := q(p); err != nil || v != 250 {
		t.Errorf("after discovery: %d, %v; want 250", v, err)
	}
	if got := old.reqs()[before:]; len(got) != 1 || !strings.HasPrefix(got[0], "/apis/custom.metrics.k8s.io/v1beta1/") {
		t.Errorf("after discovery the remote got %q, want one v1beta1 query", got)
	}
	if l := p.ListAllMetrics(); len(l) != 1 || l[0].Metric != "http_requests" || l[0].GroupResource != pods || !l[0].Namespaced {
		t.Errorf("discovery %v", l)
	}
}

func apiStatus(t *testing.T, err error) (int, string) {
	t.Helper()
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		t.Fatalf("%T is not an API status: %v", err, err)
	}
	return int(st.Status().Code), st.Status().Message
}

// TestNotFound: a remote 404, or an empty answer, is our 404 naming the
// metric; unknown to the remote's discovery, it counts as an unknown metric.
func TestNotFound(t *testing.T) {
	t.Parallel()
	discovery := func(w http.ResponseWriter, r *http.Request) bool {
		switch r.URL.Path {
		case "/apis/custom.metrics.k8s.io/v1beta2":
			writeJSON(w, 200, &metav1.APIResourceList{APIResources: []metav1.APIResource{{Name: "pods/http_requests", Namespaced: true}}})
		case "/apis/external.metrics.k8s.io/v1beta1":
			writeJSON(w, 200, &metav1.APIResourceList{APIResources: []metav1.APIResource{{Name: "queue_depth", Namespaced: true}}})
		default:
			return false
		}
		return true
	}
	for _, tc := range []struct {
		name       string
		answer     func(w http.ResponseWriter, r *http.Request)
		discovered bool
		metric     string
		external   bool
		wantReason providers.Reason
		wantMsg    string
	}{
		{"remote 404", notFound("the server could not find the metric http_requests for pods web-9"), false, "http_requests", false, providers.ReasonNoValue, "web-9"},
		{"remote 404, listed", notFound("no value for web-9"), true, "http_requests", false, providers.ReasonNoValue, "no value for web-9"},
		{"remote 404, not listed", notFound("nope"), true, "other_metric", false, providers.ReasonUnknownMetric, "other_metric"},
		{"empty custom list", customAnswer(), false, "http_requests", false, providers.ReasonNoValue, "empty list"},
		{"external 404", notFound("scaledobject not found"), false, "queue_depth", true, providers.ReasonNoValue, "scaledobject not found"},
		{"external 404, not listed", notFound("x"), true, "s1-unknown", true, providers.ReasonUnknownMetric, "s1-unknown"},
		{"empty external list", externalAnswer(), true, "queue_depth", true, providers.ReasonNoValue, "empty list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
				if !discovery(w, r) {
					tc.answer(w, r)
				}
			})
			p := f.provider(t, "")
			if tc.discovered {
				if err := p.Refresh(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			var err error
			var served bool
			if tc.external {
				l, gerr := p.GetExternalMetric(context.Background(), "ns", nil, providers.ExternalMetricInfo{Metric: tc.metric})
				served, err = l != nil, gerr
			} else {
				l, gerr := p.GetMetricBySelector(context.Background(), "ns", labels.Everything(), providers.CustomMetricInfo{GroupResource: pods, Metric: tc.metric}, nil)
				served, err = l != nil, gerr
			}
			if err == nil || served {
				t.Fatalf("served %v, err %v; want a 404 and no value", served, err)
			}
			code, msg := apiStatus(t, err)
			if code != 404 || !strings.Contains(msg, tc.metric) || !strings.Contains(msg, tc.wantMsg) {
				t.Errorf("got %d %q; want 404 naming %s and saying %q", code, msg, tc.metric, tc.wantMsg)
			}
			if r := providers.ReasonOf(err); r != tc.wantReason {
				t.Errorf("reason %s, want %s", r, tc.wantReason)
			}
		})
	}
}

// TestUnavailable: every failure of the remote is a 503 naming the
// provider, without the token, and never a value.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	refused := func(t *testing.T) string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return addr
	}
	for _, tc := range []struct {
		name   string
		answer func(w http.ResponseWriter, r *http.Request)
		setup  func(t *testing.T, f *fake) string // extra options
		want   string
	}{
		{name: "500", answer: func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, 500, &metav1.Status{Message: "prometheus query failed", Code: 500})
		}, want: "answered 500 Internal Server Error: prometheus query failed"},
		{name: "503 not JSON", answer: func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "upstream connect error", 503)
		}, want: "answered 503 Service Unavailable: upstream connect error"},
		{name: "401: token rejected", setup: func(t *testing.T, f *fake) string {
			f.mu.Lock()
			f.token = "another"
			f.mu.Unlock()
			return ""
		}, want: "answered 401 Unauthorized"},
		{name: "403: RBAC", answer: func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, 403, &metav1.Status{Message: `external.metrics.k8s.io "queue_depth" is forbidden: User "system:serviceaccount:metricscale:metricscale-adapter" cannot list resource`, Code: 403})
		}, want: "cannot list resource"},
		{name: "timeout", answer: func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}, setup: func(t *testing.T, f *fake) string { return `,"timeout":"100ms"` }, want: "did not answer in time"},
		{name: "refused", setup: func(t *testing.T, f *fake) string {
			return fmt.Sprintf(`,"url":"https://%s"`, refused(t))
		}, want: "connection refused"},
		{name: "wrong CA", setup: func(t *testing.T, f *fake) string {
			_, other, err := certs.NewCA("another-ca", time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, f.caFile, string(other.CertPEM))
			return ""
		}, want: "certificate"},
		{name: "token file missing", setup: func(t *testing.T, f *fake) string {
			if err := os.Remove(f.tokenFile); err != nil {
				t.Fatal(err)
			}
			return ""
		}, want: "reading tokenFile"},
		{name: "not JSON", answer: func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(200)
			_, _ = w.Write([]byte("<html>"))
		}, want: "decoding the remote's ExternalMetricValueList"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			answer := tc.answer
			if answer == nil {
				answer = externalAnswer(1)
			}
			f := newFake(t, answer)
			extra := ""
			if tc.setup != nil {
				extra = tc.setup(t, f)
			}
			// a later "url" wins in encoding/json
			p := f.provider(t, extra)
			l, err := p.GetExternalMetric(context.Background(), "ns", nil, providers.ExternalMetricInfo{Metric: "queue_depth"})
			if err == nil || l != nil {
				t.Fatalf("got %v, %v; want a 503 and no value", l, err)
			}
			code, msg := apiStatus(t, err)
			if code != 503 || !strings.Contains(msg, `"keda"`) || !strings.Contains(msg, "queue_depth") || !strings.Contains(msg, tc.want) {
				t.Errorf("got %d %q; want 503 naming provider keda and the metric, saying %q", code, msg, tc.want)
			}
			if strings.Contains(msg, secretToken) {
				t.Errorf("the message carries the token: %q", msg)
			}
			if p.Health() == nil {
				t.Error("Health() is nil after a failed call")
			}
		})
	}
}

// TestTokenRotation: a rotated token file is used by the next request.
func TestTokenRotation(t *testing.T) {
	t.Parallel()
	f := newFake(t, externalAnswer(3))
	p := f.provider(t, "")
	get := func() error {
		_, err := p.GetExternalMetric(context.Background(), "ns", nil, providers.ExternalMetricInfo{Metric: "queue_depth"})
		return err
	}
	if err := get(); err != nil {
		t.Fatal(err)
	}
	// the remote now accepts only the new token; the kubelet writes it
	f.mu.Lock()
	f.token = "rotated-token"
	f.mu.Unlock()
	if err := get(); err == nil {
		t.Fatal("old token accepted after the rotation")
	}
	writeFile(t, f.tokenFile, "rotated-token\n")
	if err := get(); err != nil {
		t.Fatalf("after the token file was rotated: %v", err)
	}
}

// TestDiscovery: the lists are the remote's, as last read; a failed read
// keeps them; a read in progress (the remote hanging) does not hold up
// discovery; a group the remote does not serve lists nothing.
func TestDiscovery(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	external := []string{"s0-rabbitmq-orders", "s1-kafka-lag"}
	hang := make(chan struct{})
	var hung bool
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		h, ext := hung, append([]string(nil), external...)
		mu.Unlock()
		if h {
			select {
			case <-hang:
			case <-r.Context().Done():
			}
			return
		}
		switch r.URL.Path {
		case "/apis/custom.metrics.k8s.io/v1beta2":
			writeJSON(w, 200, &metav1.APIResourceList{APIResources: []metav1.APIResource{
				{Name: "pods/http_requests", Namespaced: true}, {Name: "namespaces/queue_depth"}, {Name: "deployments.apps/latency", Namespaced: true}, {Name: "malformed"}}})
		case "/apis/external.metrics.k8s.io/v1beta1":
			var rl metav1.APIResourceList
			for _, n := range ext {
				rl.APIResources = append(rl.APIResources, metav1.APIResource{Name: n, Namespaced: true})
			}
			writeJSON(w, 200, &rl)
		default:
			notFound("no")(w, r)
		}
	})
	t.Cleanup(func() { close(hang) })
	p := f.provider(t, "")
	if l := p.ListAllExternalMetrics(); len(l) != 0 {
		t.Errorf("before the first read: %v", l)
	}
	if err := p.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantCustom := "deployments.apps/latency(namespaced=true) namespaces/queue_depth(namespaced=false) pods/http_requests(namespaced=true)"
	custom := func() string {
		var s []string
		for _, m := range p.ListAllMetrics() {
			s = append(s, fmt.Sprintf("%s/%s(namespaced=%v)", m.GroupResource, m.Metric, m.Namespaced))
		}
		return strings.Join(s, " ")
	}
	ext := func() string {
		var s []string
		for _, m := range p.ListAllExternalMetrics() {
			s = append(s, m.Metric)
		}
		return strings.Join(s, " ")
	}
	if got := custom(); got != wantCustom {
		t.Errorf("custom %s, want %s", got, wantCustom)
	}
	if got := ext(); got != "s0-rabbitmq-orders s1-kafka-lag" {
		t.Errorf("external %s", got)
	}

	// refreshed: a new ScaledObject appears
	mu.Lock()
	external = append(external, "s2-redis-jobs")
	mu.Unlock()
	if err := p.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := ext(); got != "s0-rabbitmq-orders s1-kafka-lag s2-redis-jobs" {
		t.Errorf("after refresh: %s", got)
	}

	// the remote hangs: a refresh is stuck, discovery answers the last lists
	mu.Lock()
	hung = true
	mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- p.Refresh(context.Background()) }()
	for range 100 {
		if got := ext(); got != "s0-rabbitmq-orders s1-kafka-lag s2-redis-jobs" {
			t.Fatalf("during a stuck refresh: %s", got)
		}
		if got := custom(); got != wantCustom {
			t.Fatalf("during a stuck refresh: %s", got)
		}
	}
	// the refresh ends with the timeout (2s) and keeps the lists
	if err := <-done; err == nil {
		t.Error("a refresh against a hanging remote succeeded")
	}
	if got := ext(); got != "s0-rabbitmq-orders s1-kafka-lag s2-redis-jobs" {
		t.Errorf("after a failed refresh: %s", got)
	}

	// a remote serving no external metrics group (prometheus-adapter without externalRules)
	g := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/apis/custom.metrics.k8s.io/v1beta2" {
			writeJSON(w, 200, &metav1.APIResourceList{APIResources: []metav1.APIResource{{Name: "pods/x", Namespaced: true}}})
			return
		}
		notFound("the server could not find the requested resource")(w, r)
	})
	q := g.provider(t, "")
	if err := q.Refresh(context.Background()); err != nil {
		t.Fatalf("a remote without external metrics: %v", err)
	}
	if len(q.ListAllExternalMetrics()) != 0 || len(q.ListAllMetrics()) != 1 {
		t.Errorf("lists %v %v", q.ListAllMetrics(), q.ListAllExternalMetrics())
	}
}

// TestCoalescing: identical concurrent queries reach the remote once;
// different ones do not share.
func TestCoalescing(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		<-release
		externalAnswer(7)(w, r)
	})
	p := f.provider(t, "")
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range 2 * n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			selector := labels.Everything()
			if i%2 == 1 {
				selector = sel(t, "queue=orders")
			}
			l, err := p.GetExternalMetric(context.Background(), "ns", selector, providers.ExternalMetricInfo{Metric: "queue_depth"})
			if err == nil && l.Items[0].Value.Value() != 7 {
				err = fmt.Errorf("value %v", l.Items[0].Value)
			}
			errs <- err
		}()
	}
	// the callers join the two calls in progress
	time.Sleep(200 * time.Millisecond)
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if got := len(f.reqs()); got != 2 {
		t.Errorf("%d concurrent queries of 2 kinds made %d remote calls, want 2: %q", 2*n, got, f.reqs())
	}
}

// TestDoneContext: a cancelled query gets an error even while the remote
// would answer.
func TestDoneContext(t *testing.T) {
	t.Parallel()
	f := newFake(t, externalAnswer(1))
	p := f.provider(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	l, err := p.GetExternalMetric(ctx, "ns", nil, providers.ExternalMetricInfo{Metric: "queue_depth"})
	if err == nil || l != nil {
		t.Fatalf("got %v, %v", l, err)
	}
	if code, _ := apiStatus(t, err); code != 503 {
		t.Errorf("code %d, want 503", code)
	}
}

// TestOneKind: with a kind disabled, the provider does not implement its
// interface, so the registry answers a 404 naming it.
func TestOneKind(t *testing.T) {
	t.Parallel()
	base := `{"url":"https://h","caFile":"/c","tokenFile":"/t",`
	p, err := Factory{}.New("k", json.RawMessage(base+`"custom":"disabled"}`), providers.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.(providers.CustomProvider); ok {
		t.Error("custom disabled, but the provider serves custom metrics")
	}
	if _, ok := p.(providers.ExternalProvider); !ok {
		t.Error("the provider serves no external metrics")
	}
	p, err = Factory{}.New("k", json.RawMessage(base+`"external":"disabled"}`), providers.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.(providers.ExternalProvider); ok {
		t.Error("external disabled, but the provider serves external metrics")
	}
	if _, ok := p.(providers.Runner); !ok {
		t.Error("the custom-only provider does not refresh its discovery")
	}
}

// TestClientCertificate: a client certificate is presented, and a rotated
// one is used for the next connection.
func TestClientCertificate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, caPair, err := certs.NewCA("clients", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	issue := func(cn string) {
		pair, err := ca.Issue(cn, certs.Client, nil, nil, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, certFile, string(pair.CertPEM))
		writeFile(t, keyFile, string(pair.KeyPEM))
	}
	issue("metricscale-adapter")
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.TLS.PeerCertificates[0].Subject.CommonName)
		mu.Unlock()
		externalAnswer(1)(w, r)
	}))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPair.CertPEM)
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caFile := filepath.Join(dir, "ca.crt")
	writeFile(t, caFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})))
	raw := fmt.Sprintf(`{"url":%q,"caFile":%q,"clientCert":%q,"clientKey":%q}`, srv.URL, caFile, certFile, keyFile)
	pp, err := Factory{}.New("cert", json.RawMessage(raw), providers.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	p := pp.(*Provider)
	get := func() {
		t.Helper()
		if _, err := p.GetExternalMetric(context.Background(), "ns", nil, providers.ExternalMetricInfo{Metric: "m"}); err != nil {
			t.Fatal(err)
		}
	}
	get()
	issue("metricscale-adapter-rotated")
	p.client.CloseIdleConnections() // the next request makes a new connection
	get()
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(seen, " ") != "metricscale-adapter metricscale-adapter-rotated" {
		t.Errorf("the remote saw client certificates %q", seen)
	}
}

// TestRun: Run reads discovery when it starts and returns when its context
// is done.
func TestRun(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/apis/external.metrics.k8s.io/v1beta1" {
			writeJSON(w, 200, &metav1.APIResourceList{APIResources: []metav1.APIResource{{Name: "s0-redis-jobs", Namespaced: true}}})
			return
		}
		notFound("no")(w, r)
	})
	p := f.provider(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	for len(p.ListAllExternalMetrics()) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	if l := p.ListAllExternalMetrics(); l[0].Metric != "s0-redis-jobs" {
		t.Errorf("discovery %v", l)
	}
	cancel()
	<-done
}
