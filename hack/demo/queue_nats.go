package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The JetStream queue of hack/backends/nats.yaml: stream E2E and its durable
// pull consumer e2e-jobs, whose backlog is nats_e2e_jobs_backlog.
const (
	natsStream   = "E2E"
	natsSubject  = "e2e.jobs"
	natsConsumer = "e2e-jobs"
)

type natsQueue struct {
	nc   *nats.Conn
	js   jetstream.JetStream
	cons jetstream.Consumer
}

func openNATS(ctx context.Context, env map[string]string) (queue, error) {
	url := envOr(env, "METRICSCALE_NATS_URL", "nats://127.0.0.1:14222")
	nc, err := nats.Connect(url, nats.Name("metricscale-demo"), nats.Timeout(5*time.Second))
	if err != nil {
		return nil, fmt.Errorf("nats: connecting to %s: %w", url, err)
	}
	q, err := natsSetUp(ctx, nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return q, nil
}

// natsSetUp makes sure of the stream and the consumer (as the e2e does) and
// empties the queue.
func natsSetUp(ctx context.Context, nc *nats.Conn) (*natsQueue, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("nats: %w", err)
	}
	stream, err := js.Stream(ctx, natsStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		stream, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: natsStream, Subjects: []string{natsSubject}, Storage: jetstream.FileStorage})
	}
	if err != nil {
		return nil, fmt.Errorf("nats: stream %s: %w", natsStream, err)
	}
	cons, err := js.Consumer(ctx, natsStream, natsConsumer)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		cons, err = js.CreateOrUpdateConsumer(ctx, natsStream, jetstream.ConsumerConfig{
			Durable: natsConsumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: 5 * time.Second,
		})
	}
	if err != nil {
		return nil, fmt.Errorf("nats: stream %s consumer %s: %w", natsStream, natsConsumer, err)
	}
	// A purge drops what earlier runs left, and the consumer's backlog with it.
	if err := stream.Purge(ctx); err != nil {
		return nil, fmt.Errorf("nats: purging stream %s: %w", natsStream, err)
	}
	q := &natsQueue{nc: nc, js: js, cons: cons}
	// Whatever a killed run fetched and never acknowledged comes back after
	// the ack wait (5s): take it too.
	deadline := time.Now().Add(15 * time.Second)
	for {
		info, err := cons.Info(ctx)
		if err != nil {
			return nil, fmt.Errorf("nats: consumer %s: %w", natsConsumer, err)
		}
		if info.NumPending+uint64(info.NumAckPending) == 0 || time.Now().After(deadline) {
			return q, nil
		}
		if _, err := q.Consume(ctx, 1000); err != nil {
			return nil, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (q *natsQueue) Publish(ctx context.Context, n int) error {
	for range n {
		if _, err := q.js.PublishAsync(natsSubject, []byte("job")); err != nil {
			return fmt.Errorf("nats: publishing to %s: %w", natsSubject, err)
		}
	}
	select {
	case <-q.js.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(5 * time.Second):
		return fmt.Errorf("nats: publishing to %s: no acknowledgement after 5s", natsSubject)
	}
}

// Consume fetches what is there, up to n, and acknowledges each message.
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
		if err := m.Ack(); err != nil {
			return got, fmt.Errorf("nats: acknowledging on %s/%s: %w", natsStream, natsConsumer, err)
		}
		got++
	}
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) {
		return got, fmt.Errorf("nats: fetching from %s/%s: %w", natsStream, natsConsumer, err)
	}
	// The acks are sent before the adapter next asks.
	if err := q.nc.FlushTimeout(5 * time.Second); err != nil {
		return got, fmt.Errorf("nats: %w", err)
	}
	return got, nil
}

func (q *natsQueue) Close() error {
	q.nc.Close()
	return nil
}
