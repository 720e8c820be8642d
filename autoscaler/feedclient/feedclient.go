// Package feedclient subscribes the autoscaler to the adapter's change feed
// (wire format: package changefeed) and hands each event to a Handler: the
// controller, which reconciles at once the objects whose metrics changed.
//
// The feed is an optimization, never a dependency: while it is down, every
// object is still reconciled at its sync period. The client reconnects with
// a capped backoff, notices a silent dead connection by the missing
// heartbeats, and on every (re)connection calls Handler.Resync, since
// anything may have changed while it was not listening: no change is lost
// to an outage, it is only seen later.
package feedclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/metricscale/metricscale/providers/changefeed"
)

// Handler receives the feed's events. Its methods must not block for long:
// they run on the reading goroutine.
type Handler interface {
	// Changed is called for each change event.
	Changed(ev *changefeed.Event)
	// Resync is called when the feed connects (again) and when the adapter
	// dropped changes: any metric may have changed, and no metric is
	// covered until a covered event says so again.
	Resync()
	// Covered is called for each covered and uncovered event.
	Covered(ev *changefeed.Event)
}

// Defaults of a Client.
const (
	DefaultMinBackoff = 500 * time.Millisecond
	DefaultMaxBackoff = 5 * time.Second
	// helloTimeout bounds the wait for the first line of a feed.
	helloTimeout = 30 * time.Second
	// missedHeartbeats is how many heartbeat intervals of silence end a
	// connection.
	missedHeartbeats = 3
	// maxLine bounds one event (a change carries one series' labels).
	maxLine = 1 << 20
)

// Client reads one feed.
type Client struct {
	url    string
	client *http.Client
	// MinBackoff and MaxBackoff bound the wait between connection attempts
	// (doubling from the first to the second, with jitter); set them before
	// Run.
	MinBackoff, MaxBackoff time.Duration

	connected atomic.Bool
	// heard is when the last line came (unix nanoseconds), silence how
	// long without one means the connection may be dead (see Live).
	heard, silence atomic.Int64
	// replica is the hello's, while connected (see Replica).
	replica atomic.Pointer[string]
}

var (
	connectedGauge = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: "metricscale", Subsystem: "autoscaler", Name: "change_feed_connected",
		Help:           "1 while the autoscaler listens to the adapter's change feed; 0 while it is down and objects are reconciled at their sync period only.",
		StabilityLevel: metrics.ALPHA,
	})
	eventsReceived = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "metricscale", Subsystem: "autoscaler", Name: "change_feed_events_total",
		Help:           "Events read from the change feed, by type (hello, change, resync, heartbeat).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"type"})
	connectFailures = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: "metricscale", Subsystem: "autoscaler", Name: "change_feed_disconnects_total",
		Help:           "Connections to the change feed that failed or ended.",
		StabilityLevel: metrics.ALPHA,
	})
)

func init() {
	legacyregistry.MustRegister(connectedGauge, eventsReceived, connectFailures)
}

// New returns a client of the feed at url, through client (which carries
// the TLS and credentials; it must have no overall timeout).
func New(url string, client *http.Client) *Client {
	return &Client{url: url, client: client, MinBackoff: DefaultMinBackoff, MaxBackoff: DefaultMaxBackoff}
}

// Connected reports whether the client listens to the feed now.
func (c *Client) Connected() bool { return c.connected.Load() }

// Live reports whether the client listens to the feed now and heard from
// it within a heartbeat interval and a half: a connection that died
// silently is ended only after missedHeartbeats intervals, and a reader
// that trusts the feed's coverage must not trust it that long.
func (c *Client) Live() bool {
	return c.connected.Load() && time.Since(time.Unix(0, c.heard.Load())) < time.Duration(c.silence.Load())
}

// Replica names the adapter process serving the feed now (its hello's
// replica, as in its answers' changefeed.ReplicaHeader); "" while
// disconnected or when the adapter names none.
func (c *Client) Replica() string {
	if p := c.replica.Load(); p != nil {
		return *p
	}
	return ""
}

// Run reads the feed until ctx ends, reconnecting as needed.
func (c *Client) Run(ctx context.Context, h Handler) {
	logger := klog.FromContext(ctx).WithValues("url", c.url)
	backoff := c.MinBackoff
	down := false // an outage was logged
	for ctx.Err() == nil {
		heard, err := c.stream(ctx, logger, h, down)
		c.setConnected(false)
		if ctx.Err() != nil {
			return
		}
		connectFailures.Inc()
		if heard {
			backoff = c.MinBackoff
			down = false
		}
		if !down {
			// Once per outage; the attempts that follow log at V(4).
			logger.Info("Change feed down: reconciling at each object's sync period until it is back", "err", err)
			down = true
		} else {
			logger.V(4).Info("Change feed still down", "err", err, "retryIn", backoff)
		}
		wait := backoff/2 + rand.N(backoff/2+1) // jitter: [backoff/2, backoff]
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		backoff = min(2*backoff, c.MaxBackoff)
	}
}

