package changehub

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/metricscale/metricscale/providers/changefeed"
)

// DefaultHeartbeat is how often a subscriber hears from an idle feed.
const DefaultHeartbeat = 10 * time.Second

// Handler serves the feed (GET changefeed.Path) from a hub: one
// subscription per request, for as long as the request lasts. It does no
// authentication or authorization: it is mounted behind the API server's
// (see adapter/app), which must also count it as a long-running request.
type Handler struct {
	Hub *Hub
	// Heartbeat is the interval of heartbeats on an idle feed (0:
	// DefaultHeartbeat).
	Heartbeat time.Duration
	// WriteTimeout bounds one write to a subscriber (0: the heartbeat
	// interval, at least 10s): a subscriber that stops reading is dropped.
	WriteTimeout time.Duration
	// MaxSubscribers bounds the open subscriptions (0:
	// DefaultMaxSubscribers): each holds a goroutine, a connection and a
	// pending set, and one more is answered 503 with Retry-After.
	MaxSubscribers int

	open atomic.Int64
}

// DefaultMaxSubscribers is Handler.MaxSubscribers when unset: far above
// the autoscaler replicas a feed serves, far below what would exhaust the
// adapter.
const DefaultMaxSubscribers = 256

var (
	subscribersGauge = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: "metricscale", Subsystem: "adapter", Name: "change_feed_subscribers",
		Help:           "Open subscriptions to the change feed.",
		StabilityLevel: metrics.ALPHA,
	})
	eventsSent = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "metricscale", Subsystem: "adapter", Name: "change_feed_events_total",
		Help:           "Events written to change feed subscribers, by type (change, resync, heartbeat, hello).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"type"})
	registerOnce sync.Once
)

// RegisterMetrics registers the feed's metrics in component-base's legacy
// registry (served on the adapter's /metrics).
func RegisterMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(subscribersGauge, eventsSent) })
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "method "+r.Method+" not allowed: use GET", http.StatusMethodNotAllowed)
		return
	}
	heartbeat := h.Heartbeat
	if heartbeat <= 0 {
		heartbeat = DefaultHeartbeat
	}
	writeTimeout := h.WriteTimeout
	if writeTimeout <= 0 {
		writeTimeout = max(heartbeat, 10*time.Second)
	}
	limit := h.MaxSubscribers
	if limit <= 0 {
		limit = DefaultMaxSubscribers
	}
	if h.open.Add(1) > int64(limit) {
		h.open.Add(-1)
		w.Header().Set("Retry-After", "10")
		http.Error(w, fmt.Sprintf("the change feed has %d subscribers, the most it serves: retry later", limit), http.StatusServiceUnavailable)
		return
	}
	defer h.open.Add(-1)
	// Subscribe before hello: whatever changes after the subscriber hears
	// hello reaches it.
	sub := h.Hub.Subscribe()
	defer sub.Close()
	subscribersGauge.Inc()
	defer subscribersGauge.Dec()

	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", changefeed.ContentType)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	logger := klog.FromContext(r.Context()).WithValues("remote", r.RemoteAddr)

	// A write bounded by a deadline, so a peer that stopped reading ends
	// the subscription instead of holding it. The deadline is cleared after
	// each write: an HTTP/2 stream whose deadline passes is reset even when
	// nothing is being written, which would end an idle feed.
	send := func(events ...changefeed.Event) error {
		deadline := rc.SetWriteDeadline(time.Now().Add(writeTimeout)) == nil
		for i := range events {
			if err := enc.Encode(&events[i]); err != nil {
				return err
			}
			eventsSent.WithLabelValues(events[i].Type).Inc()
		}
		err := bw.Flush()
		if err == nil {
			err = rc.Flush()
		}
		if deadline {
			_ = rc.SetWriteDeadline(time.Time{})
		}
		return err
	}
	if err := send(changefeed.Event{Type: changefeed.TypeHello, HeartbeatSeconds: int(max(heartbeat/time.Second, 1)), Replica: h.Hub.Replica()}); err != nil {
		logger.V(2).Info("Change feed subscriber gone", "err", err)
		return
	}
	logger.V(2).Info("Change feed subscriber connected")
	idle := time.NewTimer(heartbeat)
	defer idle.Stop()
	for {
		var err error
		select {
		case <-r.Context().Done():
			logger.V(2).Info("Change feed subscriber disconnected")
			return
		case <-sub.Done():
			return // the hub closed: the adapter stops
		case <-sub.Ready():
			if events := sub.Take(); len(events) > 0 {
				err = send(events...)
			}
		case <-idle.C:
			err = send(changefeed.Event{Type: changefeed.TypeHeartbeat})
		}
		if err != nil {
			if !errors.Is(err, r.Context().Err()) {
				logger.V(2).Info("Change feed subscriber gone", "err", err)
			}
			return
		}
		idle.Reset(heartbeat)
	}
}
