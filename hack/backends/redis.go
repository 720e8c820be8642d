package backends

// Redis, Debian's redis-server on 127.0.0.1:16379 (and on the pod address too when
// SetPodAddress set one for DIR: then Env names that address), data and logs in DIR/redis. Start writes
// DIR/redis/redis.conf, starts the server when it does not run, and waits until it
// answers. Two ACL users, whose passwords it writes once under DIR/redis (mode 0600; the
// config holds only their SHA-256):
//   - metricscale (DIR/redis/password): the adapter's, least privilege — read-only access
//     to keys (%R~*), no channels, only LLEN, XLEN, XINFO GROUPS and SCAN
//     (providers/redis/README.md);
//   - default (DIR/redis/admin-password): the tests' and the demo's, every command.
// The data is saved when the server stops (SHUTDOWN saves: `save` is configured), so a
// stop/start keeps the queues.
//
// Environment: METRICSCALE_REDIS_SERVER (default /usr/bin/redis-server) and
// METRICSCALE_REDIS_CLI (default /usr/bin/redis-cli).

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

//go:embed redis.yaml
var redisFragment []byte

const (
	redisPort = 16379
	redisUser = "metricscale"
	// The adapter's rights; keep in step with providers/redis/README.md. With those of
	// feed: keyspace (README "Permissions on the server"): the keyspace channels of
	// redis.yaml's keys, and the pattern make bench-keda's keyPattern subscribes to
	// (PSUBSCRIBE patterns are checked literally).
	redisUserRules = "resetkeys %R~* resetchannels &__keyspace@0__:e2e-jobs &__keyspace@0__:e2e-events &__keyspace@0__:kedabench-ours-* " +
		"-@all +llen +xlen +xinfo|groups +scan +type +subscribe +psubscribe +unsubscribe +punsubscribe +ping +config|get"
	redisWait = 60 * time.Second
	// redisKey is the list redis.yaml serves as redis_e2e_jobs_length.
	redisKey = "e2e-jobs"
)

type redisBackend struct{}

func init() { register(redisBackend{}) }

func (redisBackend) Name() string { return "redis" }

func redisServerBin() string { return envOr("METRICSCALE_REDIS_SERVER", "/usr/bin/redis-server") }
func redisCLIBin() string    { return envOr("METRICSCALE_REDIS_CLI", "/usr/bin/redis-cli") }

func (redisBackend) Install(ctx context.Context, cacheRoot string, log io.Writer) error {
	server, cli := redisServerBin(), redisCLIBin()
	if allExecutable([]string{server, cli}) {
		return nil
	}
	// (its service would take port 6379)
	if err := aptInstall(ctx, "redis", "redis-server", cacheRoot, log, server, cli); err != nil {
		return err
	}
	out, _ := run(ctx, nil, nil, server, "--version")
	fmt.Fprintf(log, "    installed %s\n", strings.TrimSpace(string(out)))
	return nil
}

// redisLayout is where a state folder keeps Redis' files.
type redisLayout struct{ dir, data, conf, pidfile, logfile, password, adminPassword string }

func redisFiles(dir string) redisLayout {
	r := filepath.Join(mustAbs(dir), "redis")
	return redisLayout{
		dir: r, data: filepath.Join(r, "data"), conf: filepath.Join(r, "redis.conf"),
		pidfile: filepath.Join(r, "redis.pid"), logfile: filepath.Join(r, "redis.log"),
		password: filepath.Join(r, "password"), adminPassword: filepath.Join(r, "admin-password"),
	}
}

// admin is a client as the default (admin) user.
func (l redisLayout) admin() (*goredis.Client, error) {
	pw, err := os.ReadFile(l.adminPassword)
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	return goredis.NewClient(&goredis.Options{
		Addr: redisAddr(), Password: strings.TrimSpace(string(pw)),
		DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, MaxRetries: -1,
	}), nil
}

func redisAddr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(redisPort)) }

func (l redisLayout) running() (int, bool) { return pidfilePID(l.pidfile, "redis-server") }

func (l redisLayout) answers(ctx context.Context) bool {
	c, err := l.admin()
	if err != nil {
		return false
	}
	defer c.Close()
	return c.Ping(ctx).Val() == "PONG"
}

// redisBind is the server's bind list for dir: 127.0.0.1, and the pod address when set.
func redisBind(dir string) string {
	if a := PodAddress(dir); a.IsValid() {
		return "127.0.0.1 " + a.String()
	}
	return "127.0.0.1"
}

