package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/klog/v2"

	"github.com/metricscale/metricscale/providers/options"
)

// api is the provider's seam: the two JetStream API calls it makes. Tests
// put a fake here.
type api interface {
	ConsumerInfo(ctx context.Context, stream, consumer string) (*jetstream.ConsumerInfo, error)
	StreamInfo(ctx context.Context, stream string) (*jetstream.StreamInfo, error)
}

// errNotFound marks a stream or consumer the server does not have.
var errNotFound = errors.New("not found")

// client is the real api: one connection, made in the background and kept
// (reconnected) by nats.go, and raw $JS.API requests over it. Raw requests
// rather than jetstream.Consumer: that one refuses push consumers, and the
// subjects are then exactly the ones the README's permissions list.
type client struct {
	provider string
	servers  string
	prefix   string // "$JS.API." or "$JS.<domain>.API."
	opts     []nats.Option
	secrets  []string // redacted from errors

	mu      sync.Mutex
	nc      *nats.Conn
	lastErr error
	closed  bool
	stop    chan struct{}
	done    chan struct{}
}

// connectRetry is how long the background connect waits after nats.Connect
// itself failed (a bad creds file, say; an absent server is retried by
// nats.go).
const connectRetry = 2 * time.Second

func newClient(provider string, o *Options) (*client, error) {
	c := &client{
		provider: provider,
		servers:  strings.Join(o.Servers, ","),
		prefix:   "$JS.API.",
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	if o.Domain != "" {
		c.prefix = "$JS." + o.Domain + ".API."
	}
	opts := []nats.Option{
		nats.Name("metricscale-adapter/" + provider),
		// an absent server at start is retried like a lost one
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second),
		// no buffering while disconnected: a request fails at once instead
		// of waiting for the reconnect
		nats.ReconnectBufSize(-1),
		nats.Timeout(2 * time.Second),
		nats.NoCallbacksAfterClientClose(),
		nats.ConnectHandler(func(nc *nats.Conn) {
			klog.InfoS("Connected to NATS", "provider", provider, "server", nc.ConnectedUrlRedacted())
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			klog.InfoS("Reconnected to NATS", "provider", provider, "server", nc.ConnectedUrlRedacted())
		}),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			klog.InfoS("Disconnected from NATS", "provider", provider, "err", c.redact(err))
		}),
	}
	tlsConfig, err := o.TLS.Config("options.tls")
	if err != nil {
		return nil, err
	}
	if tlsConfig != nil {
		opts = append(opts, nats.Secure(tlsConfig))
	}
	switch {
	case o.User.IsSet():
		user, err := o.User.Value("options.user")
		if err != nil {
			return nil, err
		}
		pass, err := o.Password.Value("options.password")
		if err != nil {
			return nil, err
		}
		c.secrets = append(c.secrets, pass)
		// read again at each (re)connect, so a rotated Secret is picked up
		opts = append(opts, nats.UserInfoHandler(func() (string, string) {
			if u, err := o.User.Value("options.user"); err == nil {
				if p, err := o.Password.Value("options.password"); err == nil {
					return u, p
				}
			}
			return user, pass
		}))
	case o.Token.IsSet():
		tok, err := o.Token.Value("options.token")
		if err != nil {
			return nil, err
		}
		c.secrets = append(c.secrets, tok)
		opts = append(opts, nats.TokenHandler(func() string {
			if t, err := o.Token.Value("options.token"); err == nil {
				return t
			}
			return tok
		}))
	case o.CredsFile != "":
		opts = append(opts, nats.UserCredentials(o.CredsFile))
	}
	c.opts = opts
	go c.connect()
	return c, nil
}

// connect makes the connection once; nats.go keeps it from then on.
func (c *client) connect() {
	defer close(c.done)
	for {
		nc, err := nats.Connect(c.servers, c.opts...)
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			if nc != nil {
				nc.Close()
			}
			return
		}
		c.nc, c.lastErr = nc, c.redact(err)
		c.mu.Unlock()
		if err == nil {
			return
		}
		klog.InfoS("Connecting to NATS failed", "provider", c.provider, "err", c.redact(err))
		select {
		case <-c.stop:
			return
		case <-time.After(connectRetry):
		}
	}
}

