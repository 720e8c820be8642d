package bench

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	writev2 "github.com/prometheus/client_golang/exp/api/remote/genproto/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"

	"github.com/metricscale/metricscale/adapter/internal/testenv"
	"github.com/metricscale/metricscale/providers/pushformat"
	"github.com/metricscale/metricscale/providers/pushformat/remotewritetest"
)

const (
	ingestSeries     = 1_000
	ingestNamespaces = 10
)

// ingestSeriesLabels are series i's labels (the metric is queue_depth): a
// queue's depth per namespace, as a queue exporter reports it.
func ingestSeriesLabels(i int) (namespace, queue, broker string) {
	return fmt.Sprintf("team-%d", i%ingestNamespaces), fmt.Sprintf("queue-%d", i), "rabbitmq-0"
}

// ingestBody is one push of the benchmark's batch in one wire format.
type ingestBody struct {
	path, contentType, encoding string
	header                      map[string]string
	body                        []byte
	status                      int // the answer of a stored push
}

// ingestFormat builds the batch in its format, each series i with the value
// base+i and (where the format carries one) the timestamp at, with the
// encoders of the format's own ecosystem: client_golang's registry and
// expfmt for the exposition formats (as the Pushgateway client sends them),
// the remote-write library's 2.0 message and symbol table, the OTLP protobuf
// types (one resource per namespace, as a collector batches them).
type ingestFormat struct {
	name  string
	build func(b *testing.B, base float64, at time.Time) ingestBody
}

var ingestFormats = []ingestFormat{
	{"text", func(b *testing.B, base float64, _ time.Time) ingestBody {
		return ingestBody{path: "/push", contentType: string(expfmt.NewFormat(expfmt.TypeTextPlain)), status: http.StatusNoContent,
			body: exposition(b, base, expfmt.NewFormat(expfmt.TypeTextPlain))}
	}},
	{"openmetrics", func(b *testing.B, base float64, _ time.Time) ingestBody {
		return ingestBody{path: "/push", contentType: string(expfmt.NewFormat(expfmt.TypeOpenMetrics)), status: http.StatusNoContent,
			body: exposition(b, base, expfmt.NewFormat(expfmt.TypeOpenMetrics))}
	}},
	{"json", func(b *testing.B, base float64, _ time.Time) ingestBody {
		var body pushformat.JSONBody
		for i := range ingestSeries {
			ns, q, broker := ingestSeriesLabels(i)
			v := base + float64(i)
			body.Series = append(body.Series, pushformat.JSONSeries{Name: "queue_depth", Value: &v,
				Labels: map[string]string{"namespace": ns, "queue": q, "broker": broker}})
		}
		raw, err := json.Marshal(body)
		if err != nil {
			b.Fatal(err)
		}
		return ingestBody{path: "/push", contentType: "application/json", status: http.StatusNoContent, body: raw}
	}},
	{"remote-write-1.0", func(_ *testing.B, base float64, at time.Time) ingestBody {
		series := make([]remotewritetest.Series, ingestSeries)
		for i := range series {
			ns, q, broker := ingestSeriesLabels(i)
			// sorted by name, as Prometheus sends them
			series[i] = remotewritetest.Series{
				Labels:  [][2]string{{"__name__", "queue_depth"}, {"broker", broker}, {"namespace", ns}, {"queue", q}},
				Samples: []remotewritetest.Sample{{V: base + float64(i), Ms: at.UnixMilli()}},
			}
		}
		return ingestBody{path: "/api/v1/write", contentType: "application/x-protobuf", encoding: "snappy",
			header: map[string]string{"X-Prometheus-Remote-Write-Version": "0.1.0"}, status: http.StatusNoContent,
			body: snappy.Encode(nil, remotewritetest.V1(series...))}
	}},
	{"remote-write-2.0", func(b *testing.B, base float64, at time.Time) ingestBody {
		st := writev2.NewSymbolTable()
		req := &writev2.Request{}
		for i := range ingestSeries {
			ns, q, broker := ingestSeriesLabels(i)
			req.Timeseries = append(req.Timeseries, &writev2.TimeSeries{
				LabelsRefs: st.SymbolizeLabels([]string{"__name__", "queue_depth", "broker", broker, "namespace", ns, "queue", q}, nil),
				Samples:    []*writev2.Sample{{Value: base + float64(i), Timestamp: at.UnixMilli()}},
			})
		}
		req.Symbols = st.Symbols()
		raw, err := req.MarshalVT()
		if err != nil {
			b.Fatal(err)
		}
		return ingestBody{path: "/api/v1/write", contentType: "application/x-protobuf;proto=io.prometheus.write.v2.Request", encoding: "snappy",
			header: map[string]string{"X-Prometheus-Remote-Write-Version": "2.0.0"}, status: http.StatusNoContent,
			body: snappy.Encode(nil, raw)}
	}},
	{"otlp-protobuf", func(b *testing.B, base float64, at time.Time) ingestBody {
		return ingestBody{path: "/v1/metrics", contentType: "application/x-protobuf", status: http.StatusOK,
			body: marshalOTLP(b, proto.Marshal, base, at)}
	}},
	{"otlp-json", func(b *testing.B, base float64, at time.Time) ingestBody {
		return ingestBody{path: "/v1/metrics", contentType: "application/json", status: http.StatusOK,
			body: marshalOTLP(b, protojson.Marshal, base, at)}
	}},
	{"otlp-protobuf-gzip", func(b *testing.B, base float64, at time.Time) ingestBody {
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		if _, err := zw.Write(marshalOTLP(b, proto.Marshal, base, at)); err != nil {
			b.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			b.Fatal(err)
		}
		return ingestBody{path: "/v1/metrics", contentType: "application/x-protobuf", encoding: "gzip", status: http.StatusOK, body: gz.Bytes()}
	}},
}

