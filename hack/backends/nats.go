package backends

// NATS with JetStream, Debian's nats-server on 127.0.0.1:14222 (monitoring 18222).
// Everything lives under DIR/nats: the store (store/, kept across a stop), the log
// (nats.log), the pid file. Start is idempotent (a running server is left alone) and waits
// until JetStream answers.
//
// Environment: METRICSCALE_NATS_BIN (default: nats-server on PATH, else
// /usr/sbin/nats-server).

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

//go:embed nats.yaml
var natsFragment []byte

const (
	natsPort        = 14222
	natsMonitorPort = 18222
	natsReady       = 60 * time.Second
	natsStopWait    = 30 * time.Second
	// The e2e queue of nats.yaml: stream E2E and its durable pull consumer e2e-jobs, whose
	// backlog is nats_e2e_jobs_backlog.
	natsStream   = "E2E"
	natsSubject  = "e2e.jobs"
	natsConsumer = "e2e-jobs"
)

type natsBackend struct{}

func init() { register(natsBackend{}) }

func (natsBackend) Name() string { return "nats" }

func natsBin() string {
	if v := os.Getenv("METRICSCALE_NATS_BIN"); v != "" {
		return v
	}
	if p, err := exec.LookPath("nats-server"); err == nil {
		return p
	}
	return "/usr/sbin/nats-server"
}

func natsMonitorURL() string { return "http://127.0.0.1:" + strconv.Itoa(natsMonitorPort) }

// natsAnswers: JetStream is enabled and the server answers on its client port.
func natsAnswers(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, natsMonitorURL()+"/healthz?js-enabled=true", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK && portOpen(natsPort)
}

func (natsBackend) Install(ctx context.Context, cacheRoot string, log io.Writer) error {
	if executable(natsBin()) {
		return nil
	}
	// (its service would take port 4222)
	if err := aptInstall(ctx, "nats", "nats-server", cacheRoot, log, natsBin()); err != nil {
		return err
	}
	out, _ := run(ctx, nil, nil, natsBin(), "--version")
	fmt.Fprintf(log, "    installed %s", out)
	return nil
}

func natsDir(dir string) string { return filepath.Join(mustAbs(dir), "nats") }

func (natsBackend) Start(ctx context.Context, dir string, log io.Writer) error {
	if _, err := absDir(dir); err != nil {
		return err
	}
	bin := natsBin()
	if err := needBins("nats", bin); err != nil {
		return err
	}
	d := natsDir(dir)
	if err := os.MkdirAll(filepath.Join(d, "store"), 0o755); err != nil {
		return fmt.Errorf("nats: %w", err)
	}
	pidfile := filepath.Join(d, "nats.pid")
	if pid, ok := pidfilePID(pidfile, "nats-server"); ok {
		fmt.Fprintf(log, "    nats-server already running (pid %d)\n", pid)
		if err := waitUntil(ctx, natsReady, func() bool { return natsAnswers(ctx) }); err != nil {
			return fmt.Errorf("nats-server is not ready after %s (logs in %s): %w", natsReady, d, err)
		}
		return nil
	}
	if err := portsFree("nats-server in "+d, natsPort, natsMonitorPort); err != nil {
		return err
	}
	p, err := startDaemon(nil, pidfile, filepath.Join(d, "nats.out"), bin, "-a", "127.0.0.1", "-p", strconv.Itoa(natsPort),
		"-m", strconv.Itoa(natsMonitorPort), "-js", "-sd", filepath.Join(d, "store"), "-n", "metricscale-nats", "-l", filepath.Join(d, "nats.log"))
	if err != nil {
		return fmt.Errorf("nats: %w", err)
	}
	if err := waitStarted(ctx, p, natsReady, func() bool { return natsAnswers(ctx) }); err != nil {
		if errors.Is(err, errExited) {
			return fmt.Errorf("nats-server exited at start (logs in %s):\n%s\n%s", d, tail(filepath.Join(d, "nats.log"), 20), tail(filepath.Join(d, "nats.out"), 20))
		}
		return fmt.Errorf("nats-server is not ready after %s (logs in %s): %w\n%s", natsReady, d, err, tail(filepath.Join(d, "nats.log"), 20))
	}
	fmt.Fprintf(log, "    nats-server ready on nats://127.0.0.1:%d (JetStream store %s, pid %d)\n", natsPort, filepath.Join(d, "store"), p.pid)
	return nil
}

// Stop stops the server; the JetStream store is kept for the next start.
func (natsBackend) Stop(ctx context.Context, dir string) error {
	if _, err := absDir(dir); err != nil {
		return err
	}
	return stopPidfile(ctx, filepath.Join(natsDir(dir), "nats.pid"), "nats-server", natsPort, natsStopWait)
}

func (natsBackend) Healthy(ctx context.Context, dir string) error {
	if _, ok := pidfilePID(filepath.Join(natsDir(dir), "nats.pid"), "nats-server"); !ok {
		return fmt.Errorf("the nats-server of %s does not run", natsDir(dir))
	}
	if !natsAnswers(ctx) {
		return fmt.Errorf("nats-server on 127.0.0.1:%d does not answer with JetStream enabled", natsPort)
	}
	return nil
}

func (natsBackend) Env(string) map[string]string {
	return map[string]string{
		"METRICSCALE_NATS_URL":         "nats://127.0.0.1:" + strconv.Itoa(natsPort),
		"METRICSCALE_NATS_MONITOR_URL": natsMonitorURL(),
	}
}

func (natsBackend) AdapterConfig(dir string) ([]byte, error) { return adapterConfig(natsFragment, dir) }

