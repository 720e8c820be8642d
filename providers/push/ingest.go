package push

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/client_golang/exp/api/remote"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"k8s.io/klog/v2"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/pushformat"
	"github.com/metricscale/metricscale/providers/telemetry"
)

// The ingestion endpoints beside /push, on the same port, behind the same
// token, limits and replication: Prometheus remote write (1.0 and 2.0, the
// path Prometheus' own receiver uses) and OTLP/HTTP metrics (OTLP's path).
const (
	RemoteWritePath = "/api/v1/write"
	OTLPPath        = "/v1/metrics"
)

// refusal is a request answered with an error status.
type refusal struct {
	code int
	msg  string
}

func (r *refusal) Error() string { return r.msg }

func refuse(code int, format string, args ...any) *refusal {
	return &refusal{code: code, msg: fmt.Sprintf(format, args...)}
}

// protocol is one wire format of the push port: how a request's body turns
// into samples and how the answers are written.
type protocol struct {
	// decoder picks the body's decoder from the request's headers
	// (Content-Type), or refuses it (415).
	decoder func(r *http.Request) (func([]byte) (pushformat.Decoded, error), *refusal)
	// empty is the answer to a body with nothing to store or skip: /push
	// refuses it, remote write and OTLP take it.
	emptyOK bool
	// reply answers a stored request (nil: 204).
	reply func(w http.ResponseWriter, r *http.Request, d pushformat.Decoded)
	// writeError writes an error answer's body (nil: text/plain).
	writeError func(w http.ResponseWriter, r *http.Request, code int, msg string)
}

