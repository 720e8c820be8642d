package backends

// RabbitMQ, Debian's rabbitmq-server on 127.0.0.1: AMQP 15673, management 15674, Erlang
// distribution 25673, and the node's own epmd on 25674 (not the system's 4369), which Stop
// ends with the node. Start writes the config under DIR/rabbitmq (data in mnesia/, logs in
// log/, the Erlang cookie in .erlang.cookie: HOME is DIR/rabbitmq), starts the node
// metricscale@localhost with the management plugin when it does not run, waits until it
// answers (up to 90s), and makes sure of two users, whose passwords it writes once under
// DIR/rabbitmq (mode 0600):
//   - metricscale (DIR/rabbitmq/password): the adapter's, least privilege — tag
//     monitoring (reads the management API) and, on vhost /, permissions '^$' '^$' '^$':
//     access to the vhost for the AMQP passive declare, no right on any resource
//     (providers/rabbitmq/README.md);
//   - metricscale-e2e (DIR/rabbitmq/e2e-password): the tests' and the demo's, every right
//     on vhost / and tag management (it declares the durable queue e2e-jobs at start).
// guest is deleted. Management statistics are collected every 500 ms and kept at 1 s
// granularity (the defaults, 5 s, make counts up to ~10 s old), so the adapter sees a
// publish within about a second.
//
// Environment: METRICSCALE_RABBITMQ_BIN (the scripts' directory, default
// /usr/lib/rabbitmq/bin).

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

//go:embed rabbitmq.yaml
var rabbitmqFragment []byte

const (
	rabbitAMQPPort       = 15673
	rabbitManagementPort = 15674
	rabbitDistPort       = 25673
	rabbitEPMDPort       = 25674
	rabbitNode           = "metricscale@localhost"
	rabbitUser           = "metricscale"
	rabbitE2EUser        = "metricscale-e2e"
	// rabbitQueue is the durable queue rabbitmq.yaml serves as rabbitmq_e2e_jobs_total
	// (ready + unacknowledged).
	rabbitQueue = "e2e-jobs"
	rabbitWait  = 90 * time.Second
)

type rabbitmqBackend struct{}

func init() { register(rabbitmqBackend{}) }

func (rabbitmqBackend) Name() string { return "rabbitmq" }

func rabbitBin(name string) string {
	return filepath.Join(envOr("METRICSCALE_RABBITMQ_BIN", "/usr/lib/rabbitmq/bin"), name)
}

func (rabbitmqBackend) Install(ctx context.Context, cacheRoot string, log io.Writer) error {
	bins := []string{rabbitBin("rabbitmq-server"), rabbitBin("rabbitmqctl")}
	if allExecutable(bins) {
		return nil
	}
	// (its service would take port 5672)
	if err := aptInstall(ctx, "rabbitmq", "rabbitmq-server", cacheRoot, log, bins...); err != nil {
		return err
	}
	fmt.Fprintf(log, "    installed rabbitmq-server %s\n", debianVersion(ctx, "rabbitmq-server"))
	return nil
}

// debianVersion is the installed version of a Debian package, or "(version unknown)".
func debianVersion(ctx context.Context, pkg string) string {
	out, err := run(ctx, nil, nil, "dpkg-query", "-W", "-f=${Version}", pkg)
	if err != nil || len(out) == 0 {
		return "(version unknown)"
	}
	return string(out)
}

// rabbitLayout is where a state folder keeps RabbitMQ's files.
type rabbitLayout struct{ dir, logdir, pidfile, serverLog, password, e2ePassword string }

func rabbitFiles(dir string) rabbitLayout {
	r := filepath.Join(mustAbs(dir), "rabbitmq")
	return rabbitLayout{
		dir: r, logdir: filepath.Join(r, "log"), pidfile: filepath.Join(r, "rabbitmq.pid"),
		serverLog: filepath.Join(r, "log", "server.out"),
		password:  filepath.Join(r, "password"), e2ePassword: filepath.Join(r, "e2e-password"),
	}
}

