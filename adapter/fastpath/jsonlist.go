package fastpath

import (
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/metrics/pkg/apis/external_metrics"
)

// An external metric list in JSON, byte for byte what the API group's JSON
// serializer writes (encoding/json of the v1beta1 list, then a newline),
// without reflection: the generic encoder was about a tenth of the CPU of a
// cached selector query. TestExternalListJSON compares the two.

// gzipThreshold is the chain's: above it, a client accepting gzip gets it
// (responsewriters' defaultGzipThresholdBytes); such answers take the chain's
// writer.
const gzipThreshold = 128 * 1024

var jsonBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// writeExternalJSON writes l as SerializeObject would for a JSON client and
// reports whether it did; it declines lists with list metadata and answers
// large enough for gzip.
func writeExternalJSON(w http.ResponseWriter, l *external_metrics.ExternalMetricValueList) bool {
	if l.ListMeta != (metav1.ListMeta{}) {
		return false
	}
	bp := jsonBuffers.Get().(*[]byte)
	defer jsonBuffers.Put(bp)
	b := appendExternalJSON((*bp)[:0], l)
	*bp = b
	if len(b) > gzipThreshold {
		return false
	}
	w.Header().Set("Content-Type", runtime.ContentTypeJSON)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	return true
}

func appendExternalJSON(b []byte, l *external_metrics.ExternalMetricValueList) []byte {
	b = append(b, `{"kind":"ExternalMetricValueList","apiVersion":"external.metrics.k8s.io/v1beta1","metadata":{},"items":`...)
	if l.Items == nil {
		return append(b, "null}\n"...)
	}
	b = append(b, '[')
	var keys []string
	for i := range l.Items {
		it := &l.Items[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		if it.Kind != "" {
			b = append(b, `"kind":`...)
			b = appendJSONString(b, it.Kind)
			b = append(b, ',')
		}
		if it.APIVersion != "" {
			b = append(b, `"apiVersion":`...)
			b = appendJSONString(b, it.APIVersion)
			b = append(b, ',')
		}
		b = append(b, `"metricName":`...)
		b = appendJSONString(b, it.MetricName)
		b = append(b, `,"metricLabels":`...)
		if it.MetricLabels == nil {
			b = append(b, "null"...)
		} else {
			keys = keys[:0]
			for k := range it.MetricLabels {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			b = append(b, '{')
			for j, k := range keys {
				if j > 0 {
					b = append(b, ',')
				}
				b = appendJSONString(b, k)
				b = append(b, ':')
				b = appendJSONString(b, it.MetricLabels[k])
			}
			b = append(b, '}')
		}
		b = append(b, `,"timestamp":`...)
		if it.Timestamp.IsZero() {
			b = append(b, "null"...)
		} else {
			b = append(b, '"')
			b = it.Timestamp.UTC().AppendFormat(b, time.RFC3339)
			b = append(b, '"')
		}
		if it.WindowSeconds != nil {
			b = append(b, `,"window":`...)
			b = strconv.AppendInt(b, *it.WindowSeconds, 10)
		}
		b = append(b, `,"value":`...)
		v, _ := it.Value.MarshalJSON() // never fails; cached or canonical, as encoding/json calls it
		b = append(b, v...)
		b = append(b, '}')
	}
	return append(b, "]}\n"...)
}

// appendJSONString appends s quoted as encoding/json does by default (HTML
// characters escaped, invalid UTF-8 replaced, U+2028 and U+2029 escaped).
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
