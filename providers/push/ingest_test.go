package push

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/client_golang/exp/api/remote"
	writev2 "github.com/prometheus/client_golang/exp/api/remote/genproto/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/metricscale/metricscale/providers"
)

const ingestToken = "ingest-token"

func ingestServer(t *testing.T, sink *recordingSink, maxBody int64) *httptest.Server {
	t.Helper()
	h, err := NewHandler(sink, ingestToken, maxBody)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h.Mux())
	t.Cleanup(srv.Close)
	return srv
}

// bearer adds the push token to every request of a client.
type bearer struct{ next http.RoundTripper }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+ingestToken)
	return b.next.RoundTrip(r)
}

func (s *recordingSink) find(name string) (providers.Sample, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.samples) - 1; i >= 0; i-- {
		if s.samples[i].Name == name {
			return s.samples[i], true
		}
	}
	return providers.Sample{}, false
}

// TestOTLPExporter: the OpenTelemetry Go SDK's OTLP/HTTP exporter sends a
// gauge and a counter, plain and gzip; they are stored under their
// Prometheus names with their attributes and the resource's namespace.
func TestOTLPExporter(t *testing.T) {
	t.Parallel()
	sink := &recordingSink{}
	srv := ingestServer(t, sink, 1<<20)
	ctx := context.Background()
	for i, compression := range []otlpmetrichttp.Compression{otlpmetrichttp.NoCompression, otlpmetrichttp.GzipCompression} {
		exp, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(srv.URL+OTLPPath),
			otlpmetrichttp.WithHeaders(map[string]string{"Authorization": "Bearer " + ingestToken}),
			otlpmetrichttp.WithCompression(compression))
		if err != nil {
			t.Fatal(err)
		}
		res := resource.NewSchemaless(attribute.String("k8s.namespace.name", "shop"), attribute.String("service.name", "worker"))
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)), sdkmetric.WithResource(res))
		meter := mp.Meter("metricscale-test")
		depth, err := meter.Float64Gauge("queue.depth")
		if err != nil {
			t.Fatal(err)
		}
		done, err := meter.Int64Counter("jobs.done")
		if err != nil {
			t.Fatal(err)
		}
		want := float64(40 + i)
		depth.Record(ctx, want, metric.WithAttributes(attribute.String("queue", "orders")))
		done.Add(ctx, 5)
		done.Add(ctx, 2)
		if err := mp.ForceFlush(ctx); err != nil {
			t.Fatalf("compression %v: export: %v", compression, err)
		}
		if err := mp.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		s, ok := sink.find("queue_depth")
		if !ok || s.Value != want || s.Labels["queue"] != "orders" || s.Labels["namespace"] != "shop" {
			t.Fatalf("compression %v: stored queue_depth %+v (found %v), want %v with queue=orders, namespace=shop", compression, s, ok, want)
		}
		if s.Timestamp.IsZero() || time.Since(s.Timestamp) > time.Minute {
			t.Errorf("queue_depth timestamp %v, want the export's", s.Timestamp)
		}
		if c, ok := sink.find("jobs_done"); !ok || c.Value != 7 {
			t.Errorf("compression %v: stored jobs_done %+v (found %v), want 7", compression, c, ok)
		}
	}
}

// otlpPost posts an OTLP request and decodes the answer: the response on
// 200, the Status otherwise.
func otlpPost(t *testing.T, url, token string, body []byte, contentType string) (int, *colmetricspb.ExportMetricsServiceResponse, *statuspb.Status) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		t.Fatalf("answer Content-Type %q, want application/x-protobuf", ct)
	}
	if resp.StatusCode == http.StatusOK {
		var r colmetricspb.ExportMetricsServiceResponse
		if err := proto.Unmarshal(b, &r); err != nil {
			t.Fatalf("answer is no ExportMetricsServiceResponse: %v", err)
		}
		return resp.StatusCode, &r, nil
	}
	var st statuspb.Status
	if err := proto.Unmarshal(b, &st); err != nil {
		t.Fatalf("error answer is no Status: %v (%q)", err, b)
	}
	return resp.StatusCode, nil, &st
}

