package pushformat

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	writev2 "github.com/prometheus/client_golang/exp/api/remote/genproto/v2"

	"github.com/metricscale/metricscale/providers/pushformat/remotewritetest"
)

// The remote-write 1.0 encoder the tests share (the library has no 1.0
// message type).
type (
	rw1Series = remotewritetest.Series
	rw1Sample = remotewritetest.Sample
)

var rw1 = remotewritetest.V1

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
				rw1Series{Labels: name("queue_depth", [2]string{"queue", "orders"}, [2]string{"namespace", "shop"}),
					Samples: []rw1Sample{{V: 5, Ms: 2000}, {V: 7, Ms: 3000}, {V: 6, Ms: 2500}}},
				rw1Series{Labels: name("queue_depth", [2]string{"queue", "billing"}), Samples: []rw1Sample{{V: 1, Ms: 1000}}},
			),
			want: map[string]float64{"queue_depth{namespace=shop,queue=orders}": 7, "queue_depth{queue=billing}": 1},
		},
		{
			name: "staleness markers, NaN, infinities and histograms are skipped",
			body: rw1(
				rw1Series{Labels: name("up"), Samples: []rw1Sample{{V: staleNaN, Ms: 1000}}},
				rw1Series{Labels: name("ratio"), Samples: []rw1Sample{{V: math.NaN(), Ms: 1000}, {V: math.Inf(1), Ms: 1000}, {V: 0.5, Ms: 900}}},
				rw1Series{Labels: name("latency"), Histograms: 2},
			),
			want:    map[string]float64{"ratio{}": 0.5},
			skipped: 5,
		},
		{name: "no metric name", body: rw1(rw1Series{Labels: [][2]string{{"queue", "a"}}, Samples: []rw1Sample{{V: 1, Ms: 1}}}), err: `timeseries[0]: invalid or missing metric name (__name__) ""`},
		{name: "invalid label name", body: rw1(rw1Series{Labels: name("q", [2]string{"__x", "a"}), Samples: []rw1Sample{{V: 1, Ms: 1}}}), err: `timeseries[0] (q): invalid label name "__x"`},
		{name: "label twice", body: rw1(rw1Series{Labels: name("q", [2]string{"a", "1"}, [2]string{"a", "2"}), Samples: []rw1Sample{{V: 1, Ms: 1}}}), err: `timeseries[0]: label "a" twice`},
		{name: "value out of range", body: rw1(rw1Series{Labels: name("q"), Samples: []rw1Sample{{V: 1e300, Ms: 1}}}), err: "out of range"},
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
	d, err := ParseRemoteWriteV1(rw1(rw1Series{Labels: [][2]string{{"__name__", "q"}}, Samples: []rw1Sample{{V: 3, Ms: 1767225600123}}}))
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
