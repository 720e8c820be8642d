package fastpath

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"weak"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	"k8s.io/metrics/pkg/apis/external_metrics"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/apiserver"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
)

// fakeSource answers from lists set by the test, counting calls.
type fakeSource struct {
	mu    sync.Mutex
	lists map[string]*external_metrics.ExternalMetricValueList
	calls atomic.Int64
	block chan struct{} // if set, every call waits for it
	panic bool
}

func (f *fakeSource) set(metric string, l *external_metrics.ExternalMetricValueList) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lists == nil {
		f.lists = map[string]*external_metrics.ExternalMetricValueList{}
	}
	f.lists[metric] = l
}

func (f *fakeSource) GetExternalMetric(_ context.Context, _ string, sel labels.Selector, info provider.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	f.calls.Add(1)
	if f.block != nil {
		<-f.block
	}
	if f.panic {
		panic("boom")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.lists[info.Metric]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: external_metrics.GroupName, Resource: info.Metric}, "")
	}
	if sel.Empty() {
		return l, nil
	}
	out := &external_metrics.ExternalMetricValueList{}
	for _, it := range l.Items {
		if sel.Matches(labels.Set(it.MetricLabels)) {
			out.Items = append(out.Items, it)
		}
	}
	return out, nil
}

func bigList(n int, base int64) *external_metrics.ExternalMetricValueList {
	l := &external_metrics.ExternalMetricValueList{}
	for i := range n {
		l.Items = append(l.Items, external_metrics.ExternalMetricValue{
			MetricName: "big", MetricLabels: map[string]string{"queue": fmt.Sprintf("q-%d", i)},
			Value: *resourceQuantity(base + int64(i)),
		})
	}
	return l
}

// newTestHandler is the fast path with a bearer-token authenticator
// ("good": user hpa; "error": an authenticator error), an authorizer allowing
// hpa, the generic server's request info resolver, and a next handler that
// answers 299.
func newTestHandler(src ExternalSource, maxInflight, cacheBytes int) (*Handler, *atomic.Int64) {
	var chained atomic.Int64
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		chained.Add(1)
		w.WriteHeader(299)
	})
	authn := authenticator.RequestFunc(func(req *http.Request) (*authenticator.Response, bool, error) {
		switch req.Header.Get("Authorization") {
		case "Bearer good":
			return &authenticator.Response{User: &user.DefaultInfo{Name: "hpa", Groups: []string{user.AllAuthenticated}}}, true, nil
		case "Bearer anonymous":
			return &authenticator.Response{User: &user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}}, true, nil
		case "Bearer error":
			return nil, false, errors.New("token review failed")
		}
		return nil, false, nil
	})
	authz := authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		if a.GetUser().GetName() == "hpa" && a.GetVerb() == "list" && a.GetAPIGroup() == external_metrics.GroupName {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionNoOpinion, "not hpa", nil
	})
	resolver := &apirequest.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")}
	h := New(next, Config{
		Authenticator: authn, Authorizer: authz, RequestInfoResolver: resolver,
		Serializer: apiserver.Codecs, APISerializer: apiserver.Codecs, External: src,
		MaxInflight: maxInflight, EncodedCacheBytes: cacheBytes,
	})
	return h, &chained
}

