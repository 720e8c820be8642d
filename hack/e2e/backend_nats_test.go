//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The e2e queue of hack/backends/nats.yaml: stream E2E, durable pull consumer e2e-jobs.
const (
	natsStream   = "E2E"
	natsSubject  = "e2e.jobs"
	natsConsumer = "e2e-jobs"
)

// natsBackend is NATS JetStream run by hack/backends/nats.sh; its metric is the consumer's
// backlog (num_pending + num_ack_pending), and count is the same sum as the server's
// monitoring endpoint reports it.
func natsBackend() queueBackend {
	return queueBackend{
		name:     "nats",
		metric:   "nats_e2e_jobs_backlog",
		selector: map[string]string{"stream": natsStream, "consumer": natsConsumer},
		publish:  natsPublish,
		drain:    natsDrain,
		count:    natsCount,
	}
}

func natsEnv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// natsJetStream connects to the cluster's server and makes sure the stream and the
// consumer exist; the connection is closed when t ends.
func natsJetStream(ctx context.Context, t *testing.T) (jetstream.JetStream, jetstream.Consumer) {
	t.Helper()
	url := natsEnv("METRICSCALE_NATS_URL", "nats://127.0.0.1:14222")
	nc, err := nats.Connect(url, nats.Name("metricscale-e2e"), nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("connecting to NATS at %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := js.Stream(ctx, natsStream); errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: natsStream, Subjects: []string{natsSubject}, Storage: jetstream.FileStorage})
		if err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			t.Fatalf("creating stream %s: %v", natsStream, err)
		}
	} else if err != nil {
		t.Fatalf("stream %s: %v", natsStream, err)
	}
	cons, err := js.Consumer(ctx, natsStream, natsConsumer)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		// a short ack wait: messages a killed run left unacknowledged come back to drain soon
		cons, err = js.CreateOrUpdateConsumer(ctx, natsStream, jetstream.ConsumerConfig{
			Durable: natsConsumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: 5 * time.Second,
		})
	}
	if err != nil {
		t.Fatalf("stream %s consumer %s: %v", natsStream, natsConsumer, err)
	}
	return js, cons
}

func natsPublish(ctx context.Context, t *testing.T, n int) {
	t.Helper()
	js, _ := natsJetStream(ctx, t)
	for i := 0; i < n; i++ {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := js.Publish(pctx, natsSubject, []byte("job "+strconv.Itoa(i)))
		cancel()
		if err != nil {
			t.Fatalf("publishing message %d of %d to %s: %v", i+1, n, natsSubject, err)
		}
	}
}

// natsDrain fetches and acknowledges every message until the server reports an empty
// backlog (messages another run left unacknowledged come back after the ack wait).
func natsDrain(ctx context.Context, t *testing.T) {
	t.Helper()
	_, cons := natsJetStream(ctx, t)
	deadline := time.Now().Add(30 * time.Second)
	for natsCount(ctx, t) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("draining stream %s consumer %s: %d messages left after 30s", natsStream, natsConsumer, natsCount(ctx, t))
		}
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			t.Fatalf("fetching from %s/%s: %v", natsStream, natsConsumer, err)
		}
		for m := range batch.Messages() {
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := m.DoubleAck(actx)
			cancel()
			if err != nil {
				t.Fatalf("acknowledging a message of %s/%s: %v", natsStream, natsConsumer, err)
			}
		}
	}
}

// natsCount is num_pending + num_ack_pending of the consumer as the server's monitoring
// endpoint reports it (the only server: it leads the consumer).
func natsCount(ctx context.Context, t *testing.T) int {
	t.Helper()
	url := natsEnv("METRICSCALE_NATS_MONITOR_URL", "http://127.0.0.1:18222") + "/jsz?accounts=true&streams=true&consumers=true"
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
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
		t.Fatalf("GET %s: %v", url, err)
	}
	for _, a := range body.Accounts {
		for _, s := range a.Streams {
			for _, c := range s.Consumers {
				if s.Name == natsStream && c.Name == natsConsumer {
					return c.NumPending + c.NumAck
				}
			}
		}
	}
	t.Fatalf("the server's /jsz does not list stream %s consumer %s", natsStream, natsConsumer)
	return 0
}
