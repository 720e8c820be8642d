// Package rabbitmq serves RabbitMQ queue metrics (messages ready,
// unacknowledged, their total, consumers, publish and deliver rates) as
// external metrics, read on demand from the management HTTP API, or over
// AMQP 0-9-1 with a passive queue declare when the management plugin is
// absent. See README.md.
package rabbitmq

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync/atomic"

	"k8s.io/klog/v2"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/ondemand"
	"github.com/metricscale/metricscale/providers/options"
)

// Type is the provider type in the config.
const Type = "rabbitmq"

// Factory builds rabbitmq providers.
type Factory struct{}

var _ providers.Factory = Factory{}

// Validate implements providers.Factory without connecting.
func (Factory) Validate(field string, raw json.RawMessage) error {
	_, err := decodeOptions(field, raw)
	return err
}

// decodeOptions decodes raw strictly and validates it; every error names
// its field below field.
func decodeOptions(field string, raw json.RawMessage) (*settings, error) {
	var o Options
	if err := options.Decode(field, raw, &o); err != nil {
		return nil, err
	}
	return o.parse(field)
}

// New implements providers.Factory. It does not connect: the broker is
// first asked when a query comes.
func (Factory) New(name string, raw json.RawMessage, deps providers.Deps) (providers.Provider, error) {
	s, err := decodeOptions("options", raw)
	if err != nil {
		return nil, err
	}
	// a TLS file that cannot be read is a config error now, not a 503 later
	tlsConfig, err := s.tls.Config("options.tls")
	if err != nil {
		return nil, err
	}
	password := func() (string, error) { return s.password.Value("options.password") }
	var mgmt managementAPI
	var closers []func() error
	if s.management != nil {
		var tc *tls.Config
		if isTLS(s.management) {
			tc = tlsConfig
		}
		h := newHTTPManagement(s.management, s.username, password, tc)
		mgmt = h
		closers = append(closers, func() error { h.close(); return nil })
	}
	var aq amqpAPI
	if s.amqp != nil {
		var tc *tls.Config
		if isTLS(s.amqp) {
			tc = tlsConfig
		}
		c := newAMQPClient(s.amqp, s.username, password, tc)
		aq = c
		closers = append(closers, c.close)
	}
	p, err := newProvider(name, s, deps, mgmt, aq)
	if err != nil {
		return nil, err
	}
	p.closers = closers
	return p, nil
}

// Provider serves the configured queue metrics.
type Provider struct {
	*ondemand.Provider

	mgmt    managementAPI
	amqp    amqpAPI
	queues  *ondemand.Loader[[]queueStats]
	decls   *ondemand.Loader[amqpQueue]
	calls   atomic.Uint64
	closers []func() error
	secrets func() []string
}

var _ providers.ExternalProvider = (*Provider)(nil)

func newProvider(name string, s *settings, deps providers.Deps, mgmt managementAPI, aq amqpAPI) (*Provider, error) {
	// metrics reading one vhost (or queue) share one broker call for the
	// shortest TTL among them; each metric then caches its own reading
	shared := s.cacheTTL
	for _, m := range s.metrics {
		if m.opts.CacheTTL != nil && m.opts.CacheTTL.Duration < shared {
			shared = m.opts.CacheTTL.Duration
		}
	}
	p := &Provider{
		mgmt:   mgmt,
		amqp:   aq,
		queues: ondemand.NewLoader[[]queueStats](shared, 0, deps.Clock),
		decls:  ondemand.NewLoader[amqpQueue](shared, 0, deps.Clock),
	}
	p.secrets = func() []string {
		pw, _ := s.password.Value("options.password")
		return []string{pw}
	}
	metrics := make([]ondemand.Metric, 0, len(s.metrics))
	for _, m := range s.metrics {
		m := m
		read := p.readManagement(m)
		if m.source == SourceAMQP {
			read = p.readAMQP(m)
		}
		metrics = append(metrics, m.opts.Metric(read))
	}
	od, err := ondemand.New(name, metrics, ondemand.Options{CacheTTL: s.cacheTTL, Clock: deps.Clock, Changes: deps.Changes, Feed: s.feed})
	if err != nil {
		return nil, err
	}
	p.Provider = od
	return p, nil
}

// BrokerCalls is the number of management API requests and passive
// declares made.
func (p *Provider) BrokerCalls() uint64 { return p.calls.Load() }