// env is this node's environment: its config files, data, logs, cookie (HOME) and epmd,
// never /etc/rabbitmq or /var/lib/rabbitmq.
func (l rabbitLayout) env() []string {
	return []string{
		"HOME=" + l.dir,
		"RABBITMQ_NODENAME=" + rabbitNode,
		"RABBITMQ_MNESIA_BASE=" + filepath.Join(l.dir, "mnesia"),
		"RABBITMQ_LOG_BASE=" + l.logdir,
		"RABBITMQ_ENABLED_PLUGINS_FILE=" + filepath.Join(l.dir, "enabled_plugins"),
		"RABBITMQ_CONFIG_FILE=" + filepath.Join(l.dir, "rabbitmq.conf"),
		"RABBITMQ_ADVANCED_CONFIG_FILE=" + filepath.Join(l.dir, "advanced.config"),
		"RABBITMQ_CONF_ENV_FILE=" + filepath.Join(l.dir, "rabbitmq-env.conf"),
		"RABBITMQ_PID_FILE=" + l.pidfile,
		"ERL_EPMD_PORT=" + strconv.Itoa(rabbitEPMDPort),
		"ERL_EPMD_ADDRESS=127.0.0.1",
	}
}

// ctl runs rabbitmqctl against this node; stdin, when not nil, is its input.
func (l rabbitLayout) ctl(ctx context.Context, stdin io.Reader, args ...string) ([]byte, error) {
	return run(ctx, l.env(), stdin, rabbitBin("rabbitmqctl"), args...)
}

func (l rabbitLayout) running() (int, bool) { return pidfilePID(l.pidfile, "beam") }

func rabbitAnswers() bool { return portOpen(rabbitAMQPPort) && portOpen(rabbitManagementPort) }

