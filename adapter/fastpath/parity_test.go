package fastpath_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	externalv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/apiserver"

	"github.com/metricscale/metricscale/adapter/internal/testenv"
)

const (
	extPath = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/"
	pods2   = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/http_inflight"
	pods1   = "/apis/custom.metrics.k8s.io/v1beta1/namespaces/default/pods/*/http_inflight"
	proto   = "application/vnd.kubernetes.protobuf"
)

// answer is what a client sees of a response, less the Audit-Id's value.
type answer struct {
	code                                      int
	contentType, encoding, cacheControl, vary string
	auditID                                   bool
	body                                      []byte
}

func get(ctx context.Context, t *testing.T, a *testenv.Adapter, method, path, token string, cert *tls.Certificate, header http.Header) answer {
	t.Helper()
	c := a.NewClient(a.SecurePort, token, cert)
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{
		code: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), encoding: resp.Header.Get("Content-Encoding"),
		cacheControl: resp.Header.Get("Cache-Control"), vary: resp.Header.Get("Vary"), auditID: resp.Header.Get("Audit-Id") != "", body: body,
	}
}

// TestParityWithChain runs the adapter twice, with the fast path (the
// default) and with --fast-path=false, on the same pushed series, and asks
// both the same requests: every answer (status, headers, body: JSON,
// protobuf, gzip, errors, 401, 403) must be the same, the authorization
// attributes sent to the SubjectAccessReview the same, and the fast path
// must have served exactly the requests it is meant to.
func TestParityWithChain(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two API servers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	fast, err := testenv.Start(ctx, t.TempDir(), "--max-age=1h", "--series-ttl=1h")
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Stop()
	chain, err := testenv.Start(ctx, t.TempDir(), "--max-age=1h", "--series-ttl=1h", "--fast-path=false")
	if err != nil {
		t.Fatal(err)
	}
	defer chain.Stop()

	// Fixed timestamps, so that both adapters hold the same values. The big
	// metric's answer (2,000 items) is over the 128 KiB the chain gzips from.
	ts := time.Now().Add(-time.Minute).UnixMilli()
	var series strings.Builder
	fmt.Fprintf(&series, "queue_depth{namespace=\"default\",queue=\"orders\"} 12 %d\n", ts)
	fmt.Fprintf(&series, "queue_depth{namespace=\"default\",queue=\"billing\"} 5.5 %d\n", ts)
	fmt.Fprintf(&series, "queue_depth{namespace=\"other\",queue=\"orders\"} 99 %d\n", ts)
	for _, pod := range []string{"web-1", "web-2", "db-1"} {
		fmt.Fprintf(&series, "http_inflight{namespace=\"default\",pod=%q,path=\"a\"} 4 %d\n", pod, ts)
		fmt.Fprintf(&series, "http_inflight{namespace=\"default\",pod=%q,path=\"b\"} 1.5 %d\n", pod, ts)
	}
	fmt.Fprintf(&series, "requests_per_second{namespace=\"default\",service=\"web\"} 42 %d\n", ts)
	for i := range 2000 {
		fmt.Fprintf(&series, "big_queue{namespace=\"default\",queue=\"q-%d\",region=\"eu-west-1\"} %d %d\n", i, i*7, ts)
	}
	for _, a := range []*testenv.Adapter{fast, chain} {
		a.Fake.SetPod("default", "web-1", map[string]string{"app": "web"})
		a.Fake.SetPod("default", "web-2", map[string]string{"app": "web"})
		a.Fake.SetPod("default", "db-1", map[string]string{"app": "db"})
		if code, msg, err := testenv.Push(ctx, a.PushURL, testenv.PushToken, "text/plain", []byte(series.String())); err != nil || code != 204 {
			t.Fatalf("push: %d %s %v", code, msg, err)
		}
	}

	hpaAsProxy := http.Header{"X-Remote-User": {testenv.HPAUser}, "X-Remote-Group": {"system:serviceaccounts"}}
	cases := []struct {
		name, method, path, token string
		cert                      *tls.Certificate
		header                    http.Header
		code                      int
		fast                      bool   // served by the fast path
		contains                  string // in the body
	}{
		{"selector, JSON", "GET", extPath + "queue_depth?labelSelector=queue%3Dorders", testenv.HPAToken, nil, nil, 200, true, `"queue":"orders"`},
		{"selector, protobuf", "GET", extPath + "queue_depth?labelSelector=queue%3Dorders", testenv.HPAToken, nil, http.Header{"Accept": {proto}}, 200, true, "orders"},
		{"protobuf as client-go asks", "GET", extPath + "queue_depth", testenv.HPAToken, nil, http.Header{"Accept": {proto + ", */*"}}, 200, true, "billing"},
		{"JSON as client-go asks", "GET", extPath + "queue_depth", testenv.HPAToken, nil, http.Header{"Accept": {"application/json, */*"}}, 200, true, "billing"},
		{"JSON pretty for curl", "GET", extPath + "queue_depth?labelSelector=queue%3Dorders", testenv.HPAToken, nil, http.Header{"User-Agent": {"curl/8.5.0"}}, 200, true, "\n  \"kind\": "},
		{"JSON pretty by Accept", "GET", extPath + "queue_depth", testenv.HPAToken, nil, http.Header{"Accept": {"application/json;pretty=true"}}, 200, true, "billing"},
		{"set selector", "GET", extPath + "queue_depth?labelSelector=queue+in+%28orders%2Cbilling%29", testenv.HPAToken, nil, nil, 200, true, "billing"},
		{"empty selector", "GET", extPath + "queue_depth?labelSelector=", testenv.HPAToken, nil, nil, 200, true, "billing"},
		{"all series, gzip", "GET", extPath + "big_queue", testenv.HPAToken, nil, http.Header{"Accept-Encoding": {"gzip"}}, 200, true, ""},
		{"all series, gzip, protobuf", "GET", extPath + "big_queue", testenv.HPAToken, nil, http.Header{"Accept-Encoding": {"gzip"}, "Accept": {proto}}, 200, true, ""},
		{"all series, plain", "GET", extPath + "big_queue", testenv.HPAToken, nil, http.Header{"Accept-Encoding": {"identity"}}, 200, true, `"q-1999"`},
		{"through the aggregator (request headers)", "GET", extPath + "queue_depth?labelSelector=queue%3Dorders", "", &fast.FrontProxy, hpaAsProxy, 200, true, "orders"},
		{"unknown metric: 404 naming it", "GET", extPath + "no_such_metric", testenv.HPAToken, nil, nil, 404, true, "no_such_metric"},
		{"unknown metric, protobuf", "GET", extPath + "no_such_metric", testenv.HPAToken, nil, http.Header{"Accept": {proto}}, 404, true, "no_such_metric"},
		{"no match: 404", "GET", extPath + "queue_depth?labelSelector=queue%3Dnone", testenv.HPAToken, nil, nil, 404, true, "queue_depth"},
		{"no credentials: 401", "GET", extPath + "queue_depth", "", nil, nil, 401, true, "Unauthorized"},
		{"unknown token: 401", "GET", extPath + "queue_depth", "forged-token", nil, nil, 401, true, "Unauthorized"},
		{"401, protobuf", "GET", extPath + "queue_depth", "forged-token", nil, http.Header{"Accept": {proto}}, 401, true, "Unauthorized"},
		{"front-proxy name not allowed: 401", "GET", extPath + "queue_depth", "", &fast.OtherClient, hpaAsProxy, 401, true, "Unauthorized"},
		{"not allowed: 403 naming the user", "GET", extPath + "queue_depth?labelSelector=queue%3Dorders", testenv.NobodyToken, nil, nil, 403, true, testenv.NobodyUser},
		{"403 through the aggregator", "GET", extPath + "queue_depth", "", &fast.FrontProxy, http.Header{"X-Remote-User": {testenv.NobodyUser}}, 403, true, testenv.NobodyUser},
		{"403, protobuf", "GET", extPath + "queue_depth", testenv.NobodyToken, nil, http.Header{"Accept": {proto}}, 403, true, "nobody"},
		// custom metrics of selected objects
		{"pods, v1beta2", "GET", pods2 + "?labelSelector=app%3Dweb", testenv.HPAToken, nil, nil, 200, true, `"web-2"`},
		{"pods, v1beta1", "GET", pods1 + "?labelSelector=app%3Dweb", testenv.HPAToken, nil, nil, 200, true, `"metricName":"http_inflight"`},
		{"pods, protobuf", "GET", pods2 + "?labelSelector=app%3Dweb", testenv.HPAToken, nil, http.Header{"Accept": {proto}}, 200, true, "web-2"},
		{"pods, v1beta1 protobuf", "GET", pods1 + "?labelSelector=app%3Dweb", testenv.HPAToken, nil, http.Header{"Accept": {proto}}, 200, true, "web-2"},
		{"pods, metric selector", "GET", pods2 + "?metricLabelSelector=path%3Da&labelSelector=app%3Dweb", testenv.HPAToken, nil, nil, 200, true, `"path":"a"`},
		{"pods, all", "GET", pods2, testenv.HPAToken, nil, nil, 200, true, "db-1"},
		{"pods through the aggregator", "GET", pods2 + "?labelSelector=app%3Dweb", "", &fast.FrontProxy, hpaAsProxy, 200, true, "web-1"},
		{"pods, no such objects", "GET", pods2 + "?labelSelector=app%3Dnone", testenv.HPAToken, nil, nil, 404, true, "http_inflight"},
		{"pods, unknown metric", "GET", "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/nope", testenv.HPAToken, nil, nil, 404, true, "nope"},
		{"unknown resource", "GET", "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/widgets/*/http_inflight", testenv.HPAToken, nil, nil, 404, true, "widgets"},
		{"pods, 403", "GET", pods2 + "?labelSelector=app%3Dweb", testenv.NobodyToken, nil, nil, 403, true, testenv.NobodyUser},
		{"pods, 401", "GET", pods2, "forged-token", nil, nil, 401, true, "Unauthorized"},
		{"pods, malformed metric selector", "GET", pods2 + "?labelSelector=app%3Dweb&metricLabelSelector=%3D%3D", testenv.HPAToken, nil, nil, 400, false, `metricLabelSelector \"==\"`},
		{"pods, malformed selector", "GET", pods2 + "?labelSelector=app+in", testenv.HPAToken, nil, nil, 400, false, `labelSelector \"app in\"`},
		{"object by name", "GET", "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/services/web/requests_per_second", testenv.HPAToken, nil, nil, 200, false, "42"},
		{"namespace metric", "GET", "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/metrics/queue_depth", testenv.HPAToken, nil, nil, 200, false, "17500m"},
		{"custom discovery", "GET", "/apis/custom.metrics.k8s.io/v1beta2", testenv.HPAToken, nil, nil, 200, false, ""},
		// the chain's
		{"malformed selector: 400 naming it", "GET", extPath + "queue_depth?labelSelector=queue+in+%28", testenv.HPAToken, nil, nil, 400, false, "queue in ("},
		{"impersonation", "GET", extPath + "queue_depth", testenv.HPAToken, nil, http.Header{"Impersonate-User": {"someone"}}, 403, false, "impersonate"},
		{"impersonation allowed", "GET", extPath + "queue_depth", testenv.MonitorToken, nil, http.Header{"Impersonate-User": {testenv.HPAUser}}, 200, false, "billing"},
		{"other parameters", "GET", extPath + "queue_depth?labelSelector=queue%3Dorders&limit=1", testenv.HPAToken, nil, nil, 200, false, "orders"},
		{"watch", "GET", extPath + "queue_depth?watch=true&timeoutSeconds=1", testenv.HPAToken, nil, nil, 403, false, "watch"},
		{"YAML", "GET", extPath + "queue_depth", testenv.HPAToken, nil, http.Header{"Accept": {"application/yaml"}}, 200, false, "billing"},
		{"table", "GET", extPath + "queue_depth", testenv.HPAToken, nil, http.Header{"Accept": {"application/json;as=Table;v=v1;g=meta.k8s.io"}}, 0, false, ""},
		{"not acceptable", "GET", extPath + "queue_depth", testenv.HPAToken, nil, http.Header{"Accept": {"text/html"}}, 406, false, ""},
		{"trailing slash", "GET", extPath + "queue_depth/", testenv.HPAToken, nil, nil, 0, false, ""},
		{"POST", "POST", extPath + "queue_depth", testenv.HPAToken, nil, nil, 403, false, "create"},
		{"POST without credentials", "POST", extPath + "queue_depth", "", nil, nil, 401, false, ""},
	}
	wantFast := 0
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			certFor := func(a *testenv.Adapter) *tls.Certificate {
				switch c.cert {
				case nil:
					return nil
				case &fast.FrontProxy:
					return &a.FrontProxy
				default:
					return &a.OtherClient
				}
			}
			f := get(ctx, t, fast, c.method, c.path, c.token, certFor(fast), c.header)
			g := get(ctx, t, chain, c.method, c.path, c.token, certFor(chain), c.header)
			if c.code != 0 && f.code != c.code {
				t.Errorf("fast path: %d %.400s, want %d", f.code, f.body, c.code)
			}
			if f.code != g.code || f.contentType != g.contentType || f.encoding != g.encoding || f.cacheControl != g.cacheControl || f.vary != g.vary || f.auditID != g.auditID {
				t.Errorf("answers differ:\nfast:  %d %q %q %q %q audit-id %v\nchain: %d %q %q %q %q audit-id %v",
					f.code, f.contentType, f.encoding, f.cacheControl, f.vary, f.auditID, g.code, g.contentType, g.encoding, g.cacheControl, g.vary, g.auditID)
			}
			if !bytes.Equal(f.body, g.body) {
				t.Errorf("bodies differ:\nfast:  %.600q\nchain: %.600q", f.body, g.body)
			}
			if c.contains != "" && !bytes.Contains(f.body, []byte(c.contains)) {
				t.Errorf("body lacks %q: %.600s", c.contains, f.body)
			}
			external := strings.HasPrefix(c.path, extPath)
			if external && c.code == 200 && f.contentType == proto && f.encoding == "" {
				var l externalv1beta1.ExternalMetricValueList
				if _, _, err := apiserver.Codecs.UniversalDeserializer().Decode(f.body, nil, &l); err != nil || len(l.Items) == 0 {
					t.Errorf("protobuf answer does not decode to items: %v %+v", err, l)
				}
			}
			if external && c.code == 200 && strings.HasPrefix(f.contentType, "application/json") && f.encoding == "" {
				var l externalv1beta1.ExternalMetricValueList
				if err := json.Unmarshal(f.body, &l); err != nil || len(l.Items) == 0 || l.Kind != "ExternalMetricValueList" {
					t.Errorf("JSON answer: %v %+v", err, l)
				}
			}
			if c.name == "all series, gzip" && f.encoding != "gzip" {
				t.Errorf("a %d-byte answer was not gzipped", len(f.body))
			}
		})
		if c.fast {
			wantFast++
		}
	}

	// The same questions to the authorizer, in the same order.
	fs, cs := fast.Fake.AccessReviewSpecs(), chain.Fake.AccessReviewSpecs()
	if fj, cj := specsJSON(t, fs), specsJSON(t, cs); fj != cj {
		t.Errorf("SubjectAccessReviews differ:\nfast:  %s\nchain: %s", fj, cj)
	}
	if len(fs) == 0 {
		t.Error("no SubjectAccessReview was sent")
	}

	// The fast path served what it should.
	m := get(ctx, t, fast, "GET", "/metrics", testenv.MonitorToken, nil, nil)
	if got := metricValue(t, m.body, `metricscale_adapter_fast_path_requests_total{served_by="fast"}`); got != wantFast {
		t.Errorf("fast path served %d requests, want %d", got, wantFast)
	}

	// It records the chain's request and freshness metrics. (Both adapters
	// share this process' registry: only the fast one is asked here.)
	counters := []string{
		`apiserver_request_total{code="200",component="external-metrics",dry_run="",group="external.metrics.k8s.io",resource="*",scope="cluster",subresource="*",verb="LIST",version="v1beta1"}`,
		`apiserver_request_total{code="404",component="external-metrics",dry_run="",group="external.metrics.k8s.io",resource="*",scope="cluster",subresource="*",verb="LIST",version="v1beta1"}`,
		`metrics_apiserver_metric_freshness_seconds_count{group="external.metrics.k8s.io"}`,
		`apiserver_request_total{code="200",component="custom-metrics",dry_run="",group="custom.metrics.k8s.io",resource="*",scope="resource",subresource="*",verb="GET",version="v1beta2"}`,
		`metrics_apiserver_metric_freshness_seconds_count{group="custom.metrics.k8s.io"}`,
		`apiserver_request_sli_duration_seconds_count{component="external-metrics",group="external.metrics.k8s.io",resource="*",scope="cluster",subresource="*",verb="LIST",version="v1beta1"}`,
	}
	before := make([]int, len(counters))
	for i, c := range counters {
		before[i] = metricValue(t, m.body, c)
	}
	get(ctx, t, fast, "GET", extPath+"queue_depth", testenv.HPAToken, nil, nil)                     // 200, 2 items
	get(ctx, t, fast, "GET", extPath+"no_such_metric", testenv.HPAToken, nil, nil)                  // 404
	get(ctx, t, fast, "GET", extPath+"queue_depth?labelSelector=x%3Dy", testenv.HPAToken, nil, nil) // 404
	get(ctx, t, fast, "GET", pods2+"?labelSelector=app%3Dweb", testenv.HPAToken, nil, nil)          // 200, 4 items
	m = get(ctx, t, fast, "GET", "/metrics", testenv.MonitorToken, nil, nil)
	for i, want := range []int{1, 2, 2, 1, 2, 3} {
		if got := metricValue(t, m.body, counters[i]) - before[i]; got != want {
			t.Errorf("%s grew by %d, want %d", counters[i], got, want)
		}
	}
}

func specsJSON(t *testing.T, specs any) string {
	t.Helper()
	b, err := json.Marshal(specs)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// metricValue reads a counter's value from a /metrics page (0 if absent).
func metricValue(t *testing.T, page []byte, series string) int {
	t.Helper()
	m := regexp.MustCompile(regexp.QuoteMeta(series) + ` (\d+)`).FindSubmatch(page)
	if m == nil {
		return 0
	}
	var n int
	_, _ = fmt.Sscan(string(m[1]), &n)
	return n
}
