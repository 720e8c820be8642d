package pushformat

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	writev2 "github.com/prometheus/client_golang/exp/api/remote/genproto/v2"
	"google.golang.org/protobuf/encoding/protowire"
)

// rw1 builds remote-write 1.0 messages field by field, as the specification
// numbers them (the test's own encoder, independent of the decoder's walk).
type rw1Series struct {
	labels     [][2]string
	samples    []rw1Sample
	histograms int
}

type rw1Sample struct {
	v  float64
	ms int64
}

func rw1(series ...rw1Series) []byte {
	var req []byte
	for _, s := range series {
		var ts []byte
		for _, l := range s.labels {
			var lb []byte
			lb = protowire.AppendTag(lb, 1, protowire.BytesType)
			lb = protowire.AppendString(lb, l[0])
			lb = protowire.AppendTag(lb, 2, protowire.BytesType)
			lb = protowire.AppendString(lb, l[1])
			ts = protowire.AppendTag(ts, 1, protowire.BytesType)
			ts = protowire.AppendBytes(ts, lb)
		}
		for _, sm := range s.samples {
			var sb []byte
			sb = protowire.AppendTag(sb, 1, protowire.Fixed64Type)
			sb = protowire.AppendFixed64(sb, math.Float64bits(sm.v))
			sb = protowire.AppendTag(sb, 2, protowire.VarintType)
			sb = protowire.AppendVarint(sb, uint64(sm.ms))
			ts = protowire.AppendTag(ts, 2, protowire.BytesType)
			ts = protowire.AppendBytes(ts, sb)
		}
		for range s.histograms {
			ts = protowire.AppendTag(ts, 4, protowire.BytesType)
			ts = protowire.AppendBytes(ts, []byte{0x08, 0x01}) // count_int: 1
		}
		req = protowire.AppendTag(req, 1, protowire.BytesType)
		req = protowire.AppendBytes(req, ts)
	}
	// metadata (field 3): ignored
	req = protowire.AppendTag(req, 3, protowire.BytesType)
	req = protowire.AppendBytes(req, []byte{0x08, 0x01})
	return req
}

// staleNaN is Prometheus' staleness marker.
var staleNaN = math.Float64frombits(0x7ff0000000000002)

func TestParseRemoteWriteV1(t *testing.T) {
	t.Parallel()
	name := func(n string, more ...[2]string) [][2]string {
		return append([][2]string{{"__name__", n}}, more...)
	}
	tests := []struct {
		name    string
		body    []byte
		want    map[string]float64 // name{labels key} -> value
		skipped int
		err     string
	}{
		{
			name: "latest sample of each series",
			body: rw1(
				rw1Series{labels: name("queue_depth", [2]string{"queue", "orders"}, [2]string{"namespace", "shop"}),
					samples: []rw1Sample{{5, 2000}, {7, 3000}, {6, 2500}}},
				rw1Series{labels: name("queue_depth", [2]string{"queue", "billing"}), samples: []rw1Sample{{1, 1000}}},
			),
			want: map[string]float64{"queue_depth{namespace=shop,queue=orders}": 7, "queue_depth{queue=billing}": 1},
		},
		{
			name: "staleness markers, NaN, infinities and histograms are skipped",
			body: rw1(
				rw1Series{labels: name("up"), samples: []rw1Sample{{staleNaN, 1000}}},
				rw1Series{labels: name("ratio"), samples: []rw1Sample{{math.NaN(), 1000}, {math.Inf(1), 1000}, {0.5, 900}}},
				rw1Series{labels: name("latency"), histograms: 2},
			),
			want:    map[string]float64{"ratio{}": 0.5},
			skipped: 5,
		},
		{name: "no metric name", body: rw1(rw1Series{labels: [][2]string{{"queue", "a"}}, samples: []rw1Sample{{1, 1}}}), err: `timeseries[0]: invalid or missing metric name (__name__) ""`},
		{name: "invalid label name", body: rw1(rw1Series{labels: name("q", [2]string{"__x", "a"}), samples: []rw1Sample{{1, 1}}}), err: `timeseries[0] (q): invalid label name "__x"`},
		{name: "label twice", body: rw1(rw1Series{labels: name("q", [2]string{"a", "1"}, [2]string{"a", "2"}), samples: []rw1Sample{{1, 1}}}), err: `timeseries[0]: label "a" twice`},
		{name: "value out of range", body: rw1(rw1Series{labels: name("q"), samples: []rw1Sample{{1e300, 1}}}), err: "out of range"},
		{name: "malformed", body: []byte{0x0a, 0x10, 0x01}, err: "malformed protobuf"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d, err := ParseRemoteWriteV1(tc.body)
			checkDecoded(t, d, err, tc.want, tc.skipped, tc.err)
		})
	}
}

func TestParseRemoteWriteV1Timestamp(t *testing.T) {
	t.Parallel()
	d, err := ParseRemoteWriteV1(rw1(rw1Series{labels: [][2]string{{"__name__", "q"}}, samples: []rw1Sample{{3, 1767225600123}}}))
	if err != nil {
		t.Fatal(err)
	}
	if want := time.UnixMilli(1767225600123); !d.Samples[0].Timestamp.Equal(want) {
		t.Errorf("timestamp %v, want %v", d.Samples[0].Timestamp, want)
	}
}

func TestParseRemoteWriteV2(t *testing.T) {
	t.Parallel()
	req := &writev2.Request{
		Symbols: []string{"", "__name__", "queue_depth", "queue", "orders", "up"},
		Timeseries: []*writev2.TimeSeries{
			{LabelsRefs: []uint32{1, 2, 3, 4}, Samples: []*writev2.Sample{{Value: 4, Timestamp: 10}, {Value: 9, Timestamp: 20}}},
			{LabelsRefs: []uint32{1, 5}, Samples: []*writev2.Sample{{Value: staleNaN, Timestamp: 20}}},
			{LabelsRefs: []uint32{1, 5}, Histograms: []*writev2.Histogram{{}}},
		},
	}
	body, err := req.MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	d, err := ParseRemoteWriteV2(body)
	checkDecoded(t, d, err, map[string]float64{"queue_depth{queue=orders}": 9}, 2, "")

	bad := &writev2.Request{Symbols: []string{"", "__name__"}, Timeseries: []*writev2.TimeSeries{{LabelsRefs: []uint32{1, 7}, Samples: []*writev2.Sample{{Value: 1}}}}}
	body, _ = bad.MarshalVT()
	_, err = ParseRemoteWriteV2(body)
	checkDecoded(t, Decoded{}, err, nil, 0, "label reference beyond the 2 symbols")
}

// checkDecoded compares a decode's samples (as name{k=v,...} -> value) and
// skipped count, or its error's text.
func checkDecoded(t *testing.T, d Decoded, err error, want map[string]float64, skipped int, wantErr string) {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("error %v, want one containing %q", err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, s := range d.Samples {
		var kv []string
		for k, v := range s.Labels {
			kv = append(kv, k+"="+v)
		}
		slices.Sort(kv)
		got[s.Name+"{"+strings.Join(kv, ",")+"}"] = s.Value
	}
	if len(got) != len(want) {
		t.Errorf("samples %v, want %v", got, want)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("sample %s = %v (present %v), want %v; all: %v", k, g, ok, v, got)
		}
	}
	if d.Skipped != skipped {
		t.Errorf("skipped %d (%s), want %d", d.Skipped, d.SkipReason, skipped)
	}
}
