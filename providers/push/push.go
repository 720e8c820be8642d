// Package push is the HTTP endpoint that feeds pushed series to the
// providers that store them. It listens on its own port, apart from the
// aggregated API.
//
//	POST /push
//	Authorization: Bearer <token from --push-token-file>
//	Content-Type: text/plain (Prometheus text format) | application/json |
//	              application/openmetrics-text (timestamps in seconds, # EOF)
//
// With a Replicator, an accepted push is stamped with its version and sent
// to the other replicas (replicate.go); they exchange versioned samples on
// ReplicatePath, behind the same token. A push marked with ForwardedHeader
// (forwarded by a replica of an earlier version, during an upgrade) is
// stored and not sent on.
//
// Answers: 204 stored; 400 the body is invalid (the message names the line
// or series); 401 missing or wrong token; 405 not POST; 413 body over the
// limit; 415 unknown Content-Type; 429 more than MaxInflight pushes at once
// (with Retry-After); 507 the series or byte limit of the store is reached. A push is
// stored whole or not at all. The formats are described in package
// pushformat. GET /healthz answers 200 without a token.
//
// The same port takes Prometheus remote write (POST /api/v1/write, 1.0 and
// 2.0, snappy) and OTLP/HTTP metrics (POST /v1/metrics, protobuf or JSON,
// optionally gzip), with the same token, limits, atomicity and replication
// (ingest.go). A body may be gzip- or snappy-encoded on every path.
package push

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	"k8s.io/klog/v2"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/telemetry"
)

// DefaultMaxBodyBytes bounds a push body.
const DefaultMaxBodyBytes = 16 << 20

// DefaultMaxInflight bounds the pushes handled at once: each holds its body
// (up to the body limit) and its parsed samples (a few times the body) in
// memory, so the cap bounds the push path's memory to about
// DefaultMaxInflight × 4 × DefaultMaxBodyBytes (256 MiB at the defaults).
const DefaultMaxInflight = 4

// Sink stores samples; the provider registry is one.
type Sink interface {
	Append(samples []providers.Sample) error
}

// Handler serves POST /push.
type Handler struct {
	sink         Sink
	token        []byte
	maxBodyBytes int64
	// OnAppend, if set, runs after each successful push (for gauges).
	OnAppend func()
	// Replicator, if set, stamps each push and sends it to the other
	// replicas, and serves ReplicatePath.
	Replicator *Replicator
	// MaxInflight bounds the pushes handled at once (0:
	// DefaultMaxInflight); more get 429 with Retry-After. Set it before
	// serving.
	MaxInflight int
	// Hold, if set, is called before a push that will be replicated is
	// stored; the release it returns is called once every peer stored it,
	// was found down, or Replicator.HoldMax passed (or at once if the push
	// was refused). The adapter holds the push's change-feed events
	// meanwhile, so that no reader hears of a value before the other
	// replicas store it.
	Hold func() (release func())

	inflight     atomic.Int64
	replInflight atomic.Int64
}

// ForwardedHeader marks a push an earlier version of the adapter forwarded
// to its peers; such a push is stored, never sent on.
const ForwardedHeader = "X-Metricscale-Forwarded"

// NewHandler returns the push handler. token must not be empty: the endpoint
// never accepts anonymous writes.
func NewHandler(sink Sink, token string, maxBodyBytes int64) (*Handler, error) {
	token = strings.TrimSpace(token)
	if token == "" {
		return nil, errors.New("push: empty bearer token")
	}
	if maxBodyBytes <= 0 {
		maxBodyBytes = DefaultMaxBodyBytes
	}
	return &Handler{sink: sink, token: []byte(token), maxBodyBytes: maxBodyBytes}, nil
}

// Mux returns a ServeMux with /push, RemoteWritePath, OTLPPath and /healthz.
func (h *Handler) Mux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/push", h)
	mux.HandleFunc(RemoteWritePath, func(w http.ResponseWriter, r *http.Request) { h.ingest(w, r, remoteWriteProtocol) })
	mux.HandleFunc(OTLPPath, func(w http.ResponseWriter, r *http.Request) { h.ingest(w, r, otlpProtocol) })
	if h.Replicator != nil {
		mux.HandleFunc(ReplicatePath, h.serveReplicate)
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok")
	})
	return mux
}

func (h *Handler) authorized(r *http.Request) bool {
	auth := r.Header.Get("Authorization")
	const prefix = "bearer "
	if len(auth) <= len(prefix) || !strings.EqualFold(auth[:len(prefix)], prefix) {
		return false
	}
	got := []byte(strings.TrimSpace(auth[len(prefix):]))
	return subtle.ConstantTimeCompare(got, h.token) == 1
}

func (h *Handler) fail(w http.ResponseWriter, r *http.Request, code int, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	telemetry.PushRequests.WithLabelValues(strconv.Itoa(code)).Inc()
	klog.V(2).InfoS("Push refused", "code", code, "remote", r.RemoteAddr, "reason", msg)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, msg+"\n")
}

// ServeHTTP implements http.Handler: POST /push.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.ingest(w, r, pushProtocol)
}

// admit counts a request in inflight, or answers 429 when MaxInflight are
// already in flight (pushers' and peers' batches each have their own count).
// The caller releases an admitted request with inflight.Add(-1).
func (h *Handler) admit(inflight *atomic.Int64, w http.ResponseWriter, fail func(code int, msg string), what string) bool {
	limit := int64(h.MaxInflight)
	if limit <= 0 {
		limit = DefaultMaxInflight
	}
	if inflight.Add(1) > limit {
		inflight.Add(-1)
		w.Header().Set("Retry-After", "1")
		fail(http.StatusTooManyRequests, fmt.Sprintf("too many concurrent %s (at most %d): retry later", what, limit))
		return false
	}
	return true
}
