package pushformat

import (
	"testing"
	"time"

	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
)

func str(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

func dp(v float64, ns uint64, attrs ...*commonpb.KeyValue) *metricspb.NumberDataPoint {
	return &metricspb.NumberDataPoint{Value: &metricspb.NumberDataPoint_AsDouble{AsDouble: v}, TimeUnixNano: ns, Attributes: attrs}
}

func otlpRequest(res []*commonpb.KeyValue, metrics ...*metricspb.Metric) *colmetricspb.ExportMetricsServiceRequest {
	return &colmetricspb.ExportMetricsServiceRequest{ResourceMetrics: []*metricspb.ResourceMetrics{{
		Resource:     &resourcepb.Resource{Attributes: res},
		ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: metrics}},
	}}}
}

func gauge(name string, points ...*metricspb.NumberDataPoint) *metricspb.Metric {
	return &metricspb.Metric{Name: name, Data: &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{DataPoints: points}}}
}

func sum(name string, temporality metricspb.AggregationTemporality, points ...*metricspb.NumberDataPoint) *metricspb.Metric {
	return &metricspb.Metric{Name: name, Data: &metricspb.Metric_Sum{Sum: &metricspb.Sum{DataPoints: points, AggregationTemporality: temporality}}}
}

func TestParseOTLP(t *testing.T) {
	t.Parallel()
	k8s := []*commonpb.KeyValue{str("k8s.namespace.name", "shop"), str("k8s.pod.name", "worker-0"), str("service.name", "worker")}
	intPoint := &metricspb.NumberDataPoint{Value: &metricspb.NumberDataPoint_AsInt{AsInt: 12}, Attributes: []*commonpb.KeyValue{
		str("queue.name", "orders"),
		{Key: "shard", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 3}}},
		{Key: "priority", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: true}}},
	}}
	tests := []struct {
		name    string
		req     *colmetricspb.ExportMetricsServiceRequest
		want    map[string]float64
		skipped int
		err     string
	}{
		{
			name: "gauge: names and attributes as Prometheus names, the resource's namespace and pod",
			req:  otlpRequest(k8s, gauge("queue.depth", intPoint)),
			want: map[string]float64{"queue_depth{namespace=shop,pod=worker-0,priority=true,queue_name=orders,shard=3}": 12},
		},
		{
			name: "a data point's namespace wins over the resource's",
			req:  otlpRequest(k8s, gauge("queue_depth", dp(4, 0, str("namespace", "other")))),
			want: map[string]float64{"queue_depth{namespace=other,pod=worker-0}": 4},
		},
		{
			name: "latest point of a series; cumulative sums taken",
			req: otlpRequest(nil,
				gauge("q", dp(1, 100), dp(3, 300), dp(2, 200)),
				sum("jobs_done_total", metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE, dp(40, 5))),
			want: map[string]float64{"q{}": 3, "jobs_done_total{}": 40},
		},
		{
			name: "delta sums, histograms, summaries, no-recorded-value points are skipped",
			req: otlpRequest(nil,
				sum("d", metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA, dp(1, 1), dp(2, 2)),
				&metricspb.Metric{Name: "h", Data: &metricspb.Metric_Histogram{Histogram: &metricspb.Histogram{DataPoints: []*metricspb.HistogramDataPoint{{}}}}},
				&metricspb.Metric{Name: "s", Data: &metricspb.Metric_Summary{Summary: &metricspb.Summary{DataPoints: []*metricspb.SummaryDataPoint{{}}}}},
				gauge("g", &metricspb.NumberDataPoint{Flags: 1, Value: &metricspb.NumberDataPoint_AsDouble{AsDouble: 9}}, dp(5, 1))),
			want:    map[string]float64{"g{}": 5},
			skipped: 5,
		},
		{
			name: "an attribute with no label form",
			req:  otlpRequest(nil, gauge("q", dp(1, 1, &commonpb.KeyValue{Key: "list", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{}}}}))),
			err:  `metrics[0] (q).dataPoints[0]: attribute "list"`,
		},
		{
			name: "two attributes become one label",
			req:  otlpRequest(nil, gauge("q", dp(1, 1, str("a.b", "1"), str("a_b", "2")))),
			err:  "become the same label a_b",
		},
		{
			name: "value out of range",
			req:  otlpRequest(nil, gauge("q", dp(1e300, 1))),
			err:  "out of range",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d, err := ParseOTLP(tc.req)
			checkDecoded(t, d, err, tc.want, tc.skipped, tc.err)
		})
	}
}

func TestDecodeOTLPJSON(t *testing.T) {
	t.Parallel()
	// OTLP JSON as exporters send it: lowerCamelCase names, int64 as strings,
	// enums as numbers, and a field this version does not know.
	body := []byte(`{"resourceMetrics":[{"resource":{"attributes":[{"key":"k8s.namespace.name","value":{"stringValue":"shop"}}]},
	  "scopeMetrics":[{"scope":{"name":"w"},"metrics":[{"name":"queue.depth","unit":"1","futureField":1,
	    "gauge":{"dataPoints":[{"asInt":"17","timeUnixNano":"1767225600000000000","attributes":[{"key":"queue","value":{"stringValue":"orders"}}]}]}},
	   {"name":"done","sum":{"aggregationTemporality":2,"isMonotonic":true,"dataPoints":[{"asDouble":2.5}]}}]}]}]}`)
	req, err := DecodeOTLP(body, true)
	if err != nil {
		t.Fatal(err)
	}
	d, err := ParseOTLP(req)
	checkDecoded(t, d, err, map[string]float64{"queue_depth{namespace=shop,queue=orders}": 17, "done{namespace=shop}": 2.5}, 0, "")
	for _, s := range d.Samples {
		if s.Name == "queue_depth" && !s.Timestamp.Equal(time.Unix(1767225600, 0)) {
			t.Errorf("timestamp %v, want 2026-01-01", s.Timestamp)
		}
	}
	if _, err := DecodeOTLP([]byte(`{"resourceMetrics":[`), true); err == nil {
		t.Error("a truncated JSON body was decoded")
	}
}

func TestPrometheusName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"queue.depth":     "queue_depth",
		"http.server.req": "http_server_req",
		"9lives":          "_9lives",
		"ok_name:sum":     "ok_name:sum",
		"température.eau": "temp_rature_eau",
	} {
		if got := PrometheusName(in); got != want {
			t.Errorf("PrometheusName(%q) = %q, want %q", in, got, want)
		}
	}
}
