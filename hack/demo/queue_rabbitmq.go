package main

import (
	"context"
	"fmt"
	"net/url"

	amqp "github.com/rabbitmq/amqp091-go"
)

// rabbitQueue is the durable queue hack/backends/rabbitmq.yaml serves as
// rabbitmq_e2e_jobs_total (ready + unacknowledged).
const rabbitQueue = "e2e-jobs"

type rabbitMQQueue struct {
	conn *amqp.Connection
	ch   *amqp.Channel
}

func openRabbitMQ(ctx context.Context, env map[string]string) (queue, error) {
	// The e2e user: the adapter's own has no right on any queue.
	pw, err := secret("rabbitmq", env["METRICSCALE_RABBITMQ_E2E_PASSWORD_FILE"])
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(envOr(env, "METRICSCALE_RABBITMQ_AMQP_URL", "amqp://127.0.0.1:15673"))
	if err != nil {
		return nil, fmt.Errorf("rabbitmq: %w", err)
	}
	addr := u.String()
	u.User = url.UserPassword(env["METRICSCALE_RABBITMQ_E2E_USER"], pw)
	conn, err := amqp.Dial(u.String())
	if err != nil {
		return nil, fmt.Errorf("rabbitmq: connecting to %s: %w", addr, err)
	}
	ch, err := conn.Channel()
	if err == nil {
		_, err = ch.QueueDeclare(rabbitQueue, true, false, false, false, nil)
	}
	if err == nil {
		// Confirms: a published job is in the queue when Publish returns.
		err = ch.Confirm(false)
	}
	if err == nil {
		_, err = ch.QueuePurge(rabbitQueue, false)
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("rabbitmq: queue %s: %w", rabbitQueue, err)
	}
	return &rabbitMQQueue{conn: conn, ch: ch}, nil
}

func (q *rabbitMQQueue) Publish(ctx context.Context, n int) error {
	confirms := make([]*amqp.DeferredConfirmation, 0, n)
	for range n {
		dc, err := q.ch.PublishWithDeferredConfirmWithContext(ctx, "", rabbitQueue, true, false, amqp.Publishing{
			DeliveryMode: amqp.Persistent, ContentType: "text/plain", Body: []byte("job"),
		})
		if err != nil {
			return fmt.Errorf("rabbitmq: publishing to %s: %w", rabbitQueue, err)
		}
		confirms = append(confirms, dc)
	}
	for _, dc := range confirms {
		if ok, err := dc.WaitContext(ctx); err != nil || !ok {
			return fmt.Errorf("rabbitmq: publishing to %s: not confirmed (%v)", rabbitQueue, err)
		}
	}
	return nil
}

// Consume is basic.get and ack, one job at a time, as a polling worker does.
func (q *rabbitMQQueue) Consume(ctx context.Context, n int) (int, error) {
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

func (q *rabbitMQQueue) Close() error { return q.conn.Close() }