func (c *Client) setConnected(v bool) {
	if !v {
		c.replica.Store(nil)
	}
	c.connected.Store(v)
	if v {
		connectedGauge.Set(1)
	} else {
		connectedGauge.Set(0)
	}
}

// stream reads one connection until it ends; heard reports whether the
// feed said hello.
func (c *Client) stream(ctx context.Context, logger klog.Logger, h Handler, wasDown bool) (heard bool, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", changefeed.ContentType)
	// Silence for too long means a dead connection: cancel it.
	silence := errors.New("no event from the change feed in time (missed heartbeats)")
	watchdog := time.AfterFunc(helloTimeout, func() { cancel(silence) })
	defer watchdog.Stop()
	resp, err := c.client.Do(req)
	if err != nil {
		return false, cause(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		err := fmt.Errorf("GET %s: %s: %s", c.url, resp.Status, strings.TrimSpace(string(msg)))
		switch resp.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			err = fmt.Errorf("%w (the autoscaler's identity needs get on the non-resource URL %s)", err, changefeed.Path)
		case http.StatusNotFound:
			err = fmt.Errorf("%w (the adapter serves no change feed: started with --change-feed=false, or older)", err)
		}
		return false, err
	}
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	timeout := helloTimeout
	for {
		line, err := readLine(r)
		if err != nil {
			return heard, cause(ctx, err)
		}
		watchdog.Reset(timeout)
		c.heard.Store(time.Now().UnixNano())
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var ev changefeed.Event
		if err := json.Unmarshal(line, &ev); err != nil {
			return heard, fmt.Errorf("decoding a change feed event: %w", err)
		}
		eventsReceived.WithLabelValues(eventType(ev.Type)).Inc()
		switch ev.Type {
		case changefeed.TypeHello:
			quiet := helloTimeout
			if ev.HeartbeatSeconds > 0 {
				timeout = time.Duration(missedHeartbeats*ev.HeartbeatSeconds) * time.Second
				watchdog.Reset(timeout)
				quiet = time.Duration(ev.HeartbeatSeconds) * 3 * time.Second / 2
			}
			c.silence.Store(int64(quiet))
			replica := ev.Replica
			c.replica.Store(&replica)
			heard = true
			c.setConnected(true)
			if wasDown {
				logger.Info("Change feed back: objects whose metrics change are reconciled at once again; reconciling every object it serves once")
			} else {
				logger.Info("Change feed connected: objects whose metrics change are reconciled at once")
			}
			// Whatever changed before the subscription is unknown.
			h.Resync()
		case changefeed.TypeChange:
			h.Changed(&ev)
		case changefeed.TypeResync:
			logger.V(2).Info("Change feed resync: the adapter dropped changes; reconciling every object it serves once")
			h.Resync()
		case changefeed.TypeCovered, changefeed.TypeUncovered:
			h.Covered(&ev)
		case changefeed.TypeHeartbeat:
		default:
			// A newer adapter's event: ignored.
		}
	}
}

func eventType(t string) string {
	switch t {
	case changefeed.TypeHello, changefeed.TypeChange, changefeed.TypeResync, changefeed.TypeHeartbeat, changefeed.TypeCovered, changefeed.TypeUncovered:
		return t
	}
	return "other"
}

// cause prefers the reason the context was cancelled (the watchdog's) over
// the read error it caused.
func cause(ctx context.Context, err error) error {
	if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
		return c
	}
	return err
}

// readLine reads one line of at most maxLine bytes.
func readLine(r *bufio.Reader) ([]byte, error) {
	var long []byte
	for {
		part, err := r.ReadSlice('\n')
		if err == nil {
			if long == nil {
				return part, nil
			}
			if len(long)+len(part) > maxLine {
				return nil, fmt.Errorf("a change feed event longer than %d bytes", maxLine)
			}
			return append(long, part...), nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if errors.Is(err, io.EOF) {
				err = errors.New("the adapter ended the change feed")
			}
			return nil, err
		}
		long = append(long, part...)
		if len(long) > maxLine {
			return nil, fmt.Errorf("a change feed event longer than %d bytes", maxLine)
		}
	}
}