func do(h http.Handler, method, target string, header http.Header) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestRouting(t *testing.T) {
	t.Parallel()
	src := &fakeSource{}
	src.set("queue", bigList(3, 0))
	h, chained := newTestHandler(src, 10, 0)
	good := http.Header{"Authorization": {"Bearer good"}}
	const p = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue"
	tests := []struct {
		name, method, target string
		header               http.Header
		code                 int // 299: handed to the chain
	}{
		{"list", "GET", p, good, 200},
		{"selector", "GET", p + "?labelSelector=queue%3Dq-1", good, 200},
		{"selector with +", "GET", p + "?labelSelector=queue+in+%28q-1%2Cq-2%29", good, 200},
		{"protobuf", "GET", p, http.Header{"Authorization": {"Bearer good"}, "Accept": {"application/vnd.kubernetes.protobuf"}}, 200},
		{"unknown metric", "GET", "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/nope", good, 404},
		{"no credentials", "GET", p, nil, 401},
		{"authenticator error", "GET", p, http.Header{"Authorization": {"Bearer error"}}, 401},
		{"anonymous: the chain decides", "GET", p, http.Header{"Authorization": {"Bearer anonymous"}}, 299},
		{"POST", "POST", p, good, 299},
		{"HEAD", "HEAD", p, good, 299},
		{"impersonation", "GET", p, http.Header{"Authorization": {"Bearer good"}, "Impersonate-User": {"x"}}, 299},
		{"impersonated group", "GET", p, http.Header{"Authorization": {"Bearer good"}, "Impersonate-Group": {"x"}}, 299},
		{"bad selector", "GET", p + "?labelSelector=queue+in+%28", good, 299},
		{"two selectors", "GET", p + "?labelSelector=a&labelSelector=b", good, 299},
		{"other parameter", "GET", p + "?limit=1", good, 299},
		{"watch", "GET", p + "?watch=1", good, 299},
		{"pretty", "GET", p + "?pretty=true", good, 299},
		{"YAML", "GET", p, http.Header{"Authorization": {"Bearer good"}, "Accept": {"application/yaml"}}, 299},
		{"table", "GET", p, http.Header{"Authorization": {"Bearer good"}, "Accept": {"application/json;as=Table;v=v1;g=meta.k8s.io"}}, 299},
		{"not acceptable", "GET", p, http.Header{"Authorization": {"Bearer good"}, "Accept": {"text/html"}}, 299},
		{"sub-path", "GET", p + "/x", good, 299},
		{"trailing slash", "GET", p + "/", good, 299},
		{"dot segment", "GET", "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/../default/queue", good, 299},
		{"encoded slash", "GET", "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/a%2Fb", good, 299},
		{"other version", "GET", "/apis/external.metrics.k8s.io/v1beta2/namespaces/default/queue", good, 299},
		{"no namespace", "GET", "/apis/external.metrics.k8s.io/v1beta1/namespaces/queue", good, 299},
		{"custom metrics", "GET", "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/m", good, 299},
	}
	for _, tc := range tests {
		before := chained.Load()
		rec := do(h, tc.method, tc.target, tc.header)
		if rec.Code != tc.code {
			t.Errorf("%s: %d %s, want %d", tc.name, rec.Code, rec.Body, tc.code)
		}
		if tc.code == 299 && chained.Load() != before+1 {
			t.Errorf("%s: not handed to the chain", tc.name)
		}
		if tc.code != 299 && rec.Header().Get("Audit-Id") == "" {
			t.Errorf("%s: no Audit-Id", tc.name)
		}
	}
	// 403 from the chain's writer, naming the user and the verb
	rec := do(h, "GET", p, http.Header{"Authorization": {"Bearer good"}, "Audit-Id": {"mine"}})
	if rec.Header().Get("Audit-Id") != "mine" {
		t.Errorf("the request's Audit-Id is not echoed: %q", rec.Header().Get("Audit-Id"))
	}
	h.c.Authorizer = authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
		return authorizer.DecisionDeny, "denied by test", nil
	})
	rec = do(h, "GET", p, good)
	if rec.Code != 403 || !strings.Contains(rec.Body.String(), `User \"hpa\" cannot list resource \"queue\"`) || !strings.Contains(rec.Body.String(), "denied by test") {
		t.Errorf("denied: %d %s", rec.Code, rec.Body)
	}
	h.c.Authorizer = authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
		return authorizer.DecisionNoOpinion, "", errors.New("webhook down")
	})
	if rec = do(h, "GET", p, good); rec.Code != 500 {
		t.Errorf("authorizer error: %d %s, want 500", rec.Code, rec.Body)
	}
}

// fakeCustom answers every custom metric query with one item, keeping what
// it was asked.
type fakeCustom struct {
	got []string
}