// conn returns the connection when it is usable now, or why not.
func (c *client) conn() (*nats.Conn, error) {
	c.mu.Lock()
	nc, lastErr, closed := c.nc, c.lastErr, c.closed
	c.mu.Unlock()
	switch {
	case closed:
		return nil, errors.New("the provider is closed")
	case nc == nil && lastErr != nil:
		return nil, fmt.Errorf("cannot connect to NATS: %w", lastErr)
	case nc == nil:
		return nil, errors.New("not connected to NATS yet")
	}
	if st := nc.Status(); st != nats.CONNECTED {
		why := ""
		if err := nc.LastError(); err != nil {
			why = ": " + c.redact(err).Error()
		}
		return nil, fmt.Errorf("not connected to NATS at %s (%s)%s", c.servers, strings.ToLower(st.String()), why)
	}
	return nc, nil
}

// connected says whether the connection is usable, for readiness.
func (c *client) connected() error {
	_, err := c.conn()
	return err
}

func (c *client) redact(err error) error { return options.Redact(err, c.secrets...) }

// apiResponse is any JetStream API answer: an error or the payload.
type apiResponse struct {
	Error *jetstream.APIError `json:"error,omitempty"`
}

// request sends one $JS.API request and decodes its answer into out; what
// names the object asked about.
func (c *client) request(ctx context.Context, subject, what string, out any) error {
	nc, err := c.conn()
	if err != nil {
		return err
	}
	msg, err := nc.RequestWithContext(ctx, c.prefix+subject, nil)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return fmt.Errorf("%s: no JetStream answers on %s (is JetStream enabled, is the domain right?): %w", what, c.prefix+subject, err)
		}
		return fmt.Errorf("%s: %w", what, c.redact(err))
	}
	var r apiResponse
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		return fmt.Errorf("%s: decoding the answer to %s: %w", what, subject, err)
	}
	if r.Error != nil {
		if r.Error.Code == 404 {
			return fmt.Errorf("%s: %w (%s)", what, errNotFound, r.Error.Description)
		}
		return fmt.Errorf("%s: JetStream error %d (%d): %s", what, r.Error.Code, r.Error.ErrorCode, r.Error.Description)
	}
	if err := json.Unmarshal(msg.Data, out); err != nil {
		return fmt.Errorf("%s: decoding the answer to %s: %w", what, subject, err)
	}
	return nil
}

// ConsumerInfo asks the consumer's leader (CONSUMER.INFO is answered by it,
// not by a follower) for the consumer's state.
func (c *client) ConsumerInfo(ctx context.Context, stream, consumer string) (*jetstream.ConsumerInfo, error) {
	var ci jetstream.ConsumerInfo
	what := fmt.Sprintf("stream %s consumer %s", stream, consumer)
	if err := c.request(ctx, "CONSUMER.INFO."+stream+"."+consumer, what, &ci); err != nil {
		return nil, err
	}
	if ci.Name == "" {
		return nil, fmt.Errorf("%s: the answer has no consumer", what)
	}
	return &ci, nil
}

// StreamInfo asks the stream's leader for its state.
func (c *client) StreamInfo(ctx context.Context, stream string) (*jetstream.StreamInfo, error) {
	var si jetstream.StreamInfo
	what := "stream " + stream
	if err := c.request(ctx, "STREAM.INFO."+stream, what, &si); err != nil {
		return nil, err
	}
	if si.Config.Name == "" {
		return nil, fmt.Errorf("%s: the answer has no stream", what)
	}
	return &si, nil
}

// Close closes the connection and stops connecting.
func (c *client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.stop)
	nc := c.nc
	c.mu.Unlock()
	// a Connect in progress ends within its dial timeout and sees closed
	<-c.done
	if nc != nil {
		nc.Close()
	}
	return nil
}
