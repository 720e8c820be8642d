// Package kafka is the kafka provider: the lag of Kafka consumer groups as
// external metrics, read on demand through franz-go's admin client and
// computed per partition from the log start offset, the high watermark and
// the group's committed offset (see README.md for each case).
package kafka

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/ondemand"
	"github.com/metricscale/metricscale/providers/options"
)

// Type is the provider type in the adapter config.
const Type = "kafka"

// DefaultClientID is the client id sent to the brokers.
const DefaultClientID = "metricscale-adapter"

// Factory builds kafka providers.
type Factory struct{}

var _ providers.Factory = Factory{}

// Validate checks every option without connecting.
func (Factory) Validate(field string, raw json.RawMessage) error {
	_, err := decodeOptions(field, raw)
	return err
}

// New builds the provider. It does not connect: the client dials the
// brokers on the first reading, so discovery works while they are down.
func (Factory) New(name string, raw json.RawMessage, deps providers.Deps) (providers.Provider, error) {
	return newProvider(name, raw, deps)
}

// Provider serves the configured lag metrics.
type Provider struct {
	*ondemand.Provider
	client *kgo.Client
}

var _ providers.ExternalProvider = (*Provider)(nil)

// Close closes the connections to the brokers.
func (p *Provider) Close() error {
	if p.client != nil { // nil over a test's fake admin
		p.client.Close()
	}
	return nil
}

// newProvider is New with extra client options (tests count requests).
func newProvider(name string, raw json.RawMessage, deps providers.Deps, extra ...kgo.Opt) (*Provider, error) {
	const field = "options"
	s, err := decodeOptions(field, raw)
	if err != nil {
		return nil, err
	}
	o := &s.Options
	opts, password, err := clientOptions(field, name, o)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("%s.brokers: %w", field, options.Redact(err, password))
	}
	p, err := build(name, o, kadmAdmin{cl: kadm.NewClient(cl)}, deps, password)
	if err != nil {
		cl.Close()
		return nil, err
	}
	p.client = cl
	return p, nil
}

// build makes the provider over an admin; password is redacted from errors.
func build(name string, o *Options, a admin, deps providers.Deps, password string) (*Provider, error) {
	metrics := make([]ondemand.Metric, 0, len(o.Metrics))
	for i := range o.Metrics {
		mo := &o.Metrics[i]
		r := &reader{admin: a, group: mo.Group, topics: mo.Topics, policy: mo.policy(), perPartition: mo.PerPartition}
		if mo.TopicRegex != "" {
			re, err := compileTopicRegex(mo.TopicRegex)
			if err != nil { // validated already
				return nil, fmt.Errorf("options.metrics[%d].topicRegex: %w", i, err)
			}
			r.re = re
		}
		metrics = append(metrics, mo.Metric(func(ctx context.Context) ([]ondemand.Series, error) {
			s, err := r.read(ctx)
			return s, options.Redact(err, password)
		}))
	}
	ttl := ondemand.DefaultCacheTTL
	if o.CacheTTL != nil {
		ttl = o.CacheTTL.Duration
	}
	od, err := ondemand.New(name, metrics, ondemand.Options{CacheTTL: ttl, Clock: deps.Clock, Changes: deps.Changes, Feed: o.Feed()})
	if err != nil {
		return nil, fmt.Errorf("options.%w", err)
	}
	return &Provider{Provider: od}, nil
}

// clientOptions are the franz-go options for o, and the SASL password
// (read now so a missing Secret fails at start, naming its field).
func clientOptions(field, name string, o *Options) ([]kgo.Opt, string, error) {
	id := o.ClientID
	if id == "" {
		id = DefaultClientID
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(o.Brokers...),
		kgo.ClientID(id),
		kgo.WithLogger(klogger{provider: name}),
	}
	if o.TLS != nil {
		c, err := o.TLS.Config(field + ".tls")
		if err != nil {
			return nil, "", err
		}
		opts = append(opts, kgo.DialTLSConfig(c))
	}
	if o.SASL == nil {
		return opts, "", nil
	}
	s, f := o.SASL, field+".sasl.password"
	password, err := s.Password.Value(f)
	if err != nil {
		return nil, "", err
	}
	// reread on every new connection: a rotated Secret is picked up
	secret := func() (string, error) { return s.Password.Value(f) }
	var mech sasl.Mechanism
	switch s.Mechanism {
	case MechanismPlain:
		mech = plain.Plain(func(context.Context) (plain.Auth, error) {
			pw, err := secret()
			return plain.Auth{User: s.Username, Pass: pw}, err
		})
	case MechanismScramSHA256, MechanismScramSHA512:
		auth := func(context.Context) (scram.Auth, error) {
			pw, err := secret()
			return scram.Auth{User: s.Username, Pass: pw}, err
		}
		mech = scram.Sha256(auth)
		if s.Mechanism == MechanismScramSHA512 {
			mech = scram.Sha512(auth)
		}
	}
	return append(opts, kgo.SASL(mech)), password, nil
}
