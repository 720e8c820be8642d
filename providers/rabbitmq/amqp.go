package rabbitmq

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// amqpQueue is what a passive queue declare reports: ready messages only
// (not the unacknowledged ones) and consumers.
type amqpQueue struct {
	Ready, Consumers int
}

// errNoQueue is a passive declare of a queue that does not exist.
var errNoQueue = errors.New("no such queue")

// amqpAPI is the seam the AMQP metrics read through.
type amqpAPI interface {
	// Inspect declares queue in vhost passively.
	Inspect(ctx context.Context, vhost, queue string) (amqpQueue, error)
}

// amqpClient keeps one connection per vhost, dialled on first use and
// again after it broke, and opens a channel per declare: a declare of a
// missing queue closes its channel.
type amqpClient struct {
	url      *url.URL
	username string
	password func() (string, error)
	tls      *tls.Config

	mu    sync.Mutex
	conns map[string]*amqpConn
}

type amqpConn struct {
	conn *amqp.Connection
	raw  net.Conn
}

func newAMQPClient(u *url.URL, username string, password func() (string, error), tlsConfig *tls.Config) *amqpClient {
	return &amqpClient{url: u, username: username, password: password, tls: tlsConfig, conns: map[string]*amqpConn{}}
}

// Inspect implements amqpAPI. It returns when ctx is done even if the
// broker hangs: the connection is then dropped, which ends the call.
func (c *amqpClient) Inspect(ctx context.Context, vhost, queue string) (amqpQueue, error) {
	type result struct {
		q   amqpQueue
		err error
	}
	done := make(chan result, 1)
	var cur *amqpConn
	var curMu sync.Mutex
	go func() {
		conn, err := c.conn(ctx, vhost)
		curMu.Lock()
		cur = conn
		curMu.Unlock()
		if err != nil {
			done <- result{err: err}
			return
		}
		q, err := declare(conn.conn, queue)
		if err != nil && !errors.Is(err, errNoQueue) {
			c.drop(vhost, conn)
		}
		done <- result{q: q, err: err}
	}()
	select {
	case r := <-done:
		return r.q, r.err
	case <-ctx.Done():
		curMu.Lock()
		if cur != nil {
			c.drop(vhost, cur)
		}
		curMu.Unlock()
		return amqpQueue{}, fmt.Errorf("amqp: vhost %q, queue %q: %w", vhost, queue, ctx.Err())
	}
}

func declare(conn *amqp.Connection, queue string) (amqpQueue, error) {
	ch, err := conn.Channel()
	if err != nil {
		return amqpQueue{}, fmt.Errorf("amqp: opening a channel: %w", err)
	}
	q, err := ch.QueueDeclarePassive(queue, false, false, false, false, nil)
	var ae *amqp.Error
	if errors.As(err, &ae) && ae.Code == amqp.NotFound {
		return amqpQueue{}, errNoQueue // the broker closed the channel
	}
	if err != nil {
		return amqpQueue{}, fmt.Errorf("amqp: passive declare of queue %q: %w", queue, err)
	}
	_ = ch.Close()
	return amqpQueue{Ready: q.Messages, Consumers: q.Consumers}, nil
}

// conn returns vhost's open connection or dials one.
func (c *amqpClient) conn(ctx context.Context, vhost string) (*amqpConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cc := c.conns[vhost]; cc != nil && !cc.conn.IsClosed() {
		return cc, nil
	}
	pw, err := c.password()
	if err != nil {
		return nil, err
	}
	cc := &amqpConn{}
	cfg := amqp.Config{
		SASL:            []amqp.Authentication{&amqp.PlainAuth{Username: c.username, Password: pw}},
		Vhost:           vhost,
		TLSClientConfig: c.tls,
		Heartbeat:       10 * time.Second,
		Properties:      amqp.Table{"connection_name": "metricscale-adapter"},
		Dial: func(network, addr string) (net.Conn, error) {
			conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			// bounds the TLS and AMQP handshakes; amqp091 clears it once open
			dl, ok := ctx.Deadline()
			if !ok {
				dl = time.Now().Add(10 * time.Second)
			}
			if err := conn.SetDeadline(dl); err != nil {
				conn.Close()
				return nil, err
			}
			cc.raw = conn
			return conn, nil
		},
	}
	if c.tls != nil {
		cfg.TLSClientConfig = c.tls.Clone()
	}
	// the URL holds no credentials: they go in SASL
	u := *c.url
	u.Path = "/"
	conn, err := amqp.DialConfig(u.String(), cfg)
	if err != nil {
		return nil, fmt.Errorf("amqp: connecting to %s as %q: %w", c.url.Redacted(), c.username, err)
	}
	cc.conn = conn
	c.conns[vhost] = cc
	return cc, nil
}

// drop closes a connection that failed or hung, so the next read dials.
func (c *amqpClient) drop(vhost string, cc *amqpConn) {
	c.mu.Lock()
	if c.conns[vhost] == cc {
		delete(c.conns, vhost)
	}
	c.mu.Unlock()
	if cc.raw != nil {
		cc.raw.Close() // unblocks whatever waits on the broker
	}
	if cc.conn != nil {
		go cc.conn.Close()
	}
}

func (c *amqpClient) close() error {
	c.mu.Lock()
	conns := c.conns
	c.conns = map[string]*amqpConn{}
	c.mu.Unlock()
	for _, cc := range conns {
		if cc.raw != nil {
			cc.raw.Close()
		}
		if cc.conn != nil {
			cc.conn.Close()
		}
	}
	return nil
}