// Close drops the provider's connections.
func (p *Provider) Close() error {
	var errs []error
	for _, c := range p.closers {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}

func (p *Provider) redact(err error) error { return options.Redact(err, p.secrets()...) }

func (p *Provider) readManagement(m metricSettings) func(context.Context) ([]ondemand.Series, error) {
	return func(ctx context.Context) ([]ondemand.Series, error) {
		qs, err := p.queues.Get(ctx, m.vhost, func(ctx context.Context) ([]queueStats, error) {
			p.calls.Add(1)
			qs, err := p.mgmt.Queues(ctx, m.vhost)
			if err != nil {
				err = p.redact(err)
				klog.V(2).InfoS("RabbitMQ management API read failed", "provider", p.Name(), "vhost", m.vhost, "err", err)
			}
			return qs, err
		})
		if err != nil {
			return nil, err
		}
		return seriesOf(m, qs)
	}
}

// seriesOf picks m's queues from a vhost's list and computes its measure.
func seriesOf(m metricSettings, qs []queueStats) ([]ondemand.Series, error) {
	var out []ondemand.Series
	seen := map[string]string{}
	for _, q := range qs {
		if q.Vhost != "" && q.Vhost != m.vhost {
			continue
		}
		lbls, ok := m.match(q.Name)
		if !ok {
			continue
		}
		v, err := m.measure.of(q)
		if err != nil {
			return nil, fmt.Errorf("queue %q in vhost %q: %w", q.Name, m.vhost, err)
		}
		key := labelKey(lbls)
		if other, dup := seen[key]; dup {
			return nil, fmt.Errorf("queues %q and %q in vhost %q both give the labels %s: make queueRegex's groups tell them apart", other, q.Name, m.vhost, key)
		}
		seen[key] = q.Name
		out = append(out, ondemand.Series{Labels: lbls, Value: v})
	}
	return out, nil
}

// match says whether queue is one of m's and returns its labels: queue
// and vhost, then queueRegex's named groups that took part in the match
// (a group named queue replaces the name).
func (m metricSettings) match(queue string) (map[string]string, bool) {
	if m.re == nil {
		return map[string]string{LabelQueue: queue, LabelVhost: m.vhost}, queue == m.queue
	}
	idx := m.re.FindStringSubmatchIndex(queue)
	if idx == nil {
		return nil, false
	}
	lbls := map[string]string{LabelQueue: queue, LabelVhost: m.vhost}
	for i, g := range m.re.SubexpNames() {
		if g != "" && idx[2*i] >= 0 {
			lbls[g] = queue[idx[2*i]:idx[2*i+1]]
		}
	}
	return lbls, true
}

func labelKey(l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", k, l[k])
	}
	return b.String()
}

// of computes the measure from a queue's management stats. A count the
// API did not report is an error, never a 0: a new queue's stats come with
// the next statistics interval, and a queue whose node is down has none. A
// rate with no message_stats is 0: the queue had no traffic.
func (ms Measure) of(q queueStats) (float64, error) {
	need := func(name string, v *float64) (float64, error) {
		if v == nil {
			return 0, fmt.Errorf("the management API reports no %s (statistics not collected yet, or the queue is down)", name)
		}
		if math.IsNaN(*v) || math.IsInf(*v, 0) {
			return 0, fmt.Errorf("the management API reports %s = %v", name, *v)
		}
		return *v, nil
	}
	rate := func(v *float64) (float64, error) {
		if v == nil {
			return 0, nil
		}
		return need("rate", v)
	}
	switch ms {
	case MeasureReady:
		return need("messages_ready", q.Ready)
	case MeasureUnacked:
		return need("messages_unacknowledged", q.Unacked)
	case MeasureTotal:
		r, err := need("messages_ready", q.Ready)
		if err != nil {
			return 0, err
		}
		u, err := need("messages_unacknowledged", q.Unacked)
		return r + u, err
	case MeasureConsumers:
		return need("consumers", q.Consumers)
	case MeasurePublishRate:
		return rate(q.MessageStat.Publish.Rate)
	case MeasureDeliverRate:
		return rate(q.MessageStat.DeliverGet.Rate)
	}
	return 0, fmt.Errorf("unknown measure %q", ms)
}

func (p *Provider) readAMQP(m metricSettings) func(context.Context) ([]ondemand.Series, error) {
	return func(ctx context.Context) ([]ondemand.Series, error) {
		key := m.vhost + "\x00" + m.queue
		q, err := p.decls.Get(ctx, key, func(ctx context.Context) (amqpQueue, error) {
			p.calls.Add(1)
			q, err := p.amqp.Inspect(ctx, m.vhost, m.queue)
			if err != nil && !errors.Is(err, errNoQueue) {
				err = p.redact(err)
				klog.V(2).InfoS("RabbitMQ passive declare failed", "provider", p.Name(), "vhost", m.vhost, "queue", m.queue, "err", err)
			}
			return q, err
		})
		if errors.Is(err, errNoQueue) {
			return nil, nil // no series: a 404 naming the metric
		}
		if err != nil {
			return nil, err
		}
		v := q.Ready
		if m.measure == MeasureConsumers {
			v = q.Consumers
		}
		return []ondemand.Series{{Labels: map[string]string{LabelQueue: m.queue, LabelVhost: m.vhost}, Value: float64(v)}}, nil
	}
}