func (f *fakeCustom) GetMetricBySelector(_ context.Context, ns string, sel labels.Selector, info provider.CustomMetricInfo, msel labels.Selector) (*custom_metrics.MetricValueList, error) {
	f.got = append(f.got, fmt.Sprintf("%s %s %s %v %q %q", ns, info.GroupResource, info.Metric, info.Namespaced, sel, msel))
	return &custom_metrics.MetricValueList{Items: []custom_metrics.MetricValue{{
		DescribedObject: custom_metrics.ObjectReference{Kind: "Pod", Name: "web-1", Namespace: ns, APIVersion: "/v1"},
		Metric:          custom_metrics.MetricIdentifier{Name: info.Metric}, Value: *resourceQuantity(3),
	}}}, nil
}

func TestCustomRouting(t *testing.T) {
	t.Parallel()
	custom := &fakeCustom{}
	h, chained := newTestHandler(&fakeSource{}, 10, 0)
	h.c.Custom = custom
	h.c.Authorizer = authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		// the chain's attributes for RESOURCE/*/METRIC: get, name *, the metric as subresource
		if a.GetUser().GetName() == "hpa" && a.GetVerb() == "get" && a.GetName() == "*" && a.GetResource() == "pods" && a.GetSubresource() == "m" {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionNoOpinion, "", nil
	})
	good := http.Header{"Authorization": {"Bearer good"}}
	tests := []struct {
		target string
		code   int // 299: handed to the chain
		asked  string
	}{
		{"/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/m?labelSelector=app%3Dweb", 200, `default pods m true "app=web" ""`},
		{"/apis/custom.metrics.k8s.io/v1beta1/namespaces/default/pods/%2A/m?metricLabelSelector=path%3Da", 200, `default pods m true "" "path=a"`},
		{"/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/deployments.apps/*/m", 403, ""},
		{"/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/web-1/m", 299, ""},
		{"/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/metrics/m", 299, ""},
		{"/apis/custom.metrics.k8s.io/v1beta2/pods/*/m", 299, ""},
		{"/apis/custom.metrics.k8s.io/v1beta3/namespaces/default/pods/*/m", 299, ""},
		{"/apis/custom.metrics.k8s.io/v1beta2", 299, ""},
		{"/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/m?labelSelector=a&fieldSelector=b", 299, ""},
		{"/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/m?metricLabelSelector=%3D%3D", 299, ""},
	}
	for _, tc := range tests {
		custom.got = nil
		before := chained.Load()
		rec := do(h, "GET", tc.target, good)
		if rec.Code != tc.code {
			t.Errorf("%s: %d %s, want %d", tc.target, rec.Code, rec.Body, tc.code)
		}
		if tc.code == 299 && chained.Load() != before+1 {
			t.Errorf("%s: not handed to the chain", tc.target)
		}
		if tc.asked != "" && (len(custom.got) != 1 || custom.got[0] != tc.asked) {
			t.Errorf("%s: the provider was asked %q, want %q", tc.target, custom.got, tc.asked)
		}
		if tc.code == 200 && !strings.Contains(rec.Body.String(), `"kind":"MetricValueList"`) {
			t.Errorf("%s: %s", tc.target, rec.Body)
		}
	}
}

