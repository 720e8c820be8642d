package ondemand

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Loader caches one value (or error) per key for a TTL and runs at most one
// load per key at a time: callers that arrive during a load wait for it.
// Backends use it to share one broker call between metrics that read the
// same thing (one queue listing serving its ready, unacked and consumer counts).
type Loader[T any] struct {
	ttl     time.Duration
	timeout time.Duration
	clock   clock.PassiveClock

	mu      sync.Mutex
	entries map[string]*entry[T]
}

type entry[T any] struct {
	done    chan struct{} // closed when the load ended
	val     T
	err     error
	started time.Time // when the load began: the value is at least this fresh
	expires time.Time
}

// maxAgeKey carries WithMaxAge's bound in a context.
type maxAgeKey struct{}

// WithMaxAge asks every Loader that serves a Get under ctx (and under the
// loads it starts, which keep ctx's values) for a value whose load began at
// most d ago: an older cached value is loaded again, a load in progress is
// joined. The change feed's poll reads under it, so that a reading cached
// for queries (and a backend's own shared reads) do not hide a change for a
// whole TTL, while a reading made by a query within d serves the poll.
func WithMaxAge(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, maxAgeKey{}, d)
}

// MaxAge is WithMaxAge's bound in ctx, if any: a provider with a cache of
// its own honours it as a Loader does.
func MaxAge(ctx context.Context) (time.Duration, bool) {
	d, ok := ctx.Value(maxAgeKey{}).(time.Duration)
	return d, ok
}

// NewLoader returns a loader caching for ttl (0: no cache, coalescing only);
// a load whose first caller has no deadline is bounded by timeout (0: 10s).
func NewLoader[T any](ttl, timeout time.Duration, clk clock.PassiveClock) *Loader[T] {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	return &Loader[T]{ttl: ttl, timeout: timeout, clock: clk, entries: map[string]*entry[T]{}}
}

// Get returns key's cached value, joins a load in progress, or starts one.
// The load runs detached from the caller's cancellation (a caller that
// gives up must not fail the others) but keeps its deadline, so it ends
// soon after the slowest caller would have stopped waiting.
func (l *Loader[T]) Get(ctx context.Context, key string, load func(context.Context) (T, error)) (T, error) {
	return l.GetTTL(ctx, key, l.ttl, load)
}

// GetTTL is Get with the TTL of this key's next load.
func (l *Loader[T]) GetTTL(ctx context.Context, key string, ttl time.Duration, load func(context.Context) (T, error)) (T, error) {
	maxAge, bounded := MaxAge(ctx)
	l.mu.Lock()
	now := l.clock.Now()
	e := l.entries[key]
	if e != nil {
		select {
		case <-e.done:
			if !now.Before(e.expires) || bounded && now.Sub(e.started) > maxAge {
				e = nil
			}
		default: // a load is running: join it
		}
	}
	if e == nil {
		e = &entry[T]{done: make(chan struct{}), started: now}
		l.entries[key] = e
		lctx, cancel := l.loadContext(ctx)
		go func() {
			defer cancel()
			v, err := load(lctx)
			l.mu.Lock()
			e.val, e.err = v, err
			e.expires = l.clock.Now().Add(ttl)
			if ttl <= 0 && l.entries[key] == e {
				delete(l.entries, key)
			}
			l.mu.Unlock()
			close(e.done)
		}()
	}
	l.mu.Unlock()
	select {
	case <-e.done:
		return e.val, e.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

func (l *Loader[T]) loadContext(ctx context.Context) (context.Context, context.CancelFunc) {
	detached := context.WithoutCancel(ctx)
	if dl, ok := ctx.Deadline(); ok {
		return context.WithDeadline(detached, dl)
	}
	return context.WithTimeout(detached, l.timeout)
}

// Forget drops key's cached value, so the next Get loads.
func (l *Loader[T]) Forget(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.entries[key]; e != nil {
		select {
		case <-e.done:
			delete(l.entries, key)
		default:
		}
	}
}

// Put stores v as key's value for ttl, as if a load had just returned it;
// a load in progress is not waited for and its result does not replace v.
// ttl 0: nothing is cached (a completed value is dropped).
func (l *Loader[T]) Put(key string, v T, ttl time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ttl <= 0 {
		if e := l.entries[key]; e != nil {
			select {
			case <-e.done:
				delete(l.entries, key)
			default:
			}
		}
		return
	}
	now := l.clock.Now()
	done := make(chan struct{})
	close(done)
	l.entries[key] = &entry[T]{done: done, val: v, started: now, expires: now.Add(ttl)}
}