// exposition encodes the batch as a client_golang registry exposes it.
func exposition(b *testing.B, base float64, format expfmt.Format) []byte {
	reg := prometheus.NewRegistry()
	depth := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "queue_depth", Help: "Messages ready in the queue."}, []string{"namespace", "queue", "broker"})
	reg.MustRegister(depth)
	for i := range ingestSeries {
		ns, q, broker := ingestSeriesLabels(i)
		depth.WithLabelValues(ns, q, broker).Set(base + float64(i))
	}
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, format)
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			b.Fatal(err)
		}
	}
	if c, ok := enc.(expfmt.Closer); ok {
		if err := c.Close(); err != nil { // OpenMetrics' # EOF
			b.Fatal(err)
		}
	}
	return buf.Bytes()
}

// marshalOTLP encodes the batch as an OTLP export: a resource per namespace
// (k8s.namespace.name, stored as the namespace label) holding the gauge
// queue.depth (stored as queue_depth) with a point per queue.
func marshalOTLP(b *testing.B, marshal func(proto.Message) ([]byte, error), base float64, at time.Time) []byte {
	str := func(k, v string) *commonpb.KeyValue {
		return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
	}
	byNS := map[string]*metricspb.Gauge{}
	req := &colmetricspb.ExportMetricsServiceRequest{}
	for i := range ingestSeries {
		ns, q, broker := ingestSeriesLabels(i)
		g := byNS[ns]
		if g == nil {
			g = &metricspb.Gauge{}
			byNS[ns] = g
			req.ResourceMetrics = append(req.ResourceMetrics, &metricspb.ResourceMetrics{
				Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{str("k8s.namespace.name", ns), str("service.name", "queue-exporter")}},
				ScopeMetrics: []*metricspb.ScopeMetrics{{
					Scope:   &commonpb.InstrumentationScope{Name: "queue-exporter"},
					Metrics: []*metricspb.Metric{{Name: "queue.depth", Unit: "{message}", Data: &metricspb.Metric_Gauge{Gauge: g}}},
				}},
			})
		}
		g.DataPoints = append(g.DataPoints, &metricspb.NumberDataPoint{
			Attributes:   []*commonpb.KeyValue{str("queue", q), str("broker", broker)},
			TimeUnixNano: uint64(at.UnixNano()),
			Value:        &metricspb.NumberDataPoint_AsDouble{AsDouble: base + float64(i)},
		})
	}
	raw, err := marshal(req)
	if err != nil {
		b.Fatal(err)
	}
	return raw
}