// TestEncodedCache: a provider handing out the same list again gets its
// encoding copied; a new list (a new result) is encoded anew.
func TestEncodedCache(t *testing.T) {
	t.Parallel()
	src := &fakeSource{}
	first := bigList(minCachedItems+10, 0)
	src.set("big", first)
	h, _ := newTestHandler(src, 10, 64<<20)
	const p = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/big"
	gzip := http.Header{"Authorization": {"Bearer good"}, "Accept-Encoding": {"gzip"}}
	plain := http.Header{"Authorization": {"Bearer good"}}

	a := do(h, "GET", p, plain)
	b := do(h, "GET", p, plain)
	if a.Code != 200 || b.Body.String() != a.Body.String() || b.Header().Get("Content-Type") != a.Header().Get("Content-Type") {
		t.Fatalf("second answer differs: %d %q / %q", a.Code, a.Header(), b.Header())
	}
	if n := len(h.encoded.m); n != 1 {
		t.Errorf("%d cached encodings, want 1", n)
	}
	do(h, "GET", p, gzip)
	do(h, "GET", p, http.Header{"Authorization": {"Bearer good"}, "Accept": {"application/vnd.kubernetes.protobuf"}})
	if n := len(h.encoded.m); n != 3 {
		t.Errorf("%d cached encodings after a gzip and a protobuf request, want 3", n)
	}
	// small and selected answers are not kept
	do(h, "GET", p+"?labelSelector=queue%3Dq-1", plain)
	if n := len(h.encoded.m); n != 3 {
		t.Errorf("%d cached encodings after a one-item answer, want 3", n)
	}

	src.set("big", bigList(minCachedItems+10, 1000))
	c := do(h, "GET", p, plain)
	var l struct {
		Items []struct{ Value string } `json:"items"`
	}
	if err := json.Unmarshal(c.Body.Bytes(), &l); err != nil || len(l.Items) == 0 || l.Items[0].Value != "1k" {
		t.Errorf("after a new result: %v %+v (a stale encoding?)", err, l.Items[:min(1, len(l.Items))])
	}

	off, _ := newTestHandler(src, 10, 0)
	do(off, "GET", p, plain)
	if len(off.encoded.m) != 0 {
		t.Error("the encoded cache kept an answer while off")
	}
}

func TestEncodedCacheBounds(t *testing.T) {
	t.Parallel()
	c := newEncodedCache(1000)
	lists := make([][]external_metrics.ExternalMetricValue, maxEncodedEntries+5)
	for i := range lists {
		lists[i] = make([]external_metrics.ExternalMetricValue, 1)
		c.put(encodedKey{first: weakFirst(lists[i]), n: 1}, &encoded{status: 200, body: make([]byte, 10)})
	}
	if len(c.m) > maxEncodedEntries || c.bytes != 10*len(c.m) {
		t.Errorf("%d entries, %d bytes", len(c.m), c.bytes)
	}
	big := encodedKey{first: weakFirst(lists[0]), n: 3}
	c.put(big, &encoded{status: 200, body: make([]byte, 300)}) // over maxBytes/4
	if c.get(big) != nil {
		t.Error("an answer over a quarter of the bound was kept")
	}
	for i := range 10 {
		c.put(encodedKey{first: weakFirst(lists[i]), n: 2}, &encoded{status: 200, body: make([]byte, 200)})
	}
	if c.bytes > 1000 {
		t.Errorf("%d bytes kept, bound 1000", c.bytes)
	}
	runtime.KeepAlive(lists)
}

func weakFirst(s []external_metrics.ExternalMetricValue) weak.Pointer[external_metrics.ExternalMetricValue] {
	return weak.Make(&s[0])
}

func resourceQuantity(v int64) *resource.Quantity { return resource.NewQuantity(v, resource.DecimalSI) }

func TestSelectorCache(t *testing.T) {
	t.Parallel()
	c := newSelectorCache(3)
	s1, err := c.parse("a=b,c in (d,e)")
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := c.parse("a=b,c in (d,e)")
	if s1.String() != s2.String() || len(c.m) != 1 {
		t.Errorf("%q %q, %d entries", s1, s2, len(c.m))
	}
	if _, err := c.parse("a in ("); err == nil {
		t.Error("a bad selector parsed")
	}
	for _, s := range []string{"x=1", "x=2", "x=3", "x=4"} {
		if _, err := c.parse(s); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.m) > 3 {
		t.Errorf("%d entries, bound 3", len(c.m))
	}
	if sel, _ := c.parse(""); !sel.Empty() {
		t.Errorf("empty selector: %q", sel)
	}
}

