// Package redis is the redis provider: external metrics read from a Redis
// server on demand — list lengths (LLEN), stream lengths (XLEN) and, per
// consumer group of a stream (XINFO GROUPS), the pending count, the lag and
// the backlog (lag + pending). The metrics of one provider that share a
// cache TTL are read together: the SCANs their key patterns need, then one
// pipelined round trip for every LLEN, XLEN and XINFO GROUPS. See README.md.
package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/ondemand"
	"github.com/metricscale/metricscale/providers/options"
)

// Type is the provider's config type.
const Type = "redis"

// Factory builds redis providers.
type Factory struct{}

var _ providers.Factory = Factory{}

// Validate implements providers.Factory: it checks every option without
// connecting.
func (Factory) Validate(field string, raw json.RawMessage) error {
	_, err := decodeOptions(field, raw)
	return err
}

// New implements providers.Factory. It does not connect: the first query
// does, so discovery works while the server is down.
func (Factory) New(name string, raw json.RawMessage, deps providers.Deps) (providers.Provider, error) {
	const field = "options"
	s, err := decodeOptions(field, raw)
	if err != nil {
		return nil, err
	}
	c, err := newRedisClient(s, field)
	if err != nil {
		return nil, err
	}
	p, err := newProvider(name, s, c, deps.Clock, deps.Changes)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	klog.V(2).InfoS("redis provider configured", "provider", name, "address", s.addr, "db", s.db,
		"username", s.username, "tls", s.tlsOn, "metrics", len(s.metrics), "cacheTTL", s.ttl)
	return p, nil
}

// Provider serves the configured metrics of one Redis server.
type Provider struct {
	*ondemand.Provider
	client   Client
	settings *settings
	// readings share one read of Redis between the metrics of a batch
	readings *ondemand.Loader[*snapshot]
	// keyspace is the change feed over keyspace notifications (feed:
	// keyspace); nil: the polling feed, if any.
	keyspace *keyspaceFeed
}

// batch is the metrics read together: those with the same cache TTL.
type batch struct {
	key     string
	ttl     time.Duration
	metrics []*metricSettings
}

// scan is one SCAN iteration a batch needs.
type scan struct{ pattern, typ string }

// snapshot is one read of a batch's keys.
type snapshot struct {
	keys    map[scan][]string
	scanErr map[scan]error
	replies map[Command]Reply
}

var _ providers.ExternalProvider = (*Provider)(nil)

// newProvider builds the provider over client, the seam tests fake.
func newProvider(name string, s *settings, client Client, clk clock.PassiveClock, changes providers.ChangeSink) (*Provider, error) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	p := &Provider{client: client, settings: s, readings: ondemand.NewLoader[*snapshot](s.ttl, 0, clk)}
	batches := map[time.Duration]*batch{}
	metrics := make([]ondemand.Metric, 0, len(s.metrics))
	for i := range s.metrics {
		m := &s.metrics[i]
		ttl := s.ttl
		if m.CacheTTL != nil {
			ttl = m.CacheTTL.Duration
		}
		b := batches[ttl]
		if b == nil {
			b = &batch{key: ttl.String(), ttl: ttl}
			batches[ttl] = b
		}
		b.metrics = append(b.metrics, m)
		metrics = append(metrics, m.Metric(func(ctx context.Context) ([]ondemand.Series, error) {
			if s, ok, err := p.keyspace.series(m); ok {
				return s, err
			}
			snap, err := p.readings.GetTTL(ctx, b.key, b.ttl, func(ctx context.Context) (*snapshot, error) {
				return p.read(ctx, b)
			})
			if err != nil {
				return nil, err
			}
			return m.series(snap)
		}))
	}
	op, err := ondemand.New(name, metrics, ondemand.Options{CacheTTL: s.ttl, Clock: clk, Changes: changes, Feed: s.feed})
	if err != nil {
		return nil, err
	}
	p.Provider = op
	if kc, ok := client.(keyspaceClient); ok && s.keyspace && changes != nil {
		p.keyspace = newKeyspaceFeed(p, s, kc)
	}
	return p, nil
}

