package pushformat

import (
	"fmt"
	"math"
	"time"

	writev2 "github.com/prometheus/client_golang/exp/api/remote/genproto/v2"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/metricscale/metricscale/providers"
)

// Decoded is what an ingestion body gave: the samples to store, and how many
// values were dropped on purpose (Skipped: not finite, a staleness marker,
// or of a kind the store does not hold, such as histograms), with why.
type Decoded struct {
	Samples []providers.Sample
	Skipped int
	// SkipReason names the first kind of value skipped, for the sender's log.
	SkipReason string
}

func (d *Decoded) skip(n int, reason string) {
	if n <= 0 {
		return
	}
	if d.Skipped == 0 {
		d.SkipReason = reason
	}
	d.Skipped += n
}

// seriesSet collects one sample per series (name and labels), the latest by
// timestamp: a body may carry several samples of one series, and the store
// keeps one value per series.
type seriesSet struct {
	index map[string]int
	out   []providers.Sample
}

func (s *seriesSet) add(sm providers.Sample) error {
	if s.index == nil {
		s.index = map[string]int{}
	}
	k := sm.Name + "\x00" + providers.LabelsKey(sm.Labels)
	if i, ok := s.index[k]; ok {
		if !sm.Timestamp.Before(s.out[i].Timestamp) {
			s.out[i] = sm
		}
		return nil
	}
	if len(s.out) >= MaxSamplesPerPush {
		return fmt.Errorf("more than %d series in one request", MaxSamplesPerPush)
	}
	s.index[k] = len(s.out)
	s.out = append(s.out, sm)
	return nil
}

// remoteSample checks one remote-write series' labels and latest sample and
// turns them into a Sample. what names the series in errors.
func remoteSample(what string, lbls map[string]string, v float64, ms int64) (providers.Sample, error) {
	name := lbls["__name__"]
	if !ValidMetricName(name) {
		return providers.Sample{}, fmt.Errorf("%s: invalid or missing metric name (__name__) %q", what, name)
	}
	delete(lbls, "__name__")
	if err := checkLabels(lbls); err != nil {
		return providers.Sample{}, fmt.Errorf("%s (%s): %w", what, name, err)
	}
	if err := checkValue(v); err != nil {
		return providers.Sample{}, fmt.Errorf("%s (%s): %w", what, name, err)
	}
	s := providers.Sample{Name: name, Labels: lbls, Value: v}
	if ms != 0 {
		t := time.UnixMilli(ms)
		if !TimeInRange(t) {
			return providers.Sample{}, fmt.Errorf("%s (%s): timestamp %d ms out of range", what, name, ms)
		}
		s.Timestamp = t
	}
	return s, nil
}

