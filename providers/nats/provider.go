// Package nats is the nats provider type: NATS JetStream consumer backlogs
// (pending, ack-pending, both) and stream message counts as external
// metrics, read on demand from the JetStream API (see README.md).
package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/utils/clock"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/ondemand"
)

// Type is the provider type in the adapter's config.
const Type = "nats"

// Factory builds nats providers.
type Factory struct{}

var _ providers.Factory = Factory{}

// Validate implements providers.Factory; it does not connect.
func (Factory) Validate(field string, raw json.RawMessage) error {
	_, err := decodeOptions(field, raw)
	return err
}

// New implements providers.Factory. It returns at once: the connection is
// made in the background, and reads fail (503) until it is up.
func (Factory) New(name string, raw json.RawMessage, deps providers.Deps) (providers.Provider, error) {
	s, err := decodeOptions("options", raw)
	if err != nil {
		return nil, fmt.Errorf("nats provider %q: %w", name, err)
	}
	o := &s.Options
	c, err := newClient(name, o)
	if err != nil {
		return nil, fmt.Errorf("nats provider %q: %w", name, err)
	}
	p, err := newProvider(name, o, c, deps.Clock, deps.Changes)
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("nats provider %q: %w", name, err)
	}
	p.closer, p.ready = c.Close, c.connected
	return p, nil
}

// Provider serves the configured metrics.
type Provider struct {
	*ondemand.Provider
	api    api
	calls  atomic.Uint64
	closer func() error
	ready  func() error

	consumers *ondemand.Loader[*jetstream.ConsumerInfo]
	streams   *ondemand.Loader[*jetstream.StreamInfo]
}

// Not a providers.ReadinessChecker on purpose: a NATS outage must not take
// the adapter (and every other provider's metrics) out of service; Health
// and Connected report it.
var _ providers.ExternalProvider = (*Provider)(nil)

// newProvider builds the provider over a; tests pass a fake.
func newProvider(name string, o *Options, a api, clk clock.PassiveClock, changes providers.ChangeSink) (*Provider, error) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	p := &Provider{api: a}
	// Metrics reading one consumer (its pending, ackPending and backlog)
	// share one API call; it is cached for the shortest TTL among them so
	// no metric serves a reading older than its own TTL allows.
	ttls := map[string]time.Duration{}
	keep := func(key string, ttl time.Duration) {
		if old, ok := ttls[key]; !ok || ttl < old {
			ttls[key] = ttl
		}
	}
	metrics := make([]ondemand.Metric, 0, len(o.Metrics))
	for i := range o.Metrics {
		mo := o.Metrics[i]
		ttl := o.cacheTTL()
		if mo.CacheTTL != nil {
			ttl = mo.CacheTTL.Duration
		}
		v, series := mo.value(), mo.series()
		for _, s := range series {
			keep(key(v, s), ttl)
		}
		metrics = append(metrics, mo.Metric(func(ctx context.Context) ([]ondemand.Series, error) {
			return p.read(ctx, v, series, ttls)
		}))
	}
	// loads without a query deadline (none from the adapter) are bounded
	const loadTimeout = 10 * time.Second
	p.consumers = ondemand.NewLoader[*jetstream.ConsumerInfo](0, loadTimeout, clk)
	p.streams = ondemand.NewLoader[*jetstream.StreamInfo](0, loadTimeout, clk)
	op, err := ondemand.New(name, metrics, ondemand.Options{CacheTTL: o.cacheTTL(), Timeout: loadTimeout, Clock: clk, Changes: changes, Feed: o.Feed()})
	if err != nil {
		return nil, err
	}
	p.Provider = op
	return p, nil
}

func key(value string, s SeriesOption) string {
	if value == ValueMessages {
		return "stream/" + s.Stream
	}
	return "consumer/" + s.Stream + "/" + s.Consumer
}

// read reads every series of one metric; any failure fails the whole
// reading, since a sum over the rest would be a wrong number.
func (p *Provider) read(ctx context.Context, value string, series []SeriesOption, ttls map[string]time.Duration) ([]ondemand.Series, error) {
	out := make([]ondemand.Series, 0, len(series))
	for _, s := range series {
		k := key(value, s)
		lbls := make(map[string]string, len(s.Labels)+3)
		for lk, lv := range s.Labels {
			lbls[lk] = lv
		}
		lbls[StreamLabel] = s.Stream
		if s.Namespace != "" {
			lbls[ondemand.NamespaceLabel] = s.Namespace
		}
		var v float64
		if value == ValueMessages {
			si, err := p.streams.GetTTL(ctx, k, ttls[k], func(ctx context.Context) (*jetstream.StreamInfo, error) {
				p.calls.Add(1)
				return p.api.StreamInfo(ctx, s.Stream)
			})
			if err != nil {
				return nil, err
			}
			v = float64(si.State.Msgs)
		} else {
			lbls[ConsumerLabel] = s.Consumer
			ci, err := p.consumers.GetTTL(ctx, k, ttls[k], func(ctx context.Context) (*jetstream.ConsumerInfo, error) {
				p.calls.Add(1)
				return p.api.ConsumerInfo(ctx, s.Stream, s.Consumer)
			})
			if err != nil {
				return nil, err
			}
			if v, err = consumerValue(value, ci); err != nil {
				return nil, fmt.Errorf("stream %s consumer %s: %w", s.Stream, s.Consumer, err)
			}
		}
		out = append(out, ondemand.Series{Labels: lbls, Value: v})
	}
	return out, nil
}

// consumerValue computes a consumer metric from its info.
func consumerValue(value string, ci *jetstream.ConsumerInfo) (float64, error) {
	if ci.NumAckPending < 0 {
		return 0, fmt.Errorf("the server reports a negative num_ack_pending %d", ci.NumAckPending)
	}
	pending, ack := float64(ci.NumPending), float64(ci.NumAckPending)
	var v float64
	switch value {
	case ValuePending:
		v = pending
	case ValueAckPending:
		v = ack
	case ValueBacklog:
		v = pending + ack
	default:
		return 0, fmt.Errorf("unknown value %q", value)
	}
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, errors.New("value out of range")
	}
	return v, nil
}

// APICalls is the number of JetStream API calls made (consumer and stream
// info); BackendCalls counts metric reads, which may share one call.
func (p *Provider) APICalls() uint64 { return p.calls.Load() }

// Connected says whether the connection is up now (nil) or why not,
// without a round trip.
func (p *Provider) Connected() error {
	if p.ready == nil {
		return nil
	}
	return p.ready()
}

// Close closes the connection.
func (p *Provider) Close() error {
	if p.closer == nil {
		return nil
	}
	return p.closer()
}