func (natsBackend) Queue() QueueInfo {
	return QueueInfo{Metric: "nats_e2e_jobs_backlog", Selector: map[string]string{"stream": natsStream, "consumer": natsConsumer}}
}

type natsQueue struct {
	nc         *nats.Conn
	js         jetstream.JetStream
	stream     jetstream.Stream
	cons       jetstream.Consumer
	monitorURL string
}

// OpenQueue connects and makes sure of the stream and its consumer.
func (natsBackend) OpenQueue(ctx context.Context, env map[string]string) (Queue, error) {
	url, err := need(env, "METRICSCALE_NATS_URL")
	if err != nil {
		return nil, fmt.Errorf("nats: %w", err)
	}
	monitor, err := need(env, "METRICSCALE_NATS_MONITOR_URL")
	if err != nil {
		return nil, fmt.Errorf("nats: %w", err)
	}
	nc, err := nats.Connect(url, nats.Name("metricscale-dev"), nats.Timeout(5*time.Second))
	if err != nil {
		return nil, fmt.Errorf("nats: connecting to %s: %w", url, err)
	}
	q := &natsQueue{nc: nc, monitorURL: monitor}
	if err := q.setUp(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return q, nil
}

func (q *natsQueue) setUp(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var err error
	if q.js, err = jetstream.New(q.nc); err != nil {
		return fmt.Errorf("nats: %w", err)
	}
	q.stream, err = q.js.Stream(ctx, natsStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		q.stream, err = q.js.CreateStream(ctx, jetstream.StreamConfig{Name: natsStream, Subjects: []string{natsSubject}, Storage: jetstream.FileStorage})
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			q.stream, err = q.js.Stream(ctx, natsStream)
		}
	}
	if err != nil {
		return fmt.Errorf("nats: stream %s: %w", natsStream, err)
	}
	q.cons, err = q.js.Consumer(ctx, natsStream, natsConsumer)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		// a short ack wait: messages a killed run left unacknowledged come back to drain soon
		q.cons, err = q.js.CreateOrUpdateConsumer(ctx, natsStream, jetstream.ConsumerConfig{
			Durable: natsConsumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: 5 * time.Second,
		})
	}
	if err != nil {
		return fmt.Errorf("nats: stream %s consumer %s: %w", natsStream, natsConsumer, err)
	}
	return nil
}

func (q *natsQueue) Publish(ctx context.Context, n int) error {
	acks := make([]jetstream.PubAckFuture, 0, n)
	for i := range n {
		f, err := q.js.PublishAsync(natsSubject, []byte("job "+strconv.Itoa(i)))
		if err != nil {
			return fmt.Errorf("nats: publishing message %d of %d to %s: %w", i+1, n, natsSubject, err)
		}
		acks = append(acks, f)
	}
	timeout := time.After(5 * time.Second)
	for i, f := range acks {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("nats: publishing message %d of %d to %s: %w", i+1, n, natsSubject, err)
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout:
			return fmt.Errorf("nats: publishing to %s: no acknowledgement after 5s", natsSubject)
		}
	}
	return nil
}

// Consume fetches what is there, up to n, and acknowledges each message, waiting for the
// server's confirmation (so Depth, right after, counts it consumed).
func (q *natsQueue) Consume(ctx context.Context, n int) (int, error) {
	if n <= 0 {
		return 0, nil
	}
	batch, err := q.cons.FetchNoWait(n)
	if err != nil {
		return 0, fmt.Errorf("nats: fetching from %s/%s: %w", natsStream, natsConsumer, err)
	}
	got := 0
	for m := range batch.Messages() {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := m.DoubleAck(actx)
		cancel()
		if err != nil {
			return got, fmt.Errorf("nats: acknowledging on %s/%s: %w", natsStream, natsConsumer, err)
		}
		got++
	}
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) {
		return got, fmt.Errorf("nats: fetching from %s/%s: %w", natsStream, natsConsumer, err)
	}
	return got, nil
}

// Depth is num_pending + num_ack_pending of the consumer as the server's monitoring
// endpoint reports it (the only server: it leads the consumer).
func (q *natsQueue) Depth(ctx context.Context) (int, error) {
	url := q.monitorURL + "/jsz?accounts=true&streams=true&consumers=true"
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, fmt.Errorf("nats: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("nats: GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("nats: GET %s: %s", url, resp.Status)
	}
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
		return 0, fmt.Errorf("nats: GET %s: %w", url, err)
	}
	for _, a := range body.Accounts {
		for _, s := range a.Streams {
			for _, c := range s.Consumers {
				if s.Name == natsStream && c.Name == natsConsumer {
					return c.NumPending + c.NumAck, nil
				}
			}
		}
	}
	return 0, fmt.Errorf("nats: the server's /jsz does not list stream %s consumer %s", natsStream, natsConsumer)
}

// Drain purges the stream, then fetches and acknowledges until the server reports an
// empty backlog: what another run fetched and never acknowledged comes back after the ack
// wait (5s).
func (q *natsQueue) Drain(ctx context.Context) error {
	if err := q.stream.Purge(ctx); err != nil {
		return fmt.Errorf("nats: purging stream %s: %w", natsStream, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := q.Depth(ctx)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nats: draining stream %s consumer %s: %d messages left after 30s", natsStream, natsConsumer, n)
		}
		batch, err := q.cons.Fetch(500, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return fmt.Errorf("nats: fetching from %s/%s: %w", natsStream, natsConsumer, err)
		}
		for m := range batch.Messages() {
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := m.DoubleAck(actx)
			cancel()
			if err != nil {
				return fmt.Errorf("nats: acknowledging on %s/%s: %w", natsStream, natsConsumer, err)
			}
		}
	}
}

func (q *natsQueue) Close() error {
	q.nc.Close()
	return nil
}