// ParseRemoteWriteV1 reads a Prometheus remote-write 1.0 WriteRequest
// (protobuf, already snappy-decoded). Of each series the latest sample is
// kept; samples that are not finite (NaN, which includes Prometheus'
// staleness markers, and infinities) are skipped, as are native histograms,
// exemplars and metadata. Anything else invalid refuses the whole request,
// naming the series.
//
// The message is read with protowire, field by field as the remote-write
// 1.0 specification defines it (WriteRequest: 1 timeseries; TimeSeries:
// 1 labels, 2 samples, 3 exemplars, 4 histograms; Label: 1 name, 2 value;
// Sample: 1 value, 2 timestamp): its Go types live in the Prometheus
// server's module, which this project does not depend on.
func ParseRemoteWriteV1(body []byte) (Decoded, error) {
	var d Decoded
	var set seriesSet
	i := 0
	err := eachField(body, func(num protowire.Number, typ protowire.Type, b []byte) error {
		if num != 1 || typ != protowire.BytesType {
			return nil // metadata and unknown fields
		}
		what := fmt.Sprintf("timeseries[%d]", i)
		i++
		lbls := map[string]string{}
		var best struct {
			v  float64
			ms int64
			ok bool
		}
		skipped := 0
		err := eachField(b, func(num protowire.Number, typ protowire.Type, b []byte) error {
			switch {
			case num == 1 && typ == protowire.BytesType:
				var name, value string
				if err := eachField(b, func(num protowire.Number, typ protowire.Type, b []byte) error {
					if typ == protowire.BytesType && num == 1 {
						name = string(b)
					} else if typ == protowire.BytesType && num == 2 {
						value = string(b)
					}
					return nil
				}); err != nil {
					return fmt.Errorf("label: %w", err)
				}
				if _, dup := lbls[name]; dup {
					return fmt.Errorf("label %q twice", name)
				}
				lbls[name] = value
			case num == 2 && typ == protowire.BytesType:
				var v float64
				var ms int64
				if err := eachField(b, func(num protowire.Number, typ protowire.Type, b []byte) error {
					if num == 1 && typ == protowire.Fixed64Type {
						bits, _ := protowire.ConsumeFixed64(b)
						v = math.Float64frombits(bits)
					} else if num == 2 && typ == protowire.VarintType {
						u, _ := protowire.ConsumeVarint(b)
						ms = int64(u)
					}
					return nil
				}); err != nil {
					return fmt.Errorf("sample: %w", err)
				}
				if math.IsNaN(v) || math.IsInf(v, 0) {
					skipped++
					return nil
				}
				if !best.ok || ms >= best.ms {
					best.v, best.ms, best.ok = v, ms, true
				}
			case num == 4 && typ == protowire.BytesType:
				d.skip(1, "native histograms are not stored")
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		d.skip(skipped, "values that are not finite (NaN, staleness markers, infinities) are not stored")
		if !best.ok {
			return nil
		}
		s, err := remoteSample(what, lbls, best.v, best.ms)
		if err != nil {
			return err
		}
		return set.add(s)
	})
	if err != nil {
		return Decoded{}, fmt.Errorf("remote-write 1.0 request: %w", err)
	}
	d.Samples = set.out
	return d, nil
}

// eachField calls fn with each field of a protobuf message; for a varint or
// fixed field b holds its encoded value (read it with protowire's
// ConsumeVarint or ConsumeFixed64), for a length-delimited field its content.
func eachField(msg []byte, fn func(protowire.Number, protowire.Type, []byte) error) error {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return fmt.Errorf("malformed protobuf: %w", protowire.ParseError(n))
		}
		msg = msg[n:]
		var val []byte
		switch typ {
		case protowire.BytesType:
			v, m := protowire.ConsumeBytes(msg)
			if m < 0 {
				return fmt.Errorf("malformed protobuf field %d: %w", num, protowire.ParseError(m))
			}
			val, n = v, m
		default:
			n = protowire.ConsumeFieldValue(num, typ, msg)
			if n < 0 {
				return fmt.Errorf("malformed protobuf field %d: %w", num, protowire.ParseError(n))
			}
			val = msg[:n]
		}
		if err := fn(num, typ, val); err != nil {
			return err
		}
		msg = msg[n:]
	}
	return nil
}

// ParseRemoteWriteV2 reads a Prometheus remote-write 2.0 Request (protobuf,
// already snappy-decoded), with the same rules as ParseRemoteWriteV1.
func ParseRemoteWriteV2(body []byte) (Decoded, error) {
	var req writev2.Request
	if err := req.UnmarshalVT(body); err != nil {
		return Decoded{}, fmt.Errorf("remote-write 2.0 request: malformed protobuf: %w", err)
	}
	var d Decoded
	var set seriesSet
	for i, ts := range req.Timeseries {
		what := fmt.Sprintf("timeseries[%d]", i)
		refs := ts.LabelsRefs
		if len(refs)%2 != 0 {
			return Decoded{}, fmt.Errorf("remote-write 2.0 request: %s: an odd number of label references", what)
		}
		lbls := make(map[string]string, len(refs)/2)
		for j := 0; j < len(refs); j += 2 {
			if int(refs[j]) >= len(req.Symbols) || int(refs[j+1]) >= len(req.Symbols) {
				return Decoded{}, fmt.Errorf("remote-write 2.0 request: %s: label reference beyond the %d symbols", what, len(req.Symbols))
			}
			lbls[req.Symbols[refs[j]]] = req.Symbols[refs[j+1]]
		}
		d.skip(len(ts.Histograms), "native histograms are not stored")
		var best *writev2.Sample
		for _, s := range ts.Samples {
			if math.IsNaN(s.Value) || math.IsInf(s.Value, 0) {
				d.skip(1, "values that are not finite (NaN, staleness markers, infinities) are not stored")
				continue
			}
			if best == nil || s.Timestamp >= best.Timestamp {
				best = s
			}
		}
		if best == nil {
			continue
		}
		s, err := remoteSample(what, lbls, best.Value, best.Timestamp)
		if err != nil {
			return Decoded{}, fmt.Errorf("remote-write 2.0 request: %w", err)
		}
		if err := set.add(s); err != nil {
			return Decoded{}, fmt.Errorf("remote-write 2.0 request: %w", err)
		}
	}
	d.Samples = set.out
	return d, nil
}
