package postgresql

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// connPool is a small pool of pgx connections, made on demand. pgxpool
// would do, but needs github.com/jackc/puddle/v2, which go.mod does not
// require; a provider runs at most one query per metric at a time, so a
// bounded stack of idle connections is all it needs.
type connPool struct {
	connect func(ctx context.Context) (*pgx.Conn, error)
	slots   chan struct{} // one token per connection in use or being made

	mu     sync.Mutex
	idle   []idleConn
	closed bool
}

type idleConn struct {
	conn  *pgx.Conn
	since time.Time
}

// maxIdleTime closes connections unused this long, so an idle adapter
// holds none (and a server restart leaves few dead ones behind).
const maxIdleTime = 5 * time.Minute

var errPoolClosed = errors.New("the provider is closed")

func newConnPool(maxConns int, connect func(ctx context.Context) (*pgx.Conn, error)) *connPool {
	return &connPool{connect: connect, slots: make(chan struct{}, maxConns)}
}

// acquire returns an idle connection (reused true) or a new one.
func (p *connPool) acquire(ctx context.Context, fresh bool) (conn *pgx.Conn, reused bool, err error) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
	for !fresh {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			<-p.slots
			return nil, false, errPoolClosed
		}
		n := len(p.idle)
		if n == 0 {
			p.mu.Unlock()
			break
		}
		ic := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		if ic.conn.IsClosed() || time.Since(ic.since) > maxIdleTime {
			closeConn(ic.conn)
			continue
		}
		return ic.conn, true, nil
	}
	c, err := p.connect(ctx)
	if err != nil {
		<-p.slots
		return nil, false, err
	}
	return c, false, nil
}

// release gives conn back; reuse false (an error mid-query, a
// transaction left open) closes it.
func (p *connPool) release(conn *pgx.Conn, reuse bool) {
	defer func() { <-p.slots }()
	if reuse && !conn.IsClosed() && conn.PgConn().TxStatus() == 'I' {
		p.mu.Lock()
		if !p.closed {
			p.idle = append(p.idle, idleConn{conn: conn, since: time.Now()})
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
	}
	closeConn(conn)
}

// closeConn closes in the background: a Terminate to a dead server must
// not hold up a reading.
func closeConn(c *pgx.Conn) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = c.Close(ctx)
	}()
}

// close closes the idle connections; those in use close on release.
func (p *connPool) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, ic := range idle {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = ic.conn.Close(ctx)
		cancel()
	}
}