// ingest serves one request of protocol p: the token, the method, the
// in-flight cap, the body (decompressed within the body limit), then the
// samples stored whole or not at all, stamped and sent to the peers as a
// push is.
func (h *Handler) ingest(w http.ResponseWriter, r *http.Request, p protocol) {
	fail := func(code int, format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		telemetry.PushRequests.WithLabelValues(strconv.Itoa(code)).Inc()
		klog.V(2).InfoS("Push refused", "path", r.URL.Path, "code", code, "remote", r.RemoteAddr, "reason", msg)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if p.writeError != nil {
			p.writeError(w, r, code, msg)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, msg+"\n")
	}
	if !h.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="metricscale-push"`)
		fail(http.StatusUnauthorized, "unauthorized: a valid bearer token is required")
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		fail(http.StatusMethodNotAllowed, "method %s not allowed: use POST", r.Method)
		return
	}
	if !h.admit(&h.inflight, w, func(code int, msg string) { fail(code, "%s", msg) }, "pushes") {
		return
	}
	defer h.inflight.Add(-1)
	decode, rf := p.decoder(r)
	if rf != nil {
		fail(rf.code, "%s", rf.msg)
		return
	}
	forward := h.Replicator != nil && r.Header.Get(ForwardedHeader) == ""
	var release func()
	if forward && h.Hold != nil {
		release = h.Hold()
		defer func() {
			if release != nil { // not handed to the forwarder
				release()
			}
		}()
	}
	body, rf := h.readBody(w, r)
	if rf != nil {
		fail(rf.code, "%s", rf.msg)
		return
	}
	d, err := decode(body)
	if err != nil {
		fail(http.StatusBadRequest, "invalid push: %v", err)
		return
	}
	samples := d.Samples
	if len(samples) == 0 {
		if !p.emptyOK && d.Skipped == 0 {
			fail(http.StatusBadRequest, "invalid push: no series")
			return
		}
		h.replied(w, r, p, d)
		return
	}
	if forward {
		h.Replicator.Stamp(samples)
	}
	if err := h.sink.Append(samples); err != nil {
		if errors.Is(err, providers.ErrStoreFull) {
			fail(http.StatusInsufficientStorage, "not stored: %v", err)
			return
		}
		fail(http.StatusBadRequest, "not stored: %v", err)
		return
	}
	telemetry.PushedSamples.Add(float64(len(samples)))
	if h.OnAppend != nil {
		h.OnAppend()
	}
	if forward {
		h.Replicator.Enqueue(samples, release)
		release = nil
	}
	klog.V(5).InfoS("Push stored", "path", r.URL.Path, "samples", len(samples), "skipped", d.Skipped, "remote", r.RemoteAddr)
	h.replied(w, r, p, d)
}

func (h *Handler) replied(w http.ResponseWriter, r *http.Request, p protocol, d pushformat.Decoded) {
	if d.Skipped > 0 {
		klog.V(4).InfoS("Push values skipped", "path", r.URL.Path, "skipped", d.Skipped, "reason", d.SkipReason, "remote", r.RemoteAddr)
	}
	if p.reply != nil {
		p.reply(w, r, d)
		telemetry.PushRequests.WithLabelValues(strconv.Itoa(http.StatusOK)).Inc()
		return
	}
	telemetry.PushRequests.WithLabelValues(strconv.Itoa(http.StatusNoContent)).Inc()
	w.WriteHeader(http.StatusNoContent)
}

// readBody reads the request body, decompressed by its Content-Encoding
// (none, gzip, or snappy's block format as remote write sends it), of at most
// the body limit before and after decompression.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *refusal) {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, refuse(http.StatusRequestEntityTooLarge, "body larger than %d bytes", h.maxBodyBytes)
		}
		return nil, refuse(http.StatusBadRequest, "reading body: %v", err)
	}
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
		return raw, nil
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, refuse(http.StatusBadRequest, "gzip body: %v", err)
		}
		out, err := io.ReadAll(io.LimitReader(zr, h.maxBodyBytes+1))
		if err != nil {
			return nil, refuse(http.StatusBadRequest, "gzip body: %v", err)
		}
		if int64(len(out)) > h.maxBodyBytes {
			return nil, refuse(http.StatusRequestEntityTooLarge, "body larger than %d bytes once decompressed", h.maxBodyBytes)
		}
		return out, nil
	case "snappy":
		n, err := snappy.DecodedLen(raw)
		if err != nil {
			return nil, refuse(http.StatusBadRequest, "snappy body: %v", err)
		}
		if int64(n) > h.maxBodyBytes {
			return nil, refuse(http.StatusRequestEntityTooLarge, "body of %d bytes once decompressed, more than %d", n, h.maxBodyBytes)
		}
		out, err := snappy.Decode(nil, raw)
		if err != nil {
			return nil, refuse(http.StatusBadRequest, "snappy body: %v", err)
		}
		return out, nil
	default:
		return nil, refuse(http.StatusUnsupportedMediaType, "Content-Encoding %q: use gzip, snappy or none", enc)
	}
}

// pushProtocol is POST /push: Prometheus text, OpenMetrics or JSON.
var pushProtocol = protocol{
	decoder: func(r *http.Request) (func([]byte) (pushformat.Decoded, error), *refusal) {
		const use = "use text/plain (Prometheus text format), application/openmetrics-text or application/json"
		ct := r.Header.Get("Content-Type")
		mediaType, _, err := mime.ParseMediaType(ct)
		if err != nil {
			return nil, refuse(http.StatusUnsupportedMediaType, "Content-Type %q: %s", ct, use)
		}
		var parse func([]byte) ([]providers.Sample, error)
		switch mediaType {
		case "text/plain":
			parse = pushformat.ParseText
		case "application/openmetrics-text":
			parse = pushformat.ParseOpenMetrics
		case "application/json":
			parse = pushformat.ParseJSON
		default:
			return nil, refuse(http.StatusUnsupportedMediaType, "Content-Type %q: %s", mediaType, use)
		}
		return func(body []byte) (pushformat.Decoded, error) {
			s, err := parse(body)
			return pushformat.Decoded{Samples: s}, err
		}, nil
	},
}

// remoteWriteProtocol is Prometheus remote write: the message type from the
// Content-Type as the remote-write library reads it, 204 on success with the
// 2.0 written-samples headers.
var remoteWriteProtocol = protocol{
	emptyOK: true,
	decoder: func(r *http.Request) (func([]byte) (pushformat.Decoded, error), *refusal) {
		ct := r.Header.Get("Content-Type")
		if ct == "" {
			ct = "application/x-protobuf"
		}
		msgType, err := remote.ParseProtoMsg(ct)
		if err != nil {
			return nil, refuse(http.StatusUnsupportedMediaType, "remote write: %v", err)
		}
		switch msgType {
		case remote.WriteV1MessageType:
			return pushformat.ParseRemoteWriteV1, nil
		case remote.WriteV2MessageType:
			return pushformat.ParseRemoteWriteV2, nil
		}
		return nil, refuse(http.StatusUnsupportedMediaType, "remote write: message %s is not taken: use %s or %s", msgType, remote.WriteV1MessageType, remote.WriteV2MessageType)
	},
	reply: func(w http.ResponseWriter, r *http.Request, d pushformat.Decoded) {
		msgType, _ := remote.ParseProtoMsg(r.Header.Get("Content-Type"))
		if msgType == remote.WriteV2MessageType {
			w.Header().Set("X-Prometheus-Remote-Write-Samples-Written", strconv.Itoa(len(d.Samples)))
			w.Header().Set("X-Prometheus-Remote-Write-Histograms-Written", "0")
			w.Header().Set("X-Prometheus-Remote-Write-Exemplars-Written", "0")
		}
		w.WriteHeader(http.StatusNoContent)
	},
}

// otlpJSON tells whether an OTLP request is JSON (else protobuf).
func otlpJSON(r *http.Request) bool {
	mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return mediaType == "application/json"
}

// otlpProtocol is OTLP/HTTP metrics: protobuf or JSON; the answer is an
// ExportMetricsServiceResponse (partial success counting what was skipped),
// errors a google.rpc.Status, both in the request's encoding.
var otlpProtocol = protocol{
	emptyOK: true,
	decoder: func(r *http.Request) (func([]byte) (pushformat.Decoded, error), *refusal) {
		mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || (mediaType != "application/x-protobuf" && mediaType != "application/json") {
			return nil, refuse(http.StatusUnsupportedMediaType, "Content-Type %q: OTLP/HTTP takes application/x-protobuf or application/json", r.Header.Get("Content-Type"))
		}
		json := mediaType == "application/json"
		return func(body []byte) (pushformat.Decoded, error) {
			req, err := pushformat.DecodeOTLP(body, json)
			if err != nil {
				return pushformat.Decoded{}, err
			}
			return pushformat.ParseOTLP(req)
		}, nil
	},
	reply: func(w http.ResponseWriter, r *http.Request, d pushformat.Decoded) {
		resp := &colmetricspb.ExportMetricsServiceResponse{}
		if d.Skipped > 0 {
			resp.PartialSuccess = &colmetricspb.ExportMetricsPartialSuccess{
				RejectedDataPoints: int64(d.Skipped),
				ErrorMessage:       d.SkipReason,
			}
		}
		writeOTLP(w, r, http.StatusOK, resp)
	},
	writeError: func(w http.ResponseWriter, r *http.Request, code int, msg string) {
		writeOTLP(w, r, code, &statuspb.Status{Code: grpcCode(code), Message: msg})
	},
}

func writeOTLP(w http.ResponseWriter, r *http.Request, code int, m proto.Message) {
	var b []byte
	if otlpJSON(r) {
		w.Header().Set("Content-Type", "application/json")
		b, _ = protojson.Marshal(m)
	} else {
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ = proto.Marshal(m)
	}
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// grpcCode is the google.rpc.Code of an HTTP error status, as OTLP's Status
// body carries it.
func grpcCode(code int) int32 {
	switch code {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
		return 3 // INVALID_ARGUMENT
	case http.StatusUnauthorized:
		return 16 // UNAUTHENTICATED
	case http.StatusTooManyRequests, http.StatusInsufficientStorage:
		return 8 // RESOURCE_EXHAUSTED
	case http.StatusMethodNotAllowed:
		return 12 // UNIMPLEMENTED
	default:
		return 13 // INTERNAL
	}
}