// BenchmarkPushIngest measures the push port's ingestion of one batch of
// 1,000 queue_depth series (three labels, one sample each) in each wire
// format the port takes, through the real adapter (as pushedAdapter starts
// it): its push listener on loopback, the bearer token, the in-flight cap
// and body limit, the decoder, and the registry's memory store.
//
//	go test -run '^$' -bench PushIngest -benchtime 3s -count 3 -cpu 1,2 ./adapter/bench/
//
// Each request body is encoded once, before the timed loop; the loop posts
// it again and again (the series are stored and then refreshed) from
// GOMAXPROCS client goroutines in this process, so the figures include the
// client's side of loopback HTTP. It reports samples/s (wall clock) and
// samples/cpu-s (this process' user+system CPU: the adapter, its clients
// and the fake kube-apiserver, idle meanwhile), and the body's bytes per
// sample on the wire. After each run one series is read back through the
// external metrics API, so a format whose pushes were not stored fails.
func BenchmarkPushIngest(b *testing.B) {
	klog.SetOutput(nopWriter{})
	klog.LogToStderr(false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := testenv.Start(ctx, b.TempDir(), "--max-age=1h", "--series-ttl=1h")
	if err != nil {
		b.Fatal(err)
	}
	defer a.Stop()
	base := strings.TrimSuffix(a.PushURL, "/push")
	reader := a.NewClient(a.SecurePort, testenv.HPAToken, nil)
	for k, f := range ingestFormats {
		b.Run(f.name, func(b *testing.B) {
			// Built now, after the previous format's pushes: the timestamps
			// are newer than the stored ones, so these values replace them.
			value := float64((k + 1) * 100_000)
			req := f.build(b, value, time.Now())
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16, DisableCompression: true}}
			defer client.CloseIdleConnections()
			post := func() error {
				r, err := http.NewRequestWithContext(ctx, http.MethodPost, base+req.path, bytes.NewReader(req.body))
				if err != nil {
					return err
				}
				r.Header.Set("Authorization", "Bearer "+testenv.PushToken)
				r.Header.Set("Content-Type", req.contentType)
				if req.encoding != "" {
					r.Header.Set("Content-Encoding", req.encoding)
				}
				for k, v := range req.header {
					r.Header.Set(k, v)
				}
				resp, err := client.Do(r)
				if err != nil {
					return err
				}
				msg, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != req.status {
					return fmt.Errorf("%s %s: %d %q, want %d", f.name, req.path, resp.StatusCode, msg, req.status)
				}
				return nil
			}
			if err := post(); err != nil { // the connections' setup, out of the timing
				b.Fatal(err)
			}
			cpu0, start := selfCPUSeconds(), time.Now()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := post(); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			elapsed, cpu := time.Since(start).Seconds(), selfCPUSeconds()-cpu0
			if b.Failed() {
				return
			}
			samples := float64(b.N) * ingestSeries
			b.ReportMetric(samples/elapsed, "samples/s")
			b.ReportMetric(samples/cpu, "samples/cpu-s")
			b.ReportMetric(float64(len(req.body))/ingestSeries, "wire-B/sample")
			checkStored(ctx, b, reader, value)
		})
	}
}

// checkStored reads series 13 of the batch through the external metrics API
// and fails unless it holds the value the format's pushes carried.
func checkStored(ctx context.Context, b *testing.B, c *testenv.Client, base float64) {
	const i = 13
	ns, q, _ := ingestSeriesLabels(i)
	path := fmt.Sprintf("/apis/external.metrics.k8s.io/v1beta1/namespaces/%s/queue_depth?labelSelector=%s", ns, url.QueryEscape("queue="+q))
	code, body, err := c.Get(ctx, path)
	if err != nil || code != http.StatusOK {
		b.Fatalf("GET %s: %d %s %v", path, code, body, err)
	}
	var list struct {
		Items []struct {
			Value resource.Quantity `json:"value"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		b.Fatalf("GET %s: %v in %s", path, err, body)
	}
	want := base + i
	var got []float64
	for _, it := range list.Items {
		got = append(got, it.Value.AsApproximateFloat64())
	}
	if len(got) != 1 || got[0] != want {
		b.Fatalf("GET %s: values %v, want [%v]", path, got, want)
	}
}
