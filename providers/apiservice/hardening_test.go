package apiservice

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	cmv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	emv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/backendhttp"
)

// externalQuery is the number of items served for metric in namespace
// ns, -1 for none.
func externalQuery(p *Provider, metric string) (int, error) {
	l, err := p.GetExternalMetric(context.Background(), "ns", labels.Everything(), providers.ExternalMetricInfo{Metric: metric})
	if l == nil {
		return -1, err
	}
	return len(l.Items), err
}

// TestRedirectNotFollowed: a redirect — to plain http on the same host, to
// another host name — is a 503; its target never gets a request, so never
// the token, and its body is not shown.
func TestRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	var reached atomic.Int64
	var gotToken atomic.Bool
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		if strings.Contains(r.Header.Get("Authorization"), secretToken) {
			gotToken.Store(true)
		}
		_, _ = w.Write([]byte("TARGET-BODY " + strings.Repeat("x", 400)))
	}))
	defer target.Close()
	port := target.Listener.Addr().(*net.TCPAddr).Port
	for _, loc := range []string{
		target.URL + "/apis/external.metrics.k8s.io/v1beta1/namespaces/ns/queue_depth", // http://127.0.0.1:port
		fmt.Sprintf("http://localhost:%d/elsewhere", port),                             // another host
		"/apis/external.metrics.k8s.io/v1beta1/namespaces/ns/other",                    // same origin
	} {
		for _, code := range []int{http.StatusFound, http.StatusTemporaryRedirect} {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, loc, code)
			})
			p := f.provider(t, "")
			n, err := externalQuery(p, "queue_depth")
			if err == nil || n >= 0 {
				t.Fatalf("%d to %s: served %d items, %v; want a 503", code, loc, n, err)
			}
			status, msg := apiStatus(t, err)
			if status != 503 || !strings.Contains(msg, "redirect") || !strings.Contains(msg, "not followed") {
				t.Errorf("%d to %s: %d %q; want a 503 saying the redirect was not followed", code, loc, status, msg)
			}
			if strings.Contains(msg, "TARGET-BODY") || strings.Contains(msg, secretToken) {
				t.Errorf("%d to %s: the message shows the target's body or the token: %q", code, loc, msg)
			}
			if n := len(f.reqs()); n != 1 {
				t.Errorf("%d to %s: the remote got %d requests, want 1 (the redirect not followed back to it)", code, loc, n)
			}
		}
	}
	if n := reached.Load(); n != 0 || gotToken.Load() {
		t.Errorf("the redirect targets got %d requests (token sent: %v), want none", n, gotToken.Load())
	}
}

// bigExternal answers n items of queue_depth; the answer is made once,
// before the query's clock runs.
func bigExternal(n int) func(w http.ResponseWriter, r *http.Request) {
	var b strings.Builder
	b.WriteString(`{"kind":"ExternalMetricValueList","apiVersion":"external.metrics.k8s.io/v1beta1","metadata":{},"items":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"metricName":"queue_depth","metricLabels":{},"timestamp":"2026-01-01T00:00:00Z","value":"1"}`)
	}
	b.WriteString(`]}`)
	body := []byte(b.String())
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body) // streamed: no Content-Length for the client to refuse early
	}
}

// TestAnswerBounds: an answer over maxBody is a 503 and one of more than
// maxItems items a 400, neither decoded into a value.
func TestAnswerBounds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		answer func(w http.ResponseWriter, r *http.Request)
		code   int
		want   string
	}{
		// 12 MiB of small items, as the 31 MiB answer that became 516 MiB
		{"over the size bound", bigExternal(150_000), 503, "larger than 8 MiB"},
		{"over the item bound", bigExternal(maxItems + 1), 400, fmt.Sprintf("more than %d series", maxItems)},
		{"at the item bound", bigExternal(maxItems), 200, ""},
		{"custom over the item bound", func(w http.ResponseWriter, r *http.Request) {
			metric, _, _ := askedFor(r)
			list := cmv1beta2.MetricValueList{}
			for i := 0; i <= maxItems; i++ {
				list.Items = append(list.Items, cmv1beta2.MetricValue{
					DescribedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: fmt.Sprint("p", i)},
					Metric:          cmv1beta2.MetricIdentifier{Name: metric}, Value: *resource.NewQuantity(1, resource.DecimalSI),
				})
			}
			writeJSON(w, 200, &list)
		}, 400, fmt.Sprintf("more than %d series", maxItems)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tc.answer)
			p := f.provider(t, `,"timeout":"20s"`) // a loaded machine reads 12 MiB slowly
			var n int
			var err error
			if strings.HasPrefix(tc.name, "custom") {
				l, cerr := p.GetMetricBySelector(context.Background(), "ns", labels.Everything(), providers.CustomMetricInfo{GroupResource: pods, Metric: "http_requests"}, nil)
				n, err = -1, cerr
				if l != nil {
					n = len(l.Items)
				}
			} else {
				n, err = externalQuery(p, "queue_depth")
			}
			if tc.code == 200 {
				if err != nil || n != maxItems {
					t.Fatalf("got %d items, %v; want %d", n, err, maxItems)
				}
				return
			}
			if err == nil || n >= 0 {
				t.Fatalf("served %d items, %v; want a %d", n, err, tc.code)
			}
			code, msg := apiStatus(t, err)
			if code != tc.code || !strings.Contains(msg, tc.want) || !strings.Contains(msg, "queue_depth") && !strings.Contains(msg, "http_requests") {
				t.Errorf("got %d %q; want %d naming the metric, saying %q", code, msg, tc.code, tc.want)
			}
		})
	}
}

