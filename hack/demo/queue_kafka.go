package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The topic and group of hack/backends/kafka.yaml: kafka_e2e_lag is the
// group's lag on the topic.
const (
	kafkaTopic      = "e2e-jobs"
	kafkaGroup      = "e2e-workers"
	kafkaPartitions = 3
)

type kafkaQueue struct {
	producer, consumer *kgo.Client
}

func openKafka(ctx context.Context, env map[string]string) (queue, error) {
	brokers := envOr(env, "METRICSCALE_KAFKA_BROKERS", "127.0.0.1:19092")
	producer, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.DefaultProduceTopic(kafkaTopic))
	if err != nil {
		return nil, fmt.Errorf("kafka: client for %s: %w", brokers, err)
	}
	if err := kafkaEmpty(ctx, kadm.NewClient(producer)); err != nil {
		producer.Close()
		return nil, err
	}
	// The workers: a group member that commits what it processed. It joins
	// after the group's offsets were moved (a broker refuses that for a group
	// with members).
	consumer, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.ConsumerGroup(kafkaGroup), kgo.ConsumeTopics(kafkaTopic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		producer.Close()
		return nil, fmt.Errorf("kafka: group client for %s: %w", brokers, err)
	}
	return &kafkaQueue{producer: producer, consumer: consumer}, nil
}

// kafkaEmpty creates the topic (kfake forgets it at a restart) and commits the
// group at its end offsets: everything on it counts as consumed.
func kafkaEmpty(ctx context.Context, adm *kadm.Client) error {
	r, err := adm.CreateTopic(ctx, kafkaPartitions, 1, nil, kafkaTopic)
	if err == nil {
		err = r.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("kafka: creating topic %s: %w", kafkaTopic, err)
	}
	end, err := adm.ListEndOffsets(ctx, kafkaTopic)
	if err == nil {
		err = end.Error()
	}
	if err != nil {
		return fmt.Errorf("kafka: end offsets of %s: %w", kafkaTopic, err)
	}
	if err := adm.CommitAllOffsets(ctx, kafkaGroup, end.Offsets()); err != nil {
		return fmt.Errorf("kafka: committing %s at the end of %s: %w", kafkaGroup, kafkaTopic, err)
	}
	return nil
}

func (q *kafkaQueue) Publish(ctx context.Context, n int) error {
	if n <= 0 {
		return nil
	}
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Value: []byte("job")}
	}
	if err := q.producer.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		return fmt.Errorf("kafka: producing %d records to %s: %w", n, kafkaTopic, err)
	}
	return nil
}

// Consume polls up to n records (waiting briefly for those just produced)
// and commits them for the group.
func (q *kafkaQueue) Consume(ctx context.Context, n int) (int, error) {
	if n <= 0 {
		return 0, nil
	}
	pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	fetches := q.consumer.PollRecords(pctx, n)
	cancel()
	var ferr error
	fetches.EachError(func(topic string, p int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && ferr == nil {
			ferr = fmt.Errorf("kafka: fetching %s[%d]: %w", topic, p, err)
		}
	})
	if ferr != nil {
		return 0, ferr
	}
	recs := fetches.Records()
	if len(recs) == 0 {
		return 0, nil
	}
	if err := q.consumer.CommitRecords(ctx, recs...); err != nil {
		return 0, fmt.Errorf("kafka: committing %d records of %s for %s: %w", len(recs), kafkaTopic, kafkaGroup, err)
	}
	return len(recs), nil
}

func (q *kafkaQueue) Close() error {
	q.consumer.Close()
	q.producer.Close()
	return nil
}
