package fastpath

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/metrics/pkg/apis/external_metrics"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/apiserver"
)

// genericJSON is what the chain writes for l to a JSON client.
func genericJSON(t *testing.T, l *external_metrics.ExternalMetricValueList) *httptest.ResponseRecorder {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(apiserver.Codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok {
		t.Fatal("no JSON serializer")
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/m", nil)
	responsewriters.SerializeObject(info.MediaType, apiserver.Codecs.EncoderForVersion(info.Serializer, externalGV), rec, req, 200, l)
	return rec
}

// TestExternalListJSON: the fast path's JSON of external lists is the
// generic serializer's, byte for byte, headers and status too.
func TestExternalListJSON(t *testing.T) {
	t.Parallel()
	strs := []string{"", "q-1", `a"b\c`, "<script>&amp;", "tab\there\nnl\r\b\f\x00\x1f\x7f", "ünïcødé ✓ 😀",
		"\u2028\u2029", "bad\xffutf8\xc3", "/path/to?x=1", "é\xe2\x82"}
	qty := []resource.Quantity{resource.MustParse("0"), resource.MustParse("42"), resource.MustParse("1.5Gi"), resource.MustParse("100m"),
		resource.MustParse("0.1"), resource.MustParse("1e3"), *resource.NewMilliQuantity(12345, resource.DecimalSI),
		*resource.NewQuantity(1<<40, resource.BinarySI), *resource.NewScaledQuantity(7, -9), resource.MustParse("-3.25")}
	zones := []*time.Location{time.UTC, time.FixedZone("x", 5*3600+1800), time.FixedZone("y", -7*3600)}
	rnd := rand.New(rand.NewPCG(1, 2))
	pick := func(s []string) string { return s[rnd.IntN(len(s))] }
	for n := range 300 {
		l := &external_metrics.ExternalMetricValueList{}
		items := rnd.IntN(4)
		if n == 0 {
			l.Items = []external_metrics.ExternalMetricValue{}
		}
		for range items {
			it := external_metrics.ExternalMetricValue{MetricName: pick(strs), Value: qty[rnd.IntN(len(qty))]}
			switch rnd.IntN(3) {
			case 0: // nil labels
			case 1:
				it.MetricLabels = map[string]string{}
			default:
				it.MetricLabels = map[string]string{}
				for range 1 + rnd.IntN(4) {
					it.MetricLabels[pick(strs)+fmt.Sprint(rnd.IntN(3))] = pick(strs)
				}
			}
			if rnd.IntN(4) > 0 {
				it.Timestamp = metav1.NewTime(time.Unix(1_700_000_000+rnd.Int64N(1e8), rnd.Int64N(1e9)).In(zones[rnd.IntN(len(zones))]))
			}
			if rnd.IntN(2) == 0 {
				w := rnd.Int64N(3600) - 1
				it.WindowSeconds = &w
			}
			if rnd.IntN(10) == 0 {
				it.Kind, it.APIVersion = pick(strs), pick(strs)
			}
			l.Items = append(l.Items, it)
		}
		want := genericJSON(t, l)
		got := httptest.NewRecorder()
		if !writeExternalJSON(got, l) {
			t.Fatalf("list %d: declined", n)
		}
		if got.Code != want.Code || !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) || fmt.Sprint(got.Header()) != fmt.Sprint(want.Header()) {
			t.Fatalf("list %d:\n got %d %v %s\nwant %d %v %s", n, got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
		}
	}
}

// TestExternalListJSONDeclines: list metadata and gzip-sized answers are
// left to the generic writer.
func TestExternalListJSONDeclines(t *testing.T) {
	t.Parallel()
	withMeta := &external_metrics.ExternalMetricValueList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}
	big := &external_metrics.ExternalMetricValueList{}
	for i := range 2000 {
		big.Items = append(big.Items, external_metrics.ExternalMetricValue{MetricName: "queue_messages_ready",
			MetricLabels: map[string]string{"queue": fmt.Sprintf("q-%d", i), "namespace": "default"}, Value: resource.MustParse("1")})
	}
	for name, l := range map[string]*external_metrics.ExternalMetricValueList{"list metadata": withMeta, "over 128 KiB": big} {
		rec := httptest.NewRecorder()
		if writeExternalJSON(rec, l) || rec.Body.Len() != 0 || rec.Code != 200 || len(rec.Header()) != 0 {
			t.Errorf("%s: written (%d, %d bytes), want it declined untouched", name, rec.Code, rec.Body.Len())
		}
	}
}