// Run implements providers.Runner: the change feed, over keyspace
// notifications with feed: keyspace, else polling.
func (p *Provider) Run(ctx context.Context) {
	if p.keyspace == nil {
		p.Provider.Run(ctx)
		return
	}
	defer p.EndFeed()
	p.keyspace.run(ctx)
}

// Close closes the provider's connections.
func (p *Provider) Close() error { return p.client.Close() }

// read reads every key of a batch's metrics: the SCANs of its key
// patterns, then one pipeline.
func (p *Provider) read(ctx context.Context, b *batch) (*snapshot, error) {
	snap := &snapshot{keys: map[scan][]string{}, scanErr: map[scan]error{}, replies: map[Command]Reply{}}
	var cmds []Command
	queued := map[Command]bool{}
	for _, m := range b.metrics {
		keys := []string{m.Key}
		if m.KeyPattern != "" {
			sc := scan{m.KeyPattern, m.Type.redisType()}
			if _, done := snap.keys[sc]; !done && snap.scanErr[sc] == nil {
				ks, err := p.client.Scan(ctx, sc.pattern, sc.typ, p.settings.scanCount, p.settings.maxKeys)
				if err != nil {
					if ctx.Err() != nil {
						return nil, p.redact(err)
					}
					snap.scanErr[sc] = p.redact(err)
					continue
				}
				snap.keys[sc] = ks
			}
			keys = snap.keys[sc]
		}
		for _, k := range keys {
			ops := []Op{m.op()}
			if m.needsLength() {
				ops = append(ops, OpXLen)
			}
			for _, op := range ops {
				c := Command{Op: op, Key: k}
				if !queued[c] {
					queued[c] = true
					cmds = append(cmds, c)
				}
			}
		}
	}
	replies, err := p.client.Pipeline(ctx, cmds)
	if err != nil {
		return nil, p.redact(err)
	}
	if len(replies) != len(cmds) {
		return nil, fmt.Errorf("pipeline of %d commands got %d replies", len(cmds), len(replies))
	}
	for i, c := range cmds {
		r := replies[i]
		r.Err = p.redact(r.Err)
		snap.replies[c] = r
	}
	return snap, nil
}

// redact keeps the password out of an error, whatever the client put in it.
func (p *Provider) redact(err error) error {
	if err == nil || !p.settings.password.IsSet() {
		return err
	}
	pw, perr := p.settings.password.Value("password")
	if perr != nil {
		return err
	}
	return options.Redact(err, pw)
}

// op is the command that reads one key of the metric.
func (m *metricSettings) op() Op {
	switch m.Type {
	case ListLength:
		return OpLLen
	case StreamLength:
		return OpXLen
	}
	return OpXInfoGroups
}

// needsLength: the lag is capped at the stream's length (groupLag).
func (m *metricSettings) needsLength() bool { return m.Type == StreamLag || m.Type == StreamBacklog }

// series computes the metric from a snapshot.
func (m *metricSettings) series(snap *snapshot) ([]ondemand.Series, error) {
	keys := []string{m.Key}
	if m.KeyPattern != "" {
		sc := scan{m.KeyPattern, m.Type.redisType()}
		if err := snap.scanErr[sc]; err != nil {
			return nil, err
		}
		keys = snap.keys[sc]
	}
	var out []ondemand.Series
	for _, k := range keys {
		lbls, ok := m.keyLabels(k)
		if !ok {
			continue
		}
		op := m.op()
		r, ok := snap.replies[Command{Op: op, Key: k}]
		if !ok {
			return nil, fmt.Errorf("%s %q: no reply", op, k)
		}
		if r.Err != nil {
			return nil, fmt.Errorf("%s %q: %w", op, k, r.Err)
		}
		if !m.Type.grouped() {
			out = append(out, ondemand.Series{Labels: lbls, Value: float64(r.N)})
			continue
		}
		var length int64 = -1
		if m.needsLength() && len(r.Groups) > 0 {
			lr := snap.replies[Command{Op: OpXLen, Key: k}]
			if lr.Err != nil {
				return nil, fmt.Errorf("%s %q: %w", OpXLen, k, lr.Err)
			}
			length = lr.N
		}
		// a stream that does not exist has no groups: no series
		for _, g := range r.Groups {
			if m.Group != "" && g.Name != m.Group {
				continue
			}
			v, err := m.groupValue(k, g, length)
			if err != nil {
				return nil, err
			}
			gl := make(map[string]string, len(lbls)+1)
			for n, v := range lbls {
				gl[n] = v
			}
			gl["group"] = g.Name
			out = append(out, ondemand.Series{Labels: gl, Value: float64(v)})
		}
	}
	return out, nil
}