// TestItemsChecked: an answer about another object, another namespace or
// another metric is refused whole (a 503), never served.
func TestItemsChecked(t *testing.T) {
	t.Parallel()
	custom := func(ns, name, metric string) func(w http.ResponseWriter, r *http.Request) {
		return func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, 200, &cmv1beta2.MetricValueList{Items: []cmv1beta2.MetricValue{{
				DescribedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: name},
				Metric:          cmv1beta2.MetricIdentifier{Name: metric}, Timestamp: metav1.Now(), Value: *resource.NewQuantity(7, resource.DecimalSI),
			}}})
		}
	}
	external := func(metric string) func(w http.ResponseWriter, r *http.Request) {
		return func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, 200, &emv1beta1.ExternalMetricValueList{Items: []emv1beta1.ExternalMetricValue{{
				MetricName: metric, Timestamp: metav1.Now(), Value: *resource.NewQuantity(7, resource.DecimalSI),
			}}})
		}
	}
	byName := func(p *Provider) (bool, error) {
		v, err := p.GetMetricByName(context.Background(), types.NamespacedName{Namespace: "ns", Name: "web-0"}, providers.CustomMetricInfo{GroupResource: pods, Namespaced: true, Metric: "http_requests"}, nil)
		return v != nil, err
	}
	bySelector := func(p *Provider) (bool, error) {
		v, err := p.GetMetricBySelector(context.Background(), "ns", sel(t, "app=web"), providers.CustomMetricInfo{GroupResource: pods, Namespaced: true, Metric: "http_requests"}, nil)
		return v != nil, err
	}
	ext := func(p *Provider) (bool, error) {
		v, err := p.GetExternalMetric(context.Background(), "ns", nil, providers.ExternalMetricInfo{Metric: "queue_depth"})
		return v != nil, err
	}
	for _, tc := range []struct {
		name   string
		answer func(w http.ResponseWriter, r *http.Request)
		query  func(p *Provider) (bool, error)
		want   string // "" means served
	}{
		{"by name: the object asked for", custom("ns", "web-0", "http_requests"), byName, ""},
		{"by name: another pod", custom("ns", "some-other-pod", "http_requests"), byName, `Pod "some-other-pod" in namespace "ns"`},
		{"by name: another namespace", custom("other", "web-0", "http_requests"), byName, `in namespace "other"`},
		{"by name: another metric", custom("ns", "web-0", "cpu_seconds"), byName, `the metric "cpu_seconds"`},
		{"by selector: the namespace asked for", custom("ns", "web-7", "http_requests"), bySelector, ""},
		{"by selector: another namespace", custom("kube-system", "web-7", "http_requests"), bySelector, `in namespace "kube-system"`},
		{"by selector: another metric", custom("ns", "web-7", "other"), bySelector, `the metric "other"`},
		{"external: the metric asked for", external("queue_depth"), ext, ""},
		{"external: the metric asked for, other case", external("Queue_Depth"), ext, ""},
		{"external: another metric", external("s1-rabbitmq-billing"), ext, `the metric "s1-rabbitmq-billing"`},
		{"external: a name with control characters", external("evil\x1b[2J\r\nname"), ext, `the metric "evil [2J name"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newFake(t, tc.answer).provider(t, "")
			served, err := tc.query(p)
			if tc.want == "" {
				if err != nil || !served {
					t.Fatalf("served %v, %v; want the value", served, err)
				}
				return
			}
			if served || err == nil {
				t.Fatalf("served %v, err %v; want a 503", served, err)
			}
			code, msg := apiStatus(t, err)
			if code != 503 || !strings.Contains(msg, tc.want) || !strings.Contains(msg, "answer refused") || !strings.Contains(msg, `"keda"`) {
				t.Errorf("got %d %q; want a 503 naming the provider, saying %q and that the answer was refused", code, msg, tc.want)
			}
		})
	}
}

// TestErrorExcerpt: the remote's text in an error is a short excerpt
// without control characters, whether a Status message or a raw body.
func TestErrorExcerpt(t *testing.T) {
	t.Parallel()
	hostile := "first line\r\n\x1b[31mSPOOFED\x1b[0m\u202e\x00 " + strings.Repeat("y", 400) + "TAIL-NEVER-SHOWN"
	for _, tc := range []struct {
		name   string
		answer func(w http.ResponseWriter, r *http.Request)
	}{
		{"raw body", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(500)
			_, _ = w.Write([]byte(hostile))
		}},
		{"Status message", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, 500, &metav1.Status{Message: hostile, Code: 500})
		}},
		{"400 Status message", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, 400, &metav1.Status{Message: hostile, Code: 400})
		}},
		{"404 Status message", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, 404, &metav1.Status{Message: hostile, Code: 404})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newFake(t, tc.answer).provider(t, "")
			_, err := externalQuery(p, "queue_depth")
			if err == nil {
				t.Fatal("no error")
			}
			_, msg := apiStatus(t, err)
			if !strings.Contains(msg, "first line [31mSPOOFED [0m yyy") {
				t.Errorf("message %q does not show the start of the remote's text", msg)
			}
			if strings.Contains(msg, "TAIL-NEVER-SHOWN") || strings.Contains(msg, strings.Repeat("y", backendhttp.ExcerptBytes)) {
				t.Errorf("message %q carries more than an excerpt", msg)
			}
			for _, r := range msg {
				if r < 0x20 || r == 0x7f || r == '\u202e' {
					t.Errorf("message %q has the control character %U", msg, r)
					break
				}
			}
		})
	}
}
