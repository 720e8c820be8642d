package pushformat

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/metricscale/metricscale/providers"
)

// resourceLabels are the resource attributes an OTLP series takes as labels
// (when its data point does not set them): the Kubernetes object the
// semantic conventions name, so that a series reaches the custom metrics of
// that namespace and pod. Other resource attributes are not labels.
var resourceLabels = map[string]string{
	"k8s.namespace.name": "namespace",
	"k8s.pod.name":       "pod",
}

// DecodeOTLP reads an OTLP/HTTP ExportMetricsServiceRequest, protobuf or
// (json true) the OTLP JSON encoding (unknown fields ignored, as OTLP asks of
// receivers).
func DecodeOTLP(body []byte, json bool) (*colmetricspb.ExportMetricsServiceRequest, error) {
	req := &colmetricspb.ExportMetricsServiceRequest{}
	var err error
	if json {
		err = protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(body, req)
	} else {
		err = proto.Unmarshal(body, req)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP metrics request: %w", err)
	}
	return req, nil
}

// ParseOTLP turns an OTLP metrics request into samples: the data points of
// gauges and of cumulative sums, one sample per series (the latest by time),
// named by the metric's name and labelled by the data point's attributes,
// both with every character Prometheus does not allow replaced by "_"
// (queue.depth becomes queue_depth; no unit or type suffix is added), plus
// k8s.namespace.name and k8s.pod.name of the resource as namespace and pod.
// Delta sums, histograms, exponential histograms and summaries, points
// flagged as having no recorded value, and values that are not finite are
// skipped and counted (OTLP's partial success). An invalid name, label or
// value refuses the whole request.
func ParseOTLP(req *colmetricspb.ExportMetricsServiceRequest) (Decoded, error) {
	var d Decoded
	var set seriesSet
	for ri, rm := range req.GetResourceMetrics() {
		res := map[string]string{}
		for _, kv := range rm.GetResource().GetAttributes() {
			if label, ok := resourceLabels[kv.GetKey()]; ok {
				if s, ok := kv.GetValue().GetValue().(*commonpb.AnyValue_StringValue); ok {
					res[label] = s.StringValue
				}
			}
		}
		for si, sm := range rm.GetScopeMetrics() {
			for mi, m := range sm.GetMetrics() {
				what := fmt.Sprintf("resourceMetrics[%d].scopeMetrics[%d].metrics[%d] (%s)", ri, si, mi, m.GetName())
				var points []*metricspb.NumberDataPoint
				switch data := m.GetData().(type) {
				case *metricspb.Metric_Gauge:
					points = data.Gauge.GetDataPoints()
				case *metricspb.Metric_Sum:
					if data.Sum.GetAggregationTemporality() == metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA {
						d.skip(len(data.Sum.GetDataPoints()), "delta sums are not stored (a cumulative sum or a gauge is)")
						continue
					}
					points = data.Sum.GetDataPoints()
				case *metricspb.Metric_Histogram:
					d.skip(len(data.Histogram.GetDataPoints()), "histograms are not stored")
					continue
				case *metricspb.Metric_ExponentialHistogram:
					d.skip(len(data.ExponentialHistogram.GetDataPoints()), "histograms are not stored")
					continue
				case *metricspb.Metric_Summary:
					d.skip(len(data.Summary.GetDataPoints()), "summaries are not stored")
					continue
				default:
					continue // no data
				}
				name := PrometheusName(m.GetName())
				if !ValidMetricName(name) {
					return Decoded{}, fmt.Errorf("%s: invalid metric name %q", what, m.GetName())
				}
				for pi, p := range points {
					at := fmt.Sprintf("%s.dataPoints[%d]", what, pi)
					if p.GetFlags()&uint32(metricspb.DataPointFlags_DATA_POINT_FLAGS_NO_RECORDED_VALUE_MASK) != 0 {
						d.skip(1, "points without a recorded value are not stored")
						continue
					}
					var v float64
					switch x := p.GetValue().(type) {
					case *metricspb.NumberDataPoint_AsDouble:
						v = x.AsDouble
					case *metricspb.NumberDataPoint_AsInt:
						v = float64(x.AsInt)
					default:
						d.skip(1, "points without a value are not stored")
						continue
					}
					if math.IsNaN(v) || math.IsInf(v, 0) {
						d.skip(1, "values that are not finite are not stored")
						continue
					}
					s, err := otlpSample(at, name, res, p.GetAttributes(), v, p.GetTimeUnixNano())
					if err != nil {
						return Decoded{}, err
					}
					if err := set.add(s); err != nil {
						return Decoded{}, err
					}
				}
			}
		}
	}
	d.Samples = set.out
	return d, nil
}

func otlpSample(at, name string, res map[string]string, attrs []*commonpb.KeyValue, v float64, ns uint64) (providers.Sample, error) {
	lbls := make(map[string]string, len(attrs)+len(res))
	for _, kv := range attrs {
		key := strings.ReplaceAll(PrometheusName(kv.GetKey()), ":", "_")
		if _, dup := lbls[key]; dup {
			return providers.Sample{}, fmt.Errorf("%s: attributes %q and another become the same label %s", at, kv.GetKey(), key)
		}
		val, err := attributeValue(kv.GetValue())
		if err != nil {
			return providers.Sample{}, fmt.Errorf("%s: attribute %q: %w", at, kv.GetKey(), err)
		}
		lbls[key] = val
	}
	for k, val := range res {
		if _, set := lbls[k]; !set {
			lbls[k] = val
		}
	}
	if err := checkLabels(lbls); err != nil {
		return providers.Sample{}, fmt.Errorf("%s: %w", at, err)
	}
	if err := checkValue(v); err != nil {
		return providers.Sample{}, fmt.Errorf("%s: %w", at, err)
	}
	s := providers.Sample{Name: name, Labels: lbls, Value: v}
	if ns != 0 {
		if ns > math.MaxInt64 {
			return providers.Sample{}, fmt.Errorf("%s: timeUnixNano %d out of range", at, ns)
		}
		s.Timestamp = time.Unix(0, int64(ns))
	}
	return s, nil
}

// attributeValue is a scalar attribute's value as a label value; arrays,
// maps and bytes have no label form and are refused.
func attributeValue(v *commonpb.AnyValue) (string, error) {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue, nil
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue), nil
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10), nil
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64), nil
	case nil:
		return "", nil
	default:
		return "", fmt.Errorf("a %T has no label value: use a string, number or bool", x)
	}
}

// PrometheusName replaces each character a Prometheus metric or label name
// does not allow with "_", and prefixes "_" to a name starting with a digit.
func PrometheusName(s string) string {
	var b strings.Builder
	for i, r := range s {
		ok := r < 0x80 && (isAlpha(byte(r)) || r == '_' || r == ':' || (i > 0 && isDigit(byte(r))))
		switch {
		case ok:
			b.WriteRune(r)
		case i == 0 && r < 0x80 && isDigit(byte(r)):
			b.WriteString("_")
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}
