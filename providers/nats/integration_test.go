package nats

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/labels"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/metricscale/metricscale/providers"

	"github.com/metricscale/metricscale/hack/freeport"
)

// natsServer is a real nats-server with JetStream, started by the test.
type natsServer struct {
	bin, dir   string
	port, mon  int
	cmd        *exec.Cmd
	exited     chan struct{}
	logFile    string
	monitorURL string
}

func serverBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("nats-server"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/nats-server"); err == nil {
		return "/usr/sbin/nats-server"
	}
	t.Skip("nats-server is not installed (Debian package nats-server; hack/cluster.sh install-backends)")
	return ""
}

func startNATS(t *testing.T) *natsServer {
	t.Helper()
	s := &natsServer{bin: serverBinary(t), dir: t.TempDir(), port: freeport.For(t), mon: freeport.For(t)}
	s.logFile = filepath.Join(s.dir, "nats.log")
	s.monitorURL = fmt.Sprintf("http://127.0.0.1:%d", s.mon)
	s.start(t)
	t.Cleanup(func() { s.stop(t) })
	return s
}

func (s *natsServer) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.port) }

func (s *natsServer) start(t *testing.T) {
	t.Helper()
	s.cmd = exec.Command(s.bin, "-a", "127.0.0.1", "-p", strconv.Itoa(s.port), "-m", strconv.Itoa(s.mon),
		"-js", "-sd", filepath.Join(s.dir, "store"), "-l", s.logFile)
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.exited = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(s.cmd, s.exited)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.monitorURL + "/healthz?js-enabled=true")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-s.exited:
			t.Fatalf("nats-server exited at start; log:\n%s", s.log())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats-server not ready after 30s; log:\n%s", s.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *natsServer) stop(t *testing.T) {
	t.Helper()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	s.cmd = nil
}

func (s *natsServer) log() string {
	b, _ := os.ReadFile(s.logFile)
	return string(b)
}

