// Package remotewritetest holds what the tests of Prometheus remote write
// share: a remote-write 1.0 encoder. The remote-write library the project
// uses has no 1.0 message type (only 2.0's), so 1.0 bodies are built field by
// field as the specification numbers them, independently of the decoder's
// walk.
package remotewritetest

import (
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// Series is one TimeSeries of a 1.0 WriteRequest: its labels in order
// (__name__ among them, as Prometheus sends it), its samples, and a number
// of histograms (each a minimal one, count_int 1).
type Series struct {
	Labels     [][2]string
	Samples    []Sample
	Histograms int
}

// Sample is a value at a time in milliseconds.
type Sample struct {
	V  float64
	Ms int64
}

// V1 encodes a 1.0 WriteRequest (uncompressed) of series, followed by one
// metadata entry (field 3), which receivers that store samples ignore.
func V1(series ...Series) []byte {
	var req []byte
	for _, s := range series {
		var ts []byte
		for _, l := range s.Labels {
			var lb []byte
			lb = protowire.AppendTag(lb, 1, protowire.BytesType)
			lb = protowire.AppendString(lb, l[0])
			lb = protowire.AppendTag(lb, 2, protowire.BytesType)
			lb = protowire.AppendString(lb, l[1])
			ts = protowire.AppendTag(ts, 1, protowire.BytesType)
			ts = protowire.AppendBytes(ts, lb)
		}
		for _, sm := range s.Samples {
			var sb []byte
			sb = protowire.AppendTag(sb, 1, protowire.Fixed64Type)
			sb = protowire.AppendFixed64(sb, math.Float64bits(sm.V))
			sb = protowire.AppendTag(sb, 2, protowire.VarintType)
			sb = protowire.AppendVarint(sb, uint64(sm.Ms))
			ts = protowire.AppendTag(ts, 2, protowire.BytesType)
			ts = protowire.AppendBytes(ts, sb)
		}
		for range s.Histograms {
			ts = protowire.AppendTag(ts, 4, protowire.BytesType)
			ts = protowire.AppendBytes(ts, []byte{0x08, 0x01}) // count_int: 1
		}
		req = protowire.AppendTag(req, 1, protowire.BytesType)
		req = protowire.AppendBytes(req, ts)
	}
	req = protowire.AppendTag(req, 3, protowire.BytesType)
	req = protowire.AppendBytes(req, []byte{0x08, 0x01})
	return req
}
