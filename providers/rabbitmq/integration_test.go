package rabbitmq

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/metricscale/metricscale/providers"

	"github.com/metricscale/metricscale/hack/freeport"
)

// rabbitBin is Debian's rabbitmq-server scripts' directory (the
// /usr/sbin wrappers switch to the rabbitmq user).
const rabbitBin = "/usr/lib/rabbitmq/bin"

// server is a RabbitMQ node of the test's own: free 127.0.0.1 ports, data
// and logs in a temp dir, the management plugin on, statistics every
// 500 ms in 1 s samples (as hack/backends/rabbitmq.go configures).
type server struct {
	t                          *testing.T
	dir                        string
	amqp, mgmt, dist, epmd     int
	cmd                        *exec.Cmd
	waited                     chan struct{}
	monitorUser, monitorSecret string
}

func newServer(t *testing.T) *server {
	t.Helper()
	s := &server{t: t, dir: t.TempDir(), amqp: freeport.For(t), mgmt: freeport.For(t), dist: freeport.For(t), epmd: freeport.For(t),
		monitorUser: "monitor", monitorSecret: "mon-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	files := map[string]string{
		".erlang.cookie":  "METRICSCALETESTCOOKIE",
		"enabled_plugins": "[rabbitmq_management].\n",
		"env.conf":        "",
		"rabbitmq.conf": fmt.Sprintf(`listeners.tcp.1 = 127.0.0.1:%d
management.tcp.ip = 127.0.0.1
management.tcp.port = %d
distribution.listener.interface = 127.0.0.1
distribution.listener.port_range.min = %d
distribution.listener.port_range.max = %d
collect_statistics_interval = 500
log.console = false
`, s.amqp, s.mgmt, s.dist, s.dist),
		"advanced.config": "[{rabbitmq_management_agent, [{sample_retention_policies, [{global, [{605, 1}]}, {basic, [{605, 1}]}, {detailed, [{10, 1}]}]}]}].\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(s.dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(s.dir, ".erlang.cookie"), 0o400); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.stop()
		// the node's own epmd (on the test's port) outlives the node
		kill := exec.Command("epmd", "-kill")
		kill.Env = s.env()
		_ = kill.Run()
	})
	return s
}

