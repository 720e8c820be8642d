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
package push

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	"k8s.io/klog/v2"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/pushformat"
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

// Mux returns a ServeMux with /push and /healthz.
func (h *Handler) Mux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/push", h)
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

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="metricscale-push"`)
		h.fail(w, r, http.StatusUnauthorized, "unauthorized: a valid bearer token is required")
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.fail(w, r, http.StatusMethodNotAllowed, "method %s not allowed: use POST", r.Method)
		return
	}
	if !h.admit(&h.inflight, w, r, "pushes") {
		return
	}
	defer h.inflight.Add(-1)
	ct := r.Header.Get("Content-Type")
	mediaType, _, err := mime.ParseMediaType(ct)
	if err != nil {
		h.fail(w, r, http.StatusUnsupportedMediaType, "Content-Type %q: use text/plain (Prometheus text format) or application/json", ct)
		return
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
		h.fail(w, r, http.StatusUnsupportedMediaType, "Content-Type %q: use text/plain (Prometheus text format) or application/json", mediaType)
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
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			h.fail(w, r, http.StatusRequestEntityTooLarge, "body larger than %d bytes", h.maxBodyBytes)
			return
		}
		h.fail(w, r, http.StatusBadRequest, "reading body: %v", err)
		return
	}
	samples, err := parse(body)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, "invalid push: %v", err)
		return
	}
	if len(samples) == 0 {
		h.fail(w, r, http.StatusBadRequest, "invalid push: no series")
		return
	}
	if forward {
		h.Replicator.Stamp(samples)
	}
	if err := h.sink.Append(samples); err != nil {
		if errors.Is(err, providers.ErrStoreFull) {
			h.fail(w, r, http.StatusInsufficientStorage, "not stored: %v", err)
			return
		}
		h.fail(w, r, http.StatusBadRequest, "not stored: %v", err)
		return
	}
	telemetry.PushedSamples.Add(float64(len(samples)))
	telemetry.PushRequests.WithLabelValues(strconv.Itoa(http.StatusNoContent)).Inc()
	if h.OnAppend != nil {
		h.OnAppend()
	}
	if forward {
		h.Replicator.Enqueue(samples, release)
		release = nil
	}
	klog.V(5).InfoS("Push stored", "samples", len(samples), "remote", r.RemoteAddr)
	w.WriteHeader(http.StatusNoContent)
}

// admit counts a request in inflight, or answers 429 when MaxInflight are
// already in flight (pushers' and peers' batches each have their own count).
// The caller releases an admitted request with inflight.Add(-1).
func (h *Handler) admit(inflight *atomic.Int64, w http.ResponseWriter, r *http.Request, what string) bool {
	limit := int64(h.MaxInflight)
	if limit <= 0 {
		limit = DefaultMaxInflight
	}
	if inflight.Add(1) > limit {
		inflight.Add(-1)
		w.Header().Set("Retry-After", "1")
		h.fail(w, r, http.StatusTooManyRequests, "too many concurrent %s (at most %d): retry later", what, limit)
		return false
	}
	return true
}