func (l rabbitLayout) writeConfig() error {
	if err := os.MkdirAll(filepath.Join(l.dir, "mnesia"), 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(l.logdir, 0o755); err != nil {
		return err
	}
	if err := os.Chmod(l.dir, 0o700); err != nil {
		return err
	}
	for _, f := range []string{l.password, l.e2ePassword} {
		if err := newPassword(f, 24); err != nil {
			return err
		}
	}
	cookie := filepath.Join(l.dir, ".erlang.cookie")
	if st, err := os.Stat(cookie); err != nil || st.Size() == 0 {
		_ = os.Remove(cookie)
		if err := os.WriteFile(cookie, []byte(randomString("ABCDEFGHIJKLMNOPQRSTUVWXYZ", 20)), 0o400); err != nil {
			return err
		}
	}
	conf := fmt.Sprintf(`# written by metricscale hack/backends (rabbitmq) at start
listeners.tcp.1 = 127.0.0.1:%d
management.tcp.ip = 127.0.0.1
management.tcp.port = %d
distribution.listener.interface = 127.0.0.1
distribution.listener.port_range.min = %d
distribution.listener.port_range.max = %d
# counts reach the management API within about a second (default 5000)
collect_statistics_interval = 500
log.console = false
log.file.level = info
`, rabbitAMQPPort, rabbitManagementPort, rabbitDistPort, rabbitDistPort)
	// 1 s samples instead of 5 s: the API's counts are the latest sample
	const advanced = `[{rabbitmq_management_agent, [{sample_retention_policies,
   [{global, [{605, 1}]}, {basic, [{605, 1}]}, {detailed, [{10, 1}]}]}]}].
`
	for name, content := range map[string]string{
		"enabled_plugins":   "[rabbitmq_management].\n",
		"rabbitmq-env.conf": "",
		"rabbitmq.conf":     conf,
		"advanced.config":   advanced,
	} {
		if err := os.WriteFile(filepath.Join(l.dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// ensureUser creates or updates a user, the password through stdin, never on a command line.
func (l rabbitLayout) ensureUser(ctx context.Context, name, passwordFile, tags, conf, write, read string) error {
	pw, err := os.ReadFile(passwordFile)
	if err != nil {
		return err
	}
	users, err := l.ctl(ctx, nil, "-q", "list_users")
	if err != nil {
		return err
	}
	verb := "add_user"
	for _, line := range strings.Split(string(users), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == name {
			verb = "change_password"
		}
	}
	steps := [][]string{{"-q", verb, name}, {"-q", "set_user_tags", name, tags}, {"-q", "set_permissions", "-p", "/", name, conf, write, read}}
	for i, args := range steps {
		var stdin io.Reader
		if i == 0 {
			stdin = bytes.NewReader(pw)
		}
		if _, err := l.ctl(ctx, stdin, args...); err != nil {
			return fmt.Errorf("rabbitmq user %s: %w", name, err)
		}
	}
	return nil
}

// declareQueue declares the durable e2e queue through the management API as the e2e user,
// so the metric has a series (0) before the first publish.
func (l rabbitLayout) declareQueue(ctx context.Context) error {
	pw, err := os.ReadFile(l.e2ePassword)
	if err != nil {
		return err
	}
	u := fmt.Sprintf("http://127.0.0.1:%d/api/queues/%%2F/%s", rabbitManagementPort, rabbitQueue)
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, u, strings.NewReader(`{"durable":true}`))
	if err != nil {
		return err
	}
	req.SetBasicAuth(rabbitE2EUser, strings.TrimSpace(string(pw)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("declaring queue %s: %w", rabbitQueue, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("declaring queue %s: %s %s", rabbitQueue, resp.Status, bytes.TrimSpace(body))
	}
	return nil
}

func (rabbitmqBackend) Start(ctx context.Context, dir string, log io.Writer) error {
	if _, err := absDir(dir); err != nil {
		return err
	}
	l := rabbitFiles(dir)
	if err := needBins("rabbitmq", rabbitBin("rabbitmq-server"), rabbitBin("rabbitmqctl")); err != nil {
		return err
	}
	if pid, ok := l.running(); ok && rabbitAnswers() {
		fmt.Fprintf(log, "    RabbitMQ already runs on 127.0.0.1:%d (management %d, pid %d, data %s)\n", rabbitAMQPPort, rabbitManagementPort, pid, l.dir)
		return nil
	}
	fresh := false
	var d *daemon
	if _, ok := l.running(); !ok {
		if err := portsFree("RabbitMQ in "+l.dir, rabbitAMQPPort, rabbitManagementPort, rabbitDistPort); err != nil {
			return err
		}
		_, err := os.Stat(filepath.Join(l.dir, "mnesia", rabbitNode))
		fresh = err != nil
		if err := l.writeConfig(); err != nil {
			return fmt.Errorf("rabbitmq: writing its config in %s: %w", l.dir, err)
		}
		_ = os.Remove(l.pidfile)
		if d, err = startDaemon(l.env(), "", l.serverLog, rabbitBin("rabbitmq-server")); err != nil {
			return fmt.Errorf("rabbitmq: %w", err)
		}
	}
	wait := waitUntil(ctx, rabbitWait, rabbitAnswers)
	if d != nil {
		wait = waitStarted(ctx, d, rabbitWait, rabbitAnswers)
	}
	if wait == nil {
		_, wait = l.ctl(ctx, nil, "-q", "await_startup", "--timeout", "30")
	}
	if wait != nil {
		return fmt.Errorf("rabbitmq on 127.0.0.1:%d does not answer after %s (logs: %s): %w\n%s", rabbitAMQPPort, rabbitWait, l.logdir, wait, tail(l.serverLog, 20))
	}
	if err := l.ensureUser(ctx, rabbitUser, l.password, "monitoring", "^$", "^$", "^$"); err != nil {
		return err
	}
	if err := l.ensureUser(ctx, rabbitE2EUser, l.e2ePassword, "management", ".*", ".*", ".*"); err != nil {
		return err
	}
	if fresh {
		_, _ = l.ctl(ctx, nil, "-q", "delete_user", "guest")
	}
	if err := l.declareQueue(ctx); err != nil {
		return fmt.Errorf("rabbitmq: %w", err)
	}
	pid, _ := l.running()
	fmt.Fprintf(log, "    RabbitMQ %s on 127.0.0.1:%d (management %d), pid %d (data %s)\n", debianVersion(ctx, "rabbitmq-server"), rabbitAMQPPort, rabbitManagementPort, pid, l.dir)
	return nil
}

func (rabbitmqBackend) Stop(ctx context.Context, dir string) error {
	if _, err := absDir(dir); err != nil {
		return err
	}
	l := rabbitFiles(dir)
	if pid, ok := l.running(); ok {
		// rabbitmqctl stop is the clean way; a signal is the fallback when the node does not answer.
		if _, err := l.ctl(ctx, nil, "-q", "stop"); err != nil {
			signalTerm(pid)
		}
	}
	if err := waitPortsClosed(ctx, rabbitWait, rabbitAMQPPort, rabbitManagementPort, rabbitDistPort); err != nil {
		return fmt.Errorf("ports of RabbitMQ in %s still open %s after stopping it (logs: %s): %w", l.dir, rabbitWait, l.logdir, err)
	}
	_ = os.Remove(l.pidfile)
	// the node's own epmd (its port is ours): it would outlive the node
	if portOpen(rabbitEPMDPort) {
		_, _ = run(ctx, []string{"ERL_EPMD_PORT=" + strconv.Itoa(rabbitEPMDPort)}, nil, "epmd", "-kill")
	}
	return nil
}

func (rabbitmqBackend) Healthy(ctx context.Context, dir string) error {
	l := rabbitFiles(dir)
	if _, ok := l.running(); !ok {
		return fmt.Errorf("the RabbitMQ node of %s does not run", l.dir)
	}
	if !rabbitAnswers() {
		return fmt.Errorf("rabbitmq does not listen on 127.0.0.1:%d and %d", rabbitAMQPPort, rabbitManagementPort)
	}
	return nil
}

func (rabbitmqBackend) Env(dir string) map[string]string {
	l := rabbitFiles(dir)
	return map[string]string{
		"METRICSCALE_RABBITMQ_AMQP_URL":          fmt.Sprintf("amqp://127.0.0.1:%d", rabbitAMQPPort),
		"METRICSCALE_RABBITMQ_MANAGEMENT_URL":    fmt.Sprintf("http://127.0.0.1:%d", rabbitManagementPort),
		"METRICSCALE_RABBITMQ_USER":              rabbitUser,
		"METRICSCALE_RABBITMQ_PASSWORD_FILE":     l.password,
		"METRICSCALE_RABBITMQ_E2E_USER":          rabbitE2EUser,
		"METRICSCALE_RABBITMQ_E2E_PASSWORD_FILE": l.e2ePassword,
		"METRICSCALE_RABBITMQ_DIR":               l.dir,
	}
}

func (rabbitmqBackend) AdapterConfig(dir string) ([]byte, error) {
	return adapterConfig(rabbitmqFragment, dir)
}

func (rabbitmqBackend) Queue() QueueInfo {
	return QueueInfo{Metric: "rabbitmq_e2e_jobs_total", Selector: map[string]string{"queue": rabbitQueue}}
}

type rabbitmqQueue struct {
	conn *amqp.Connection
	ch   *amqp.Channel
	dir  string // DIR/rabbitmq, for rabbitmqctl
}

// OpenQueue connects as the e2e user (the adapter's own has no right on any queue) and
// declares the queue as Start does.
func (rabbitmqBackend) OpenQueue(ctx context.Context, env map[string]string) (Queue, error) {
	amqpURL, err := need(env, "METRICSCALE_RABBITMQ_AMQP_URL")
	if err != nil {
		return nil, fmt.Errorf("rabbitmq: %w", err)
	}
	dir, err := need(env, "METRICSCALE_RABBITMQ_DIR")
	if err != nil {
		return nil, fmt.Errorf("rabbitmq: %w", err)
	}
	pw, err := readSecret(env, "METRICSCALE_RABBITMQ_E2E_PASSWORD_FILE")
	if err != nil {
		return nil, fmt.Errorf("rabbitmq: %w", err)
	}
	u, err := url.Parse(amqpURL)
	if err != nil {
		return nil, fmt.Errorf("rabbitmq: METRICSCALE_RABBITMQ_AMQP_URL: %w", err)
	}
	u.User = url.UserPassword(env["METRICSCALE_RABBITMQ_E2E_USER"], pw)
	conn, err := amqp.Dial(u.String())
	if err != nil {
		// amqp091's errors do not carry the URL
		return nil, fmt.Errorf("rabbitmq: connecting to %s: %w", amqpURL, err)
	}
	ch, err := conn.Channel()
	if err == nil {
		_, err = ch.QueueDeclare(rabbitQueue, true, false, false, false, nil)
	}
	if err == nil {
		// confirms: a published job is in the queue when Publish returns
		err = ch.Confirm(false)
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("rabbitmq: queue %s: %w", rabbitQueue, err)
	}
	return &rabbitmqQueue{conn: conn, ch: ch, dir: dir}, nil
}

func (q *rabbitmqQueue) Publish(ctx context.Context, n int) error {
	confirms := make([]*amqp.DeferredConfirmation, 0, n)
	for i := range n {
		dc, err := q.ch.PublishWithDeferredConfirmWithContext(ctx, "", rabbitQueue, true, false, amqp.Publishing{
			DeliveryMode: amqp.Persistent, ContentType: "text/plain", Body: []byte("job-" + strconv.Itoa(i)),
		})
		if err != nil {
			return fmt.Errorf("rabbitmq: publishing to %s (%d of %d): %w", rabbitQueue, i+1, n, err)
		}
		confirms = append(confirms, dc)
	}
	for i, dc := range confirms {
		if ok, err := dc.WaitContext(ctx); err != nil || !ok {
			return fmt.Errorf("rabbitmq: publishing to %s (%d of %d): not confirmed (%v)", rabbitQueue, i+1, n, err)
		}
	}
	return nil
}

// Consume is basic.get and ack, one job at a time, as a polling worker does.
func (q *rabbitmqQueue) Consume(ctx context.Context, n int) (int, error) {
	for i := range n {
		m, ok, err := q.ch.Get(rabbitQueue, false)
		if err != nil {
			return i, fmt.Errorf("rabbitmq: basic.get from %s: %w", rabbitQueue, err)
		}
		if !ok {
			return i, nil // empty
		}
		if err := m.Ack(false); err != nil {
			return i, fmt.Errorf("rabbitmq: ack on %s: %w", rabbitQueue, err)
		}
	}
	return n, nil
}

// Depth is rabbitmqctl list_queues' ready + unacknowledged, as the metric counts: the
// queue itself, not the management statistics the adapter reads.
func (q *rabbitmqQueue) Depth(ctx context.Context) (int, error) {
	out, err := rabbitFiles(filepath.Dir(q.dir)).ctl(ctx, nil, "-q", "list_queues", "-p", "/", "name", "messages_ready", "messages_unacknowledged")
	if err != nil {
		return 0, fmt.Errorf("rabbitmq: %w", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != rabbitQueue {
			continue
		}
		ready, err1 := strconv.Atoi(f[1])
		unacked, err2 := strconv.Atoi(f[2])
		if err1 != nil || err2 != nil {
			return 0, fmt.Errorf("rabbitmq: rabbitmqctl list_queues printed %q", line)
		}
		return ready + unacked, nil
	}
	return 0, fmt.Errorf("rabbitmq: rabbitmqctl list_queues does not list %s:\n%s", rabbitQueue, out)
}

// Drain purges the ready messages; unacknowledged ones go when their consumers ack or leave.
func (q *rabbitmqQueue) Drain(ctx context.Context) error {
	if _, err := q.ch.QueuePurge(rabbitQueue, false); err != nil {
		return fmt.Errorf("rabbitmq: purging %s: %w", rabbitQueue, err)
	}
	return nil
}

func (q *rabbitmqQueue) Close() error { return q.conn.Close() }