func (s *server) env() []string {
	return append(os.Environ(),
		"HOME="+s.dir,
		"RABBITMQ_NODENAME=mstest"+strconv.Itoa(s.amqp)+"@localhost",
		"RABBITMQ_MNESIA_BASE="+filepath.Join(s.dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(s.dir, "log"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(s.dir, "enabled_plugins"),
		"RABBITMQ_CONFIG_FILE="+filepath.Join(s.dir, "rabbitmq.conf"),
		"RABBITMQ_ADVANCED_CONFIG_FILE="+filepath.Join(s.dir, "advanced.config"),
		"RABBITMQ_CONF_ENV_FILE="+filepath.Join(s.dir, "env.conf"),
		"RABBITMQ_PID_FILE="+filepath.Join(s.dir, "rabbitmq.pid"),
		"ERL_EPMD_PORT="+strconv.Itoa(s.epmd),
		"ERL_EPMD_ADDRESS=127.0.0.1",
	)
}

// start runs the node and waits until guest can use the management API.
func (s *server) start() {
	s.t.Helper()
	logf, err := os.OpenFile(filepath.Join(s.dir, "server.out"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		s.t.Fatal(err)
	}
	defer logf.Close()
	s.cmd = exec.Command(filepath.Join(rabbitBin, "rabbitmq-server"))
	s.cmd.Env, s.cmd.Stdout, s.cmd.Stderr = s.env(), logf, logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.waited = make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(s.waited) }()
	deadline := time.Now().Add(90 * time.Second)
	for {
		if err := s.admin(http.MethodGet, "/api/overview", ""); err == nil {
			return
		}
		select {
		case <-s.waited:
			s.t.Fatalf("rabbitmq-server exited while starting; see %s", filepath.Join(s.dir, "server.out"))
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("RabbitMQ did not answer within 90s; see %s", s.dir)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// stop ends the node (SIGTERM to its process group) and waits until its
// ports are closed.
func (s *server) stop() {
	if s.cmd == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-s.waited:
	case <-time.After(60 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.waited
	}
	s.cmd = nil
	for _, p := range []int{s.amqp, s.mgmt} {
		for i := 0; i < 200; i++ {
			c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(p), 100*time.Millisecond)
			if err != nil {
				break
			}
			c.Close()
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// admin calls the management API as guest (allowed from localhost).
func (s *server) admin(method, path, body string) error {
	req, err := http.NewRequest(method, fmt.Sprintf("http://127.0.0.1:%d%s", s.mgmt, path), strings.NewReader(body))
	if err != nil {
		return err
	}
	req.SetBasicAuth("guest", "guest")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	return nil
}

// depth is what rabbitmqctl list_queues reports for queue: ready, unacked.
func (s *server) depth(queue string) (int, int) {
	s.t.Helper()
	cmd := exec.Command(filepath.Join(rabbitBin, "rabbitmqctl"), "-q", "list_queues", "-p", "/", "name", "messages_ready", "messages_unacknowledged")
	cmd.Env = s.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		s.t.Fatalf("rabbitmqctl list_queues: %v: %s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == queue {
			r, err1 := strconv.Atoi(f[1])
			u, err2 := strconv.Atoi(f[2])
			if err1 != nil || err2 != nil {
				s.t.Fatalf("rabbitmqctl printed %q", line)
			}
			return r, u
		}
	}
	s.t.Fatalf("rabbitmqctl list_queues does not list %s:\n%s", queue, out)
	return 0, 0
}

func (s *server) dial() *amqp.Connection {
	s.t.Helper()
	c, err := amqp.Dial(fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", s.amqp))
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// eventually retries f until it succeeds or timeout passes.
func eventually(t *testing.T, what string, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func one(p *Provider, metric string, timeout time.Duration) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	list, err := p.GetExternalMetric(ctx, "default", labels.Everything(), providers.ExternalMetricInfo{Metric: metric})
	if err != nil {
		return 0, err
	}
	if len(list.Items) != 1 {
		return 0, fmt.Errorf("%d items, want 1", len(list.Items))
	}
	return list.Items[0].Value.AsApproximateFloat64(), nil
}

func p99(d []time.Duration) time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[(len(d)*99)/100]
}

// TestIntegration runs the provider against a real RabbitMQ: one node for
// every step, stopped and started again on the same data.
func TestIntegration(t *testing.T) {
	if _, err := os.Stat(filepath.Join(rabbitBin, "rabbitmq-server")); err != nil {
		t.Skipf("RabbitMQ is not installed (%s/rabbitmq-server: %v)", rabbitBin, err)
	}
	if _, err := exec.LookPath("epmd"); err != nil {
		t.Skipf("epmd (Erlang) is not installed: %v", err)
	}
	const queue, n, taken = "jobs", 25, 10
	s := newServer(t)
	pwFile := passwordFile(t, s.monitorSecret)
	options := func(ttl string) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{
			"managementURL": "http://127.0.0.1:%d", "amqpURL": "amqp://127.0.0.1:%d",
			"username": %q, "password": {"file": %q}, "cacheTTL": %q,
			"metrics": [
				{"name": "rabbitmq_jobs_total", "queue": %[6]q},
				{"name": "rabbitmq_jobs_ready", "queue": %[6]q, "measure": "ready"},
				{"name": "rabbitmq_jobs_unacked", "queue": %[6]q, "measure": "unacked"},
				{"name": "rabbitmq_jobs_consumers", "queue": %[6]q, "measure": "consumers"},
				{"name": "rabbitmq_jobs_publish_rate", "queue": %[6]q, "measure": "publishRate"},
				{"name": "rabbitmq_jobs_ready_amqp", "queue": %[6]q, "measure": "ready", "source": "amqp"},
				{"name": "rabbitmq_jobs_consumers_amqp", "queue": %[6]q, "measure": "consumers", "source": "amqp"}
			]}`, s.mgmt, s.amqp, s.monitorUser, pwFile, ttl, queue))
	}
	build := func(ttl string) *Provider {
		p, err := Factory{}.New("rabbit", options(ttl), providers.Deps{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.(*Provider).Close() })
		return p.(*Provider)
	}
	// built while the broker is down: discovery answers, queries fail fast
	p := build("200ms")
	if got := len(p.ListAllExternalMetrics()); got != 7 {
		t.Fatalf("discovery lists %d metrics, want 7", got)
	}
	if _, err := one(p, "rabbitmq_jobs_total", 2*time.Second); providers.ReasonOf(err) != providers.ReasonBackend {
		t.Fatalf("before the broker runs: want a 503, got %v", err)
	}

	start := time.Now()
	s.start()
	t.Logf("RabbitMQ started in %s", time.Since(start).Round(time.Millisecond))
	// the adapter's user: tag monitoring, and access to vhost / with no right on any
	// resource ('^$'), which the passive declare needs
	for _, c := range [][3]string{
		{http.MethodPut, "/api/users/" + s.monitorUser, fmt.Sprintf(`{"password": %q, "tags": "monitoring"}`, s.monitorSecret)},
		{http.MethodPut, "/api/permissions/%2F/" + s.monitorUser, `{"configure": "^$", "write": "^$", "read": "^$"}`},
	} {
		if err := s.admin(c[0], c[1], c[2]); err != nil {
			t.Fatal(err)
		}
	}
	conn := s.dial()
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(queue, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		dc, err := ch.PublishWithDeferredConfirmWithContext(t.Context(), "", queue, true, false,
			amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte(strconv.Itoa(i))})
		if err != nil {
			t.Fatal(err)
		}
		if !dc.Wait() {
			t.Fatal("publish not confirmed")
		}
	}
	want := func(metric string, v float64) func() error {
		return func() error {
			got, err := one(p, metric, 2*time.Second)
			if err != nil {
				return err
			}
			if got != v {
				return fmt.Errorf("%s = %v, want %v", metric, got, v)
			}
			return nil
		}
	}

	t.Run("published", func(t *testing.T) {
		if r, u := s.depth(queue); r != n || u != 0 {
			t.Fatalf("rabbitmqctl: ready %d, unacked %d; want %d, 0", r, u, n)
		}
		// management statistics lag the queue by about a second here
		eventually(t, "total", 15*time.Second, want("rabbitmq_jobs_total", n))
		eventually(t, "ready", 5*time.Second, want("rabbitmq_jobs_ready", n))
		eventually(t, "unacked", 5*time.Second, want("rabbitmq_jobs_unacked", 0))
		// AMQP reads the queue itself: no lag
		eventually(t, "ready over AMQP", 5*time.Second, want("rabbitmq_jobs_ready_amqp", n))
		if _, err := one(p, "rabbitmq_jobs_publish_rate", 2*time.Second); err != nil {
			t.Errorf("publish rate: %v", err)
		}
	})

	t.Run("consumed without ack", func(t *testing.T) {
		cch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		defer cch.Close()
		if err := cch.Qos(taken, 0, false); err != nil {
			t.Fatal(err)
		}
		deliveries, err := cch.Consume(queue, "worker", false, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < taken; i++ {
			select {
			case <-deliveries:
			case <-time.After(10 * time.Second):
				t.Fatalf("got %d deliveries of %d", i, taken)
			}
		}
		eventually(t, "rabbitmqctl sees the unacked", 10*time.Second, func() error {
			if r, u := s.depth(queue); r != n-taken || u != taken {
				return fmt.Errorf("rabbitmqctl: ready %d, unacked %d; want %d, %d", r, u, n-taken, taken)
			}
			return nil
		})
		eventually(t, "unacked", 15*time.Second, want("rabbitmq_jobs_unacked", taken))
		eventually(t, "ready", 5*time.Second, want("rabbitmq_jobs_ready", n-taken))
		eventually(t, "total unchanged", 5*time.Second, want("rabbitmq_jobs_total", n))
		eventually(t, "consumers", 5*time.Second, want("rabbitmq_jobs_consumers", 1))
		// a passive declare counts ready messages only: the work in progress is missing
		eventually(t, "ready over AMQP", 5*time.Second, want("rabbitmq_jobs_ready_amqp", n-taken))
		eventually(t, "consumers over AMQP", 5*time.Second, want("rabbitmq_jobs_consumers_amqp", 1))
	})

	t.Run("one broker call per TTL", func(t *testing.T) {
		warm := build("1h")
		const queries, workers = 1000, 20
		lat := make([]time.Duration, queries)
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := w; i < queries; i += workers {
					t0 := time.Now()
					if _, err := one(warm, "rabbitmq_jobs_total", 5*time.Second); err != nil {
						t.Error(err)
					}
					lat[i] = time.Since(t0)
				}
			}(w)
		}
		wg.Wait()
		if c, b := warm.BackendCalls(), warm.BrokerCalls(); c != 1 || b != 1 {
			t.Errorf("%d queries: %d reads, %d broker calls; want 1 and 1", queries, c, b)
		}
		cold := build("0s")
		var coldLat []time.Duration
		for i := 0; i < 100; i++ {
			t0 := time.Now()
			if _, err := one(cold, "rabbitmq_jobs_total", 5*time.Second); err != nil {
				t.Fatal(err)
			}
			coldLat = append(coldLat, time.Since(t0))
		}
		if b := cold.BrokerCalls(); b != 100 {
			t.Errorf("100 sequential queries without cache: %d broker calls, want 100", b)
		}
		t.Logf("%d queries in one TTL: %d broker call(s); p99 warm %s (%d concurrent), p99 cold %s (management API, sequential)",
			queries, warm.BrokerCalls(), p99(lat), workers, p99(coldLat))
	})

	t.Run("broker down, then back", func(t *testing.T) {
		conn.Close()
		s.stop()
		time.Sleep(300 * time.Millisecond) // past the TTL: no reading left
		for _, m := range []string{"rabbitmq_jobs_total", "rabbitmq_jobs_ready_amqp"} {
			t0 := time.Now()
			_, err := one(p, m, 2*time.Second)
			took := time.Since(t0)
			if err == nil || providers.ReasonOf(err) != providers.ReasonBackend || !strings.Contains(err.Error(), `"rabbit"`) {
				t.Errorf("%s, broker stopped: want a 503 naming the provider, got %v", m, err)
			}
			if took > 3*time.Second {
				t.Errorf("%s, broker stopped: answered after %s, want within the 2s timeout", m, took)
			}
			if err != nil && strings.Contains(err.Error(), s.monitorSecret) {
				t.Errorf("%s: the error shows the password: %v", m, err)
			}
			t.Logf("%s while down (%s): %v", m, took.Round(time.Millisecond), err)
		}
		s.start()
		// the unacked messages went back to ready when the consumer's connection closed
		eventually(t, "values again", 30*time.Second, func() error {
			r, u := s.depth(queue)
			if err := want("rabbitmq_jobs_total", float64(r+u))(); err != nil {
				return err
			}
			return want("rabbitmq_jobs_ready_amqp", float64(r))()
		})
		if r, u := s.depth(queue); r+u != n {
			t.Errorf("after the restart rabbitmqctl counts %d messages, want the %d persistent ones", r+u, n)
		}
	})
}