// groupValue is the per-group figure the metric measures; length is the
// stream's XLEN (-1 when not read).
func (m *metricSettings) groupValue(stream string, g Group, length int64) (int64, error) {
	if m.Type == StreamPending {
		return g.Pending, nil
	}
	lag, err := groupLag(stream, g)
	if err != nil {
		return 0, err
	}
	// Redis counts entries trimmed (MAXLEN, XTRIM) before the group read
	// them, which no consumer will ever get: at most XLEN entries are left
	// to deliver.
	if length >= 0 && lag > length {
		lag = length
	}
	if m.Type == StreamLag {
		return lag, nil
	}
	return lag + g.Pending, nil
}

// groupLag is the group's lag as Redis reports it. When Redis cannot tell
// (NULL), no number is served: any estimate from XLEN would count entries
// already delivered, or miss deleted ones, and scale on a wrong figure.
func groupLag(stream string, g Group) (int64, error) {
	switch {
	case g.Lag != nil:
		return *g.Lag, nil
	case !g.LagReported:
		return 0, fmt.Errorf("stream %q group %q: the server reports no lag (XINFO GROUPS has it from Redis 7.0 on)", stream, g.Name)
	}
	return 0, fmt.Errorf("stream %q group %q: Redis reports the lag as unknown (NULL): entries after the group's last delivered ID %s were deleted (XDEL) or the group's ID was set by hand, so the undelivered count cannot be known until the group reads past them", stream, g.Name, g.LastDeliveredID)
}

// keyLabels are the labels identifying key: the key itself, and
// labelsFrom's named groups; false when labelsFrom does not match.
func (m *metricSettings) keyLabels(key string) (map[string]string, bool) {
	if m.labels == nil {
		return m.makeKeyLabels(key)
	}
	return m.labels.get(key, m.makeKeyLabels)
}

// keyLabelsMemo remembers a metric's key labels, which its series share:
// nothing changes them. Beyond limit keys it forgets them all at once.
type keyLabelsMemo struct {
	limit int
	mu    sync.Mutex
	byKey map[string]keyLabels
}

type keyLabels struct {
	labels map[string]string
	ok     bool
}

func (lm *keyLabelsMemo) get(key string, build func(string) (map[string]string, bool)) (map[string]string, bool) {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	if kl, found := lm.byKey[key]; found {
		return kl.labels, kl.ok
	}
	if lm.byKey == nil || len(lm.byKey) >= lm.limit {
		lm.byKey = map[string]keyLabels{}
	}
	labels, ok := build(key)
	lm.byKey[key] = keyLabels{labels, ok}
	return labels, ok
}

// makeKeyLabels is keyLabels, made.
func (m *metricSettings) makeKeyLabels(key string) (map[string]string, bool) {
	lbls := map[string]string{m.Type.keyLabel(): key}
	if m.labelsFrom == nil {
		return lbls, true
	}
	match := m.labelsFrom.FindStringSubmatch(key)
	if match == nil {
		return nil, false
	}
	for i, name := range m.labelsFrom.SubexpNames() {
		if i > 0 && name != "" && match[i] != "" {
			lbls[name] = match[i]
		}
	}
	return lbls, true
}