// jsz is the server's own report of a consumer, from its monitoring
// endpoint (the server we talk to is the only one, so it leads).
func (s *natsServer) jsz(t *testing.T, stream, consumer string) (pending, ackPending int) {
	t.Helper()
	resp, err := http.Get(s.monitorURL + "/jsz?accounts=true&streams=true&consumers=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Accounts []struct {
			Streams []struct {
				Name      string `json:"name"`
				Consumers []struct {
					Name       string `json:"name"`
					NumPending int    `json:"num_pending"`
					NumAck     int    `json:"num_ack_pending"`
				} `json:"consumer_detail"`
			} `json:"stream_detail"`
		} `json:"account_details"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	for _, a := range body.Accounts {
		for _, st := range a.Streams {
			for _, c := range st.Consumers {
				if st.Name == stream && c.Name == consumer {
					return c.NumPending, c.NumAck
				}
			}
		}
	}
	t.Fatalf("/jsz does not list stream %s consumer %s", stream, consumer)
	return 0, 0
}

// TestIntegration runs the provider against a real nats-server: the
// metrics equal what the server reports, a stopped server is a fast 503
// naming the provider, a restarted one is read again by the same provider,
// and a thousand queries within the TTL cost one consumer-info call.
func TestIntegration(t *testing.T) {
	t.Parallel()
	srv := startNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	nc, err := nats.Connect(srv.url(), nats.MaxReconnects(-1), nats.ReconnectWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "TEST", Subjects: []string{"test.>"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatalf("create stream (nats-server 2.9 and this nats.go): %v", err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "TEST", jetstream.ConsumerConfig{
		Durable: "worker", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Hour,
	})
	if err != nil {
		t.Fatalf("create consumer: %v", err)
	}

	// a TTL of an hour on a fake clock: the test steps it to expire readings
	clk := clocktesting.NewFakePassiveClock(time.Now())
	raw := fmt.Sprintf(`{"servers": [%q], "cacheTTL": "1h", "metrics": [
		{"name": "nats_backlog", "stream": "TEST", "consumer": "worker"},
		{"name": "nats_pending", "value": "pending", "stream": "TEST", "consumer": "worker"},
		{"name": "nats_ack_pending", "value": "ackPending", "stream": "TEST", "consumer": "worker"},
		{"name": "nats_messages", "value": "messages", "stream": "TEST"}]}`, srv.url())
	pp, err := Factory{}.New("nats-it", json.RawMessage(raw), providers.Deps{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	p := pp.(*Provider)
	defer p.Close()
	expire := func() { clk.SetTime(clk.Now().Add(2 * time.Hour)) }
	query := func(ctx context.Context, metric string) (float64, error) {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		list, err := p.GetExternalMetric(qctx, "default", labels.Everything(), providers.ExternalMetricInfo{Metric: metric})
		if err != nil {
			return 0, err
		}
		if len(list.Items) != 1 {
			return 0, fmt.Errorf("%d items, want 1", len(list.Items))
		}
		it := list.Items[0]
		if it.MetricLabels[StreamLabel] != "TEST" {
			return 0, fmt.Errorf("labels %v", it.MetricLabels)
		}
		return it.Value.AsApproximateFloat64(), nil
	}
	// values waits (the background connect) for the metrics' values
	values := func(what string) map[string]float64 {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			expire()
			out := map[string]float64{}
			var err error
			for _, m := range []string{"nats_backlog", "nats_pending", "nats_ack_pending", "nats_messages"} {
				var v float64
				if v, err = query(ctx, m); err != nil {
					break
				}
				out[m] = v
			}
			if err == nil {
				return out
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no values after 30s: %v", what, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	check := func(what string, got map[string]float64, pending, ack, msgs int) {
		t.Helper()
		want := map[string]float64{"nats_pending": float64(pending), "nats_ack_pending": float64(ack), "nats_backlog": float64(pending + ack), "nats_messages": float64(msgs)}
		for m, w := range want {
			if got[m] != w {
				t.Errorf("%s: %s = %v, want %v", what, m, got[m], w)
			}
		}
		sp, sa := srv.jsz(t, "TEST", "worker")
		if float64(sp) != got["nats_pending"] || float64(sa) != got["nats_ack_pending"] {
			t.Errorf("%s: the server reports num_pending %d, num_ack_pending %d; the provider %v", what, sp, sa, got)
		}
	}

	const n, k = 25, 7
	for i := 0; i < n; i++ {
		if _, err := js.Publish(ctx, "test.job", []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	check("published N", values("published N"), n, 0, n)

	batch, err := cons.Fetch(k, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for range batch.Messages() {
		got++ // not acked
	}
	if got != k || batch.Error() != nil {
		t.Fatalf("fetched %d messages (%v), want %d", got, batch.Error(), k)
	}
	check("fetched k without ack", values("fetched k"), n-k, k, n)

	// one TTL: a thousand queries, one consumer-info call
	expire()
	before, beforeReads := p.APICalls(), p.BackendCalls()
	var warm, cold []time.Duration
	for i := 0; i < 1000; i++ {
		start := time.Now()
		if _, err := query(ctx, "nats_backlog"); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			warm = append(warm, time.Since(start))
		}
	}
	if d := p.APICalls() - before; d != 1 {
		t.Errorf("1,000 queries within one TTL: %d consumer-info calls, want 1", d)
	}
	if d := p.BackendCalls() - beforeReads; d != 1 {
		t.Errorf("1,000 queries within one TTL: %d metric reads (BackendCalls), want 1", d)
	}
	for i := 0; i < 200; i++ {
		expire()
		start := time.Now()
		if _, err := query(ctx, "nats_backlog"); err != nil {
			t.Fatal(err)
		}
		cold = append(cold, time.Since(start))
	}
	t.Logf("1,000 queries within one TTL: %d consumer-info call(s); query p99 warm %s, cold %s (one CONSUMER.INFO round trip)",
		p.APICalls()-before-200, p99(warm), p99(cold))

	// the server stops: a fast 503 naming the provider, never the old value
	srv.stop(t)
	expire()
	start := time.Now()
	_, err = query(ctx, "nats_backlog")
	took := time.Since(start)
	if err == nil {
		t.Fatal("server stopped: got a value")
	}
	if providers.ReasonOf(err) != providers.ReasonBackend || !strings.Contains(err.Error(), `"nats-it"`) {
		t.Errorf("server stopped: want a 503 naming the provider, got %v", err)
	}
	if took > 2500*time.Millisecond {
		t.Errorf("server stopped: the query took %s, beyond its 2s timeout", took)
	}
	t.Logf("server stopped: failed in %s: %v", took, err)
	if p.Connected() == nil {
		t.Error("Connected says yes with the server stopped")
	}

	// the same port and store: the same provider reads again. Whether the
	// consumer's delivered-but-unacked count survives the restart is the
	// server's business (2.9 may redeliver them as pending), so the provider
	// must agree with the server and the backlog stay n.
	srv.start(t)
	after := values("after a restart")
	if after["nats_backlog"] != n || after["nats_messages"] != n {
		t.Errorf("after a restart: backlog %v, messages %v; want %d each", after["nats_backlog"], after["nats_messages"], n)
	}
	sp, sa := srv.jsz(t, "TEST", "worker")
	if float64(sp) != after["nats_pending"] || float64(sa) != after["nats_ack_pending"] {
		t.Errorf("after a restart: the server reports num_pending %d, num_ack_pending %d; the provider %v", sp, sa, after)
	}
}

func p99(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)*99)/100]
}

// TestLeastPrivilege runs the provider as a user with only the README's
// permissions (user and password from Secret files) against a real server.
func TestLeastPrivilege(t *testing.T) {
	t.Parallel()
	bin := serverBinary(t)
	dir := t.TempDir()
	port := freeport.For(t)
	conf := fmt.Sprintf(`listen: "127.0.0.1:%d"
jetstream { store_dir: %q }
accounts {
  APP {
    jetstream: enabled
    users: [
      {user: admin, password: admin-pw}
      {user: adapter, password: "adapter-s3cret", permissions: {
        publish: ["$JS.API.CONSUMER.INFO.*.*", "$JS.API.STREAM.INFO.*"]
        subscribe: ["_INBOX.>"]
      }}
    ]
  }
}
`, port, filepath.Join(dir, "store"))
	confFile := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", confFile, "-l", filepath.Join(dir, "nats.log"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-exited
	})
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	var nc *nats.Conn
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var err error
		if nc, err = nats.Connect(url, nats.UserInfo("admin", "admin-pw")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "nats.log"))
			t.Fatalf("nats-server with %s not ready: %v\n%s", confFile, err, b)
		}
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "JOBS", Subjects: []string{"jobs"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, "JOBS", jetstream.ConsumerConfig{Durable: "worker", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := js.Publish(ctx, "jobs", nil); err != nil {
			t.Fatal(err)
		}
	}

	userFile, passFile := filepath.Join(dir, "user"), filepath.Join(dir, "pass")
	for f, v := range map[string]string{userFile: "adapter\n", passFile: "adapter-s3cret\n"} {
		if err := os.WriteFile(f, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	raw := fmt.Sprintf(`{"servers": [%q], "user": {"file": %q}, "password": {"file": %q}, "cacheTTL": "0s", "metrics": [
		{"name": "nats_backlog", "stream": "JOBS", "consumer": "worker"},
		{"name": "nats_messages", "value": "messages", "stream": "JOBS"},
		{"name": "nats_missing", "stream": "JOBS", "consumer": "nobody"}]}`, url, userFile, passFile)
	pp, err := Factory{}.New("nats-lp", json.RawMessage(raw), providers.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	p := pp.(*Provider)
	defer p.Close()
	read := func(metric string) (float64, error) {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		list, err := p.GetExternalMetric(qctx, "default", labels.Everything(), providers.ExternalMetricInfo{Metric: metric})
		if err != nil {
			return 0, err
		}
		return list.Items[0].Value.AsApproximateFloat64(), nil
	}
	for _, m := range []string{"nats_backlog", "nats_messages"} {
		var v float64
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if v, err = read(m); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil || v != 3 {
			t.Errorf("%s as the least-privileged user: %v %v, want 3", m, v, err)
		}
	}
	_, err = read("nats_missing")
	if providers.ReasonOf(err) != providers.ReasonBackend || !strings.Contains(err.Error(), "consumer nobody: not found") {
		t.Errorf("missing consumer: want a 503 naming it, got %v", err)
	}
	if err != nil && strings.Contains(err.Error(), "s3cret") {
		t.Errorf("the error echoes the password: %v", err)
	}
}
