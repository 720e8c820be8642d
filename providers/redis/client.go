package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"k8s.io/klog/v2"

	"github.com/metricscale/metricscale/providers/options"
)

// Client is the provider's seam to Redis: what a reading needs, and nothing
// else. redisClient implements it with go-redis; tests fake it.
type Client interface {
	// Scan returns every key of type typ ("list", "stream") matching the
	// glob pattern, iterating SCAN with the COUNT hint; it fails when more
	// than max keys match.
	Scan(ctx context.Context, pattern, typ string, count, max int) ([]string, error)
	// Pipeline sends cmds in one round trip; replies are in cmds' order.
	// A command's own failure (WRONGTYPE, NOPERM) is in its Reply; the error
	// is for the round trip (connection, timeout).
	Pipeline(ctx context.Context, cmds []Command) ([]Reply, error)
	// Close releases the connections.
	Close() error
}

// Op is a read command.
type Op int

// The commands a reading sends.
const (
	OpLLen        Op = iota // LLEN key
	OpXLen                  // XLEN key
	OpXInfoGroups           // XINFO GROUPS key
	OpType                  // TYPE key (the keyspace feed: is a notified key of a pattern's type)
)

func (o Op) String() string {
	switch o {
	case OpLLen:
		return "LLEN"
	case OpXLen:
		return "XLEN"
	case OpXInfoGroups:
		return "XINFO GROUPS"
	case OpType:
		return "TYPE"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Command is one command of a pipeline.
type Command struct {
	Op  Op
	Key string
}

// Reply is one command's answer.
type Reply struct {
	// N is LLEN's or XLEN's answer.
	N int64
	// Type is TYPE's answer ("list", "stream", "none").
	Type string
	// Groups is XINFO GROUPS' answer; NoKey says the stream does not exist.
	Groups []Group
	NoKey  bool
	// Err is the command's own error.
	Err error
}

// Group is one consumer group as XINFO GROUPS reports it.
type Group struct {
	Name string
	// Pending is the size of the group's pending entries list: delivered,
	// not acknowledged.
	Pending int64
	// LastDeliveredID is the ID of the last entry delivered to the group.
	LastDeliveredID string
	// Lag is the entries not yet delivered; nil when Redis reports NULL
	// (it cannot tell) or, before Redis 7, has no such field.
	Lag *int64
	// LagReported says the server sent a lag field at all (Redis 7+).
	LagReported bool
}

// redisClient is Client over go-redis.
type redisClient struct {
	c *goredis.Client
	// trips counts round trips to the server (SCAN calls and pipelines).
	trips atomic.Uint64
}

// klogLogger sends go-redis' own log lines (a failed dial, once per
// attempt) to klog at verbosity 4: the query's error already says it.
type klogLogger struct{}

func (klogLogger) Printf(_ context.Context, format string, v ...any) {
	klog.V(4).InfoS("go-redis", "message", fmt.Sprintf(format, v...))
}

var setLogger sync.Once

// newRedisClient makes a client that connects lazily, on the first read:
// New never blocks on the server. secret reads the password on each dial,
// so a rotated Secret is picked up by new connections.
func newRedisClient(s *settings, field string) (*redisClient, error) {
	setLogger.Do(func() { goredis.SetLogger(klogLogger{}) })
	tlsConfig, err := s.tls.Config(field + ".tls")
	if err != nil {
		return nil, err
	}
	if s.tlsOn && tlsConfig == nil {
		// rediss:// without tls options: verify against the system roots
		tlsConfig, _ = (&options.TLS{}).Config(field + ".tls")
	}
	if tlsConfig != nil && tlsConfig.ServerName == "" {
		tlsConfig.ServerName, _, _ = net.SplitHostPort(s.addr)
	}
	opts := &goredis.Options{
		Addr:     s.addr,
		DB:       s.db,
		Protocol: 3,
		// Reads are bounded by each query's context, not by fixed socket
		// timeouts that could outlast it.
		ContextTimeoutEnabled: true,
		DialTimeout:           5 * time.Second,
		// A down server must fail the query fast; the next reading
		// (a TTL later) tries again.
		MaxRetries:         1,
		DialerRetries:      1,
		DialerRetryTimeout: 50 * time.Millisecond,
		PoolSize:           4,
		TLSConfig:          tlsConfig,
		// No CLIENT SETINFO nor CLIENT MAINT_NOTIFICATIONS on connect: a
		// least-privilege ACL user may not run them.
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
	if s.username != "" || s.password.IsSet() {
		user, secret := s.username, s.password
		opts.CredentialsProviderContext = func(context.Context) (string, string, error) {
			pw, err := secret.Value(field + ".password")
			return user, pw, err
		}
	}
	return &redisClient{c: goredis.NewClient(opts)}, nil
}

func (r *redisClient) Close() error { return r.c.Close() }

func (r *redisClient) Scan(ctx context.Context, pattern, typ string, count, max int) ([]string, error) {
	var keys []string
	seen := map[string]bool{}
	var cursor uint64
	for {
		r.trips.Add(1)
		page, next, err := r.c.ScanType(ctx, cursor, pattern, int64(count), typ).Result()
		if err != nil {
			return nil, fmt.Errorf("SCAN MATCH %q TYPE %s: %w", pattern, typ, err)
		}
		for _, k := range page {
			// SCAN may return a key more than once
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
		if len(keys) > max {
			return nil, fmt.Errorf("SCAN MATCH %q TYPE %s: more than %d keys match (maxKeys): narrow keyPattern", pattern, typ, max)
		}
		if cursor = next; cursor == 0 {
			return keys, nil
		}
	}
}

func (r *redisClient) Pipeline(ctx context.Context, cmds []Command) ([]Reply, error) {
	if len(cmds) == 0 {
		return nil, nil
	}
	r.trips.Add(1)
	pipe := r.c.Pipeline()
	rcmds := make([]goredis.Cmder, len(cmds))
	for i, c := range cmds {
		switch c.Op {
		case OpLLen:
			rcmds[i] = pipe.LLen(ctx, c.Key)
		case OpXLen:
			rcmds[i] = pipe.XLen(ctx, c.Key)
		case OpXInfoGroups:
			// raw, so that a NULL lag and a missing one (Redis 6) are told
			// apart from a real 0
			rcmds[i] = pipe.Do(ctx, "XINFO", "GROUPS", c.Key)
		case OpType:
			rcmds[i] = pipe.Type(ctx, c.Key)
		default:
			return nil, fmt.Errorf("unknown command %v", c.Op)
		}
	}
	_, execErr := pipe.Exec(ctx)
	// Exec returns the first command's error when the server answered
	// every command; any other error (dial, AUTH, timeout) means some were
	// never answered and their zero values must not be read.
	answered := execErr == nil
	for _, rc := range rcmds {
		answered = answered || rc.Err() == execErr //nolint:errorlint // the very same error
	}
	if !answered {
		return nil, fmt.Errorf("pipeline of %d commands: %w", len(cmds), execErr)
	}
	out := make([]Reply, len(cmds))
	for i, c := range cmds {
		cerr := rcmds[i].Err()
		if cerr != nil && !isCommandError(cerr) {
			return nil, fmt.Errorf("pipeline of %d commands: %w", len(cmds), cerr)
		}
		switch c.Op {
		case OpLLen, OpXLen:
			out[i].N, out[i].Err = rcmds[i].(*goredis.IntCmd).Result()
		case OpType:
			out[i].Type, out[i].Err = rcmds[i].(*goredis.StatusCmd).Result()
		case OpXInfoGroups:
			switch {
			case cerr != nil && strings.Contains(cerr.Error(), "no such key"):
				out[i].NoKey = true
			case cerr != nil:
				out[i].Err = cerr
			default:
				out[i].Groups, out[i].Err = parseGroups(rcmds[i].(*goredis.Cmd).Val())
			}
		}
	}
	return out, nil
}

// keyspaceClient is what the keyspace feed needs beyond Client: the
// server's notify-keyspace-events, and a pub/sub connection.
type keyspaceClient interface {
	// ConfigGet returns a config parameter's value.
	ConfigGet(ctx context.Context, name string) (string, error)
	// ConfigSet sets a config parameter.
	ConfigSet(ctx context.Context, name, value string) error
	// Subscriber opens a pub/sub connection (lazily, on its first
	// command) with the client's address and credentials.
	Subscriber(ctx context.Context) subscriber
}

// subscriber is a pub/sub connection; *goredis.PubSub is one. It
// reconnects and subscribes again on its own after a failed receive.
type subscriber interface {
	Subscribe(ctx context.Context, channels ...string) error
	PSubscribe(ctx context.Context, patterns ...string) error
	Unsubscribe(ctx context.Context, channels ...string) error
	PUnsubscribe(ctx context.Context, patterns ...string) error
	ReceiveTimeout(ctx context.Context, timeout time.Duration) (any, error)
	Ping(ctx context.Context, payload ...string) error
	Close() error
}

var _ keyspaceClient = (*redisClient)(nil)

func (r *redisClient) ConfigGet(ctx context.Context, name string) (string, error) {
	m, err := r.c.ConfigGet(ctx, name).Result()
	if err != nil {
		return "", fmt.Errorf("CONFIG GET %s: %w", name, err)
	}
	v, ok := m[name]
	if !ok {
		return "", fmt.Errorf("CONFIG GET %s: the server does not have it", name)
	}
	return v, nil
}

func (r *redisClient) ConfigSet(ctx context.Context, name, value string) error {
	if err := r.c.ConfigSet(ctx, name, value).Err(); err != nil {
		return fmt.Errorf("CONFIG SET %s %s: %w", name, value, err)
	}
	return nil
}

func (r *redisClient) Subscriber(ctx context.Context) subscriber {
	// no channel yet: Subscribe opens the connection
	return r.c.Subscribe(ctx)
}

// isCommandError tells the server's answer to one command (WRONGTYPE,
// NOPERM, ERR no such key) from a failed round trip. Only the server's own
// error counts: go-redis wraps a failed AUTH ("failed to authenticate: %w")
// around one too, and that must fail the read, never read as a 0.
func isCommandError(err error) bool {
	_, ok := err.(goredis.Error) //nolint:errorlint // a wrapped one is not a command's answer
	return ok
}

// parseGroups reads XINFO GROUPS' raw answer: an array of maps (RESP3) or
// of flat field/value arrays (RESP2).
func parseGroups(v any) ([]Group, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("XINFO GROUPS: unexpected answer of type %T", v)
	}
	out := make([]Group, 0, len(arr))
	for i, g := range arr {
		fields := map[string]any{}
		switch g := g.(type) {
		case map[any]any:
			for k, v := range g {
				fields[fmt.Sprint(k)] = v
			}
		case map[string]any:
			fields = g
		case []any:
			for j := 0; j+1 < len(g); j += 2 {
				fields[fmt.Sprint(g[j])] = g[j+1]
			}
		default:
			return nil, fmt.Errorf("XINFO GROUPS: group %d: unexpected answer of type %T", i, g)
		}
		var grp Group
		var err error
		name, ok := fields["name"].(string)
		if !ok {
			return nil, fmt.Errorf("XINFO GROUPS: group %d has no name", i)
		}
		grp.Name = name
		if grp.Pending, err = toInt(fields["pending"]); err != nil {
			return nil, fmt.Errorf("XINFO GROUPS: group %q: pending: %w", name, err)
		}
		grp.LastDeliveredID, _ = fields["last-delivered-id"].(string)
		if lag, ok := fields["lag"]; ok {
			grp.LagReported = true
			if lag != nil {
				n, err := toInt(lag)
				if err != nil {
					return nil, fmt.Errorf("XINFO GROUPS: group %q: lag: %w", name, err)
				}
				grp.Lag = &n
			}
		}
		out = append(out, grp)
	}
	return out, nil
}

func toInt(v any) (int64, error) {
	switch v := v.(type) {
	case int64:
		return v, nil
	case string:
		return strconv.ParseInt(v, 10, 64)
	case nil:
		return 0, errors.New("missing")
	}
	return 0, fmt.Errorf("unexpected value of type %T", v)
}