func TestQueryParams(t *testing.T) {
	t.Parallel()
	names := []string{"labelSelector", "metricLabelSelector"}
	tests := []struct {
		raw  string
		want []string // nil: not for the fast path
	}{
		{"", []string{"", ""}},
		{"labelSelector=", []string{"", ""}},
		{"labelSelector=queue%3Dq-1", []string{"queue=q-1", ""}},
		{"labelSelector=a+in+%28b%29", []string{"a in (b)", ""}},
		{"metricLabelSelector=path%3Da&labelSelector=app%3Dweb", []string{"app=web", "path=a"}},
		{"labelSelector=a&labelSelector=b", nil},
		{"labelSelector=a&limit=1", nil},
		{"limit=1", nil},
		{"labelSelector=a;b", nil},
		{"labelselector=a", nil},
		{"labelSelector=%zz", nil},
		{"labelSelector=a&", []string{"a", ""}}, // as url.ParseQuery
	}
	for _, tc := range tests {
		got, err := queryParams(tc.raw, names)
		if tc.want == nil {
			if err == nil {
				t.Errorf("%q: %q, want it left to the chain", tc.raw, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q: %q %v, want %q", tc.raw, got, err, tc.want)
		}
	}
}

// TestInflightBound: beyond MaxInflight, requests go to the chain (which
// applies its own bound) instead of queueing.
func TestInflightBound(t *testing.T) {
	t.Parallel()
	src := &fakeSource{block: make(chan struct{})}
	src.set("queue", bigList(1, 0))
	h, chained := newTestHandler(src, 1, 0)
	const p = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue"
	good := http.Header{"Authorization": {"Bearer good"}}
	done := make(chan int)
	go func() { done <- do(h, "GET", p, good).Code }()
	for src.calls.Load() == 0 {
		// wait until the first request holds the only slot
		runtime.Gosched()
	}
	if rec := do(h, "GET", p, good); rec.Code != 299 || chained.Load() != 1 {
		t.Errorf("second request: %d, chained %d", rec.Code, chained.Load())
	}
	close(src.block)
	if code := <-done; code != 200 {
		t.Errorf("first request: %d", code)
	}
	if rec := do(h, "GET", p, good); rec.Code != 200 {
		t.Errorf("after the slot is free: %d", rec.Code)
	}
}

// TestPanic: a panic answers 500 as the chain's recovery does, and is
// raised again for net/http to log, as there.
func TestPanic(t *testing.T) {
	t.Parallel()
	src := &fakeSource{panic: true}
	h, _ := newTestHandler(src, 10, 0)
	rec := httptest.NewRecorder()
	func() {
		defer func() {
			if p := recover(); p == nil {
				t.Error("the panic was swallowed")
			}
		}()
		req := httptest.NewRequest("GET", "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue", nil)
		req.Header.Set("Authorization", "Bearer good")
		h.ServeHTTP(rec, req)
	}()
	if rec.Code != 500 || !strings.Contains(rec.Body.String(), "caused apiserver to panic") {
		t.Errorf("%d %s", rec.Code, rec.Body)
	}
	if len(h.inflight) != 0 {
		t.Errorf("%d in-flight slots still held", len(h.inflight))
	}
}

// TestRequestInfo: the RequestInfo the fast path builds (the resolver on the
// bare path, the list's label selector put back) is the one the resolver
// builds from the whole request, for every request the fast path takes.
func TestRequestInfo(t *testing.T) {
	t.Parallel()
	h, _ := newTestHandler(&fakeSource{}, 8, 0)
	resolver := h.c.RequestInfoResolver
	targets := []string{
		"/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_depth",
		"/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_depth?labelSelector=queue%3Dq-1",
		"/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_depth?labelSelector=",
		"/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_depth?labelSelector",
		"/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_depth?labelSelector=a+in+%28b%2Cc%29%2C%21d",
		"/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/%2A/rps?labelSelector=app%3Dweb",
		"/apis/custom.metrics.k8s.io/v1beta1/namespaces/default/deployments.apps/*/rps?labelSelector=app%3Dweb&metricLabelSelector=path%3Droot",
		"/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/rps?metricLabelSelector=path%3Da",
	}
	for _, target := range targets {
		req := httptest.NewRequest(http.MethodGet, target, nil)
		q, err := h.parse(req)
		if err != nil {
			t.Errorf("%s: left to the chain (%v), want the fast path", target, err)
			continue
		}
		want, err := resolver.NewRequestInfo(req)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(q.info, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", target, *q.info, *want)
		}
	}
}
