//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The Kafka e2e queue: topic e2e-jobs consumed by group e2e-workers on the broker of
// hack/backends/kafka.sh (kfake, in memory: a restart loses the topic and the commits,
// so publish and drain create the topic when it is missing).
const (
	kafkaTopic      = "e2e-jobs"
	kafkaGroup      = "e2e-workers"
	kafkaPartitions = 3
)

func kafkaBackend() queueBackend {
	return queueBackend{
		name:     "kafka",
		metric:   "kafka_e2e_lag",
		selector: map[string]string{"topic": kafkaTopic},
		publish: func(ctx context.Context, t *testing.T, n int) {
			t.Helper()
			withKafka(ctx, t, func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) {
				kafkaEnsureTopic(ctx, t, adm)
				rs := make([]*kgo.Record, n)
				for i := range rs {
					rs[i] = &kgo.Record{Topic: kafkaTopic, Value: []byte(fmt.Sprintf("job %d", i))}
				}
				if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
					t.Fatalf("producing %d records to %s: %v", n, kafkaTopic, err)
				}
			})
		},
		drain: func(ctx context.Context, t *testing.T) {
			t.Helper()
			withKafka(ctx, t, func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) {
				kafkaEnsureTopic(ctx, t, adm)
				end, err := adm.ListEndOffsets(ctx, kafkaTopic)
				if err == nil {
					err = end.Error()
				}
				if err != nil {
					t.Fatalf("listing the end offsets of %s: %v", kafkaTopic, err)
				}
				// the group has consumed everything: it commits at the end offsets
				if err := adm.CommitAllOffsets(ctx, kafkaGroup, end.Offsets()); err != nil {
					t.Fatalf("committing %s at the end offsets of %s: %v", kafkaGroup, kafkaTopic, err)
				}
			})
		},
		count: func(ctx context.Context, t *testing.T) int {
			t.Helper()
			var total int64
			withKafka(ctx, t, func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) {
				start, err := adm.ListStartOffsets(ctx, kafkaTopic)
				if err == nil {
					err = start.Error()
				}
				if err != nil {
					t.Fatalf("listing the start offsets of %s: %v", kafkaTopic, err)
				}
				end, err := adm.ListEndOffsets(ctx, kafkaTopic)
				if err == nil {
					err = end.Error()
				}
				if err != nil {
					t.Fatalf("listing the end offsets of %s: %v", kafkaTopic, err)
				}
				committed, err := adm.FetchOffsets(ctx, kafkaGroup)
				if err == nil {
					err = committed.Error()
				}
				if err != nil {
					t.Fatalf("fetching the offsets of %s: %v", kafkaGroup, err)
				}
				// end − committed per partition; a partition the group never committed
				// holds everything still on it (hack/backends/kafka.yaml: earliest)
				end.Each(func(e kadm.ListedOffset) {
					from := start[e.Topic][e.Partition].Offset
					if c, ok := committed.Lookup(e.Topic, e.Partition); ok && c.At >= from {
						from = c.At
					}
					if e.Offset > from {
						total += e.Offset - from
					}
				})
			})
			return int(total)
		},
	}
}

// withKafka runs fn with a client of the e2e broker, bounded to 30s.
func withKafka(ctx context.Context, t *testing.T, fn func(context.Context, *kgo.Client, *kadm.Client)) {
	t.Helper()
	brokers := os.Getenv("METRICSCALE_KAFKA_BROKERS") // hack/backends/kafka.sh env
	if brokers == "" {
		brokers = "127.0.0.1:19092"
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		t.Fatalf("kafka client for %s: %v", brokers, err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	fn(ctx, cl, kadm.NewClient(cl))
}

// kafkaEnsureTopic creates the e2e topic unless it exists.
func kafkaEnsureTopic(ctx context.Context, t *testing.T, adm *kadm.Client) {
	t.Helper()
	r, err := adm.CreateTopic(ctx, kafkaPartitions, 1, nil, kafkaTopic)
	if err == nil {
		err = r.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatalf("creating topic %s: %v", kafkaTopic, err)
	}
}