func (l redisLayout) writeConfig(bind string) error {
	if err := os.MkdirAll(l.data, 0o755); err != nil {
		return err
	}
	for _, f := range []string{l.password, l.adminPassword} {
		if err := newPassword(f, 24); err != nil {
			return err
		}
	}
	userHash, err := sha256File(l.password)
	if err != nil {
		return err
	}
	adminHash, err := sha256File(l.adminPassword)
	if err != nil {
		return err
	}
	conf := fmt.Sprintf(`# written by metricscale hack/backends (redis) at start
bind %s
port %d
protected-mode yes
daemonize yes
pidfile %q
logfile %q
dir %q
# SHUTDOWN (stop) saves, so the queues survive an outage
save 60 1
appendonly no
maxmemory 256mb
# keyspace notifications for generic, list and stream commands (the redis provider's feed: keyspace)
notify-keyspace-events Kglt
user default on #%s ~* &* +@all
user %s on #%s %s
`, bind, redisPort, l.pidfile, l.logfile, l.data, adminHash, redisUser, userHash, redisUserRules)
	return writeFileAtomic(l.conf, []byte(conf), 0o600)
}

// sha256File is the hex SHA-256 of a password file's content (trimmed, as read).
func sha256File(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(string(b))))
	return hex.EncodeToString(sum[:]), nil
}

func (redisBackend) Start(ctx context.Context, dir string, log io.Writer) error {
	if _, err := absDir(dir); err != nil {
		return err
	}
	l := redisFiles(dir)
	if err := needBins("redis", redisServerBin(), redisCLIBin()); err != nil {
		return err
	}
	bind := redisBind(dir)
	pid, running := l.running()
	if running && l.answers(ctx) {
		if err := l.rebind(ctx, bind); err != nil {
			return err
		}
		fmt.Fprintf(log, "    Redis already runs on %s port %d (pid %d, data %s)\n", bind, redisPort, pid, l.data)
		return nil
	}
	if !running {
		if err := portsFree("Redis in "+l.dir, redisPort); err != nil {
			return err
		}
		if err := l.writeConfig(bind); err != nil {
			return fmt.Errorf("redis: writing %s: %w", l.conf, err)
		}
		_ = os.Remove(l.pidfile)
		// daemonize yes: it returns once the server forked
		if _, err := run(ctx, nil, nil, redisServerBin(), l.conf); err != nil {
			return fmt.Errorf("redis-server did not start (log: %s): %w\n%s", l.logfile, err, tail(l.logfile, 20))
		}
	}
	if err := waitUntil(ctx, redisWait, func() bool { return l.answers(ctx) }); err != nil {
		return fmt.Errorf("redis on %s does not answer after %s (log: %s): %w\n%s", redisAddr(), redisWait, l.logfile, err, tail(l.logfile, 20))
	}
	pid, _ = l.running()
	version, _ := run(ctx, nil, nil, redisServerBin(), "--version")
	v := ""
	if f := strings.Fields(string(version)); len(f) > 2 {
		v = strings.TrimPrefix(f[2], "v=") + " "
	}
	fmt.Fprintf(log, "    Redis %son %s port %d, pid %d (data %s)\n", v, bind, redisPort, pid, l.data)
	return nil
}

// rebind makes a running server listen on bind (SetPodAddress changed since it started):
// CONFIG SET bind, and the config file for its next start.
func (l redisLayout) rebind(ctx context.Context, bind string) error {
	c, err := l.admin()
	if err != nil {
		return err
	}
	defer c.Close()
	got, err := c.ConfigGet(ctx, "bind").Result()
	if err != nil {
		return fmt.Errorf("redis: CONFIG GET bind: %w", err)
	}
	if strings.Join(strings.Fields(got["bind"]), " ") == bind {
		return nil
	}
	if err := l.writeConfig(bind); err != nil {
		return fmt.Errorf("redis: writing %s: %w", l.conf, err)
	}
	if err := c.ConfigSet(ctx, "bind", bind).Err(); err != nil {
		return fmt.Errorf("redis: CONFIG SET bind %q: %w", bind, err)
	}
	return nil
}

func (redisBackend) Stop(ctx context.Context, dir string) error {
	if _, err := absDir(dir); err != nil {
		return err
	}
	l := redisFiles(dir)
	if pid, ok := l.running(); ok {
		// SHUTDOWN saves the data; a signal is the fallback when the server does not answer.
		if c, err := l.admin(); err == nil {
			err = c.Shutdown(ctx).Err()
			c.Close()
			if err != nil && portOpen(redisPort) {
				signalTerm(pid)
			}
		} else {
			signalTerm(pid)
		}
	}
	if err := waitPortsClosed(ctx, redisWait, redisPort); err != nil {
		return fmt.Errorf("port %d is still open %s after stopping Redis in %s (log: %s): %w", redisPort, redisWait, l.dir, l.logfile, err)
	}
	_ = os.Remove(l.pidfile)
	return nil
}

func (redisBackend) Healthy(ctx context.Context, dir string) error {
	l := redisFiles(dir)
	if _, ok := l.running(); !ok {
		return fmt.Errorf("redis-server of %s does not run", l.dir)
	}
	if !l.answers(ctx) {
		return fmt.Errorf("redis on %s does not answer PING", redisAddr())
	}
	return nil
}