func TestOTLPAnswers(t *testing.T) {
	t.Parallel()
	sink := &recordingSink{}
	srv := ingestServer(t, sink, 4096)
	partial := []byte(`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[
	  {"name":"q","gauge":{"dataPoints":[{"asDouble":3}]}},
	  {"name":"h","histogram":{"dataPoints":[{"count":"1"}]}}]}]}]}`)
	// JSON in, JSON out: decode the answer by hand
	req, _ := http.NewRequest(http.MethodPost, srv.URL+OTLPPath, bytes.NewReader(partial))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+ingestToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" ||
		!strings.Contains(string(b), `"rejectedDataPoints":"1"`) || !strings.Contains(string(b), "histograms are not stored") {
		t.Errorf("partial success: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	if s, ok := sink.find("q"); !ok || s.Value != 3 {
		t.Errorf("q stored %+v (%v), want 3", s, ok)
	}

	valid, _ := proto.Marshal(&colmetricspb.ExportMetricsServiceRequest{})
	tests := []struct {
		name, token, ct string
		body            []byte
		code            int
		grpc            int32
		msg             string
	}{
		{"no token", "", "application/x-protobuf", valid, 401, 16, "unauthorized"},
		{"unknown content type", ingestToken, "text/plain", valid, 415, 3, "OTLP/HTTP takes"},
		{"malformed", ingestToken, "application/x-protobuf", []byte{0x0a, 0x7f}, 400, 3, "OTLP metrics request"},
		{"too large", ingestToken, "application/x-protobuf", make([]byte, 5000), 413, 3, "larger than 4096"},
		{"empty request", ingestToken, "application/x-protobuf", valid, 200, 0, ""},
	}
	for _, tc := range tests {
		code, r, st := otlpPost(t, srv.URL+OTLPPath, tc.token, tc.body, tc.ct)
		if code != tc.code {
			t.Errorf("%s: %d, want %d (%v)", tc.name, code, tc.code, st)
			continue
		}
		if tc.code == 200 {
			if r.GetPartialSuccess() != nil {
				t.Errorf("%s: partial success %v", tc.name, r.GetPartialSuccess())
			}
			continue
		}
		if st.GetCode() != tc.grpc || !strings.Contains(st.GetMessage(), tc.msg) {
			t.Errorf("%s: Status %d %q, want %d containing %q", tc.name, st.GetCode(), st.GetMessage(), tc.grpc, tc.msg)
		}
	}
}

// TestRemoteWriteV2Client: the remote-write library's own client sends a 2.0
// request; it is stored and the written-samples header counts it.
func TestRemoteWriteV2Client(t *testing.T) {
	t.Parallel()
	sink := &recordingSink{}
	srv := ingestServer(t, sink, 1<<20)
	api, err := remote.NewAPI(srv.URL, remote.WithAPIPath(RemoteWritePath),
		remote.WithAPIHTTPClient(&http.Client{Transport: bearer{http.DefaultTransport}}))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	req := &writev2.Request{
		Symbols:    []string{"", "__name__", "queue_depth", "queue", "orders", "namespace", "shop"},
		Timeseries: []*writev2.TimeSeries{{LabelsRefs: []uint32{1, 2, 3, 4, 5, 6}, Samples: []*writev2.Sample{{Value: 17, Timestamp: now}}}},
	}
	stats, err := api.Write(context.Background(), remote.WriteV2MessageType, req)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Samples != 1 {
		t.Errorf("written samples %d, want 1", stats.Samples)
	}
	s, ok := sink.find("queue_depth")
	if !ok || s.Value != 17 || s.Labels["queue"] != "orders" || s.Labels["namespace"] != "shop" || s.Timestamp.UnixMilli() != now {
		t.Errorf("stored %+v (%v), want 17 at %d with queue=orders, namespace=shop", s, ok, now)
	}
}

func TestRemoteWriteAnswers(t *testing.T) {
	t.Parallel()
	sink := &recordingSink{}
	srv := ingestServer(t, sink, 4096)
	ok := (&writev2.Request{Symbols: []string{"", "__name__", "q"}, Timeseries: []*writev2.TimeSeries{{LabelsRefs: []uint32{1, 2}, Samples: []*writev2.Sample{{Value: 1}}}}})
	okBody, _ := ok.MarshalVT()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(okBody)
	_ = zw.Close()
	tests := []struct {
		name, token, ct, enc string
		body                 []byte
		code                 int
		msg                  string
	}{
		{"v2 snappy", ingestToken, "application/x-protobuf;proto=io.prometheus.write.v2.Request", "snappy", snappy.Encode(nil, okBody), 204, ""},
		{"v2 gzip", ingestToken, "application/x-protobuf;proto=io.prometheus.write.v2.Request", "gzip", gz.Bytes(), 204, ""},
		{"no token", "", "application/x-protobuf", "snappy", snappy.Encode(nil, okBody), 401, "unauthorized"},
		{"unknown message", ingestToken, "application/x-protobuf;proto=io.prometheus.write.v9.Request", "snappy", nil, 415, "remote write"},
		{"unknown encoding", ingestToken, "application/x-protobuf", "zstd", okBody, 415, `Content-Encoding "zstd"`},
		{"bad snappy", ingestToken, "application/x-protobuf", "snappy", []byte{0xff, 0xff, 0xff}, 400, "snappy body"},
		{"decompresses past the limit", ingestToken, "application/x-protobuf", "snappy", snappy.Encode(nil, make([]byte, 20000)), 413, "once decompressed"},
		{"v1 without a name", ingestToken, "application/x-protobuf", "snappy", snappy.Encode(nil, []byte{0x0a, 0x0c, 0x0a, 0x0a, 0x0a, 0x01, 'a', 0x12, 0x01, 'b', 0x00, 0x00, 0x00, 0x00}), 400, "invalid push"},
	}
	for _, tc := range tests {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+RemoteWritePath, bytes.NewReader(tc.body))
		req.Header.Set("Content-Type", tc.ct)
		req.Header.Set("Content-Encoding", tc.enc)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || !strings.Contains(string(b), tc.msg) {
			t.Errorf("%s: %d %q, want %d containing %q", tc.name, resp.StatusCode, b, tc.code, tc.msg)
		}
		if tc.code == 204 && resp.Header.Get("X-Prometheus-Remote-Write-Samples-Written") != "1" {
			t.Errorf("%s: samples written header %q, want 1", tc.name, resp.Header.Get("X-Prometheus-Remote-Write-Samples-Written"))
		}
	}
}