// Env names the pod address when one is set: the server listens there too, and pods
// reach only that one.
func (redisBackend) Env(dir string) map[string]string {
	l := redisFiles(dir)
	addr := redisAddr()
	if a := PodAddress(dir); a.IsValid() {
		addr = net.JoinHostPort(a.String(), strconv.Itoa(redisPort))
	}
	return map[string]string{
		"METRICSCALE_REDIS_ADDR":                addr,
		"METRICSCALE_REDIS_USER":                redisUser,
		"METRICSCALE_REDIS_PASSWORD_FILE":       l.password,
		"METRICSCALE_REDIS_ADMIN_PASSWORD_FILE": l.adminPassword,
		"METRICSCALE_REDIS_CLI":                 redisCLIBin(),
	}
}

func (redisBackend) AdapterConfig(dir string) ([]byte, error) {
	return adapterConfig(redisFragment, dir)
}

func (redisBackend) Queue() QueueInfo {
	return QueueInfo{Metric: "redis_e2e_jobs_length", Selector: map[string]string{"key": redisKey}}
}

// QueueNameVar: a worker may consume a list of its own (see NamedQueues).
func (redisBackend) QueueNameVar() string { return "METRICSCALE_REDIS_QUEUE" }

// redisQueue is a list, e2e-jobs unless METRICSCALE_REDIS_QUEUE names another: producers
// RPUSH, workers LPOP from the other end.
type redisQueue struct {
	c   *goredis.Client
	env map[string]string
	key string
}

// OpenQueue connects as the default user: the adapter's own may only read.
// METRICSCALE_REDIS_QUEUE in env, when set, names the list instead of e2e-jobs (a
// worker Deployment of its own; the adapter config serves only e2e-jobs).
func (redisBackend) OpenQueue(ctx context.Context, env map[string]string) (Queue, error) {
	addr, err := need(env, "METRICSCALE_REDIS_ADDR")
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	pw, err := readSecret(env, "METRICSCALE_REDIS_ADMIN_PASSWORD_FILE")
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	c := goredis.NewClient(&goredis.Options{Addr: addr, Password: pw})
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		return nil, fmt.Errorf("redis: connecting to %s: %w", addr, err)
	}
	key := env["METRICSCALE_REDIS_QUEUE"]
	if key == "" {
		key = redisKey
	}
	return &redisQueue{c: c, env: env, key: key}, nil
}

func (q *redisQueue) Publish(ctx context.Context, n int) error {
	if n <= 0 {
		return nil
	}
	jobs := make([]any, n)
	for i := range jobs {
		jobs[i] = "job-" + strconv.Itoa(i)
	}
	if err := q.c.RPush(ctx, q.key, jobs...).Err(); err != nil {
		return fmt.Errorf("redis: RPUSH %s (%d jobs): %w", q.key, n, err)
	}
	return nil
}

func (q *redisQueue) Consume(ctx context.Context, n int) (int, error) {
	if n <= 0 {
		return 0, nil
	}
	got, err := q.c.LPopCount(ctx, q.key, n).Result()
	if errors.Is(err, goredis.Nil) {
		return 0, nil // empty
	}
	if err != nil {
		return 0, fmt.Errorf("redis: LPOP %s: %w", q.key, err)
	}
	return len(got), nil
}

// Depth is redis-cli's LLEN as the adapter's own user sees it.
func (q *redisQueue) Depth(ctx context.Context) (int, error) {
	host, port, err := net.SplitHostPort(q.env["METRICSCALE_REDIS_ADDR"])
	if err != nil {
		return 0, fmt.Errorf("redis: METRICSCALE_REDIS_ADDR: %w", err)
	}
	pw, err := readSecret(q.env, "METRICSCALE_REDIS_PASSWORD_FILE")
	if err != nil {
		return 0, fmt.Errorf("redis: %w", err)
	}
	// the password through the environment, not the command line
	out, err := run(ctx, []string{"REDISCLI_AUTH=" + pw}, nil, q.env["METRICSCALE_REDIS_CLI"],
		"-h", host, "-p", port, "--user", q.env["METRICSCALE_REDIS_USER"], "LLEN", q.key)
	if err != nil {
		return 0, fmt.Errorf("redis: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		return 0, fmt.Errorf("redis: redis-cli LLEN %s printed %q", q.key, out)
	}
	return n, nil
}

// Drain deletes the list: Redis deletes an empty list, and LLEN of a missing one is 0.
func (q *redisQueue) Drain(ctx context.Context) error {
	if err := q.c.Del(ctx, q.key).Err(); err != nil {
		return fmt.Errorf("redis: DEL %s: %w", q.key, err)
	}
	return nil
}

func (q *redisQueue) Close() error { return q.c.Close() }
