package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	"k8s.io/client-go/kubernetes"
	externalv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
)

// queue is a real broker's queue as the demo's workers see it: jobs are
// published to it, and each second the ready workers consume from it.
type queue interface {
	// Publish adds n jobs.
	Publish(ctx context.Context, n int) error
	// Consume takes up to n jobs the way a worker does (and acknowledges
	// them); it returns how many there were.
	Consume(ctx context.Context, n int) (int, error)
	Close() error
}

// backend is a queue backend of hack/backends: the External metric its
// adapter provider serves for the e2e queue (hack/backends/NAME.yaml, the
// same metric and selector as hack/e2e/backend_NAME_test.go) and how to open
// that queue, emptied, from the cluster's env (hack/cluster.sh env).
type backend struct {
	metric   string
	selector map[string]string
	open     func(ctx context.Context, env map[string]string) (queue, error)
}

var backends = map[string]backend{
	"redis":      {metric: "redis_e2e_jobs_length", selector: map[string]string{"key": redisKey}, open: openRedis},
	"rabbitmq":   {metric: "rabbitmq_e2e_jobs_total", selector: map[string]string{"queue": rabbitQueue}, open: openRabbitMQ},
	"postgresql": {metric: "postgresql_jobs_pending", selector: map[string]string{"queue": pgQueue}, open: openPostgreSQL},
	"nats":       {metric: "nats_e2e_jobs_backlog", selector: map[string]string{"stream": natsStream, "consumer": natsConsumer}, open: openNATS},
	"kafka":      {metric: "kafka_e2e_lag", selector: map[string]string{"topic": kafkaTopic}, open: openKafka},
}

func backendNames() []string {
	names := make([]string, 0, len(backends))
	for n := range backends {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func lookupBackend(name string) (backend, error) {
	b, ok := backends[name]
	if !ok {
		return backend{}, fmt.Errorf("unknown backend %q (known: %s)", name, strings.Join(backendNames(), ", "))
	}
	return b, nil
}

// selectorString is the label selector in its query-parameter form, sorted
// so that it reads the same every time.
func selectorString(sel map[string]string) string {
	parts := make([]string, 0, len(sel))
	for k, v := range sel {
		parts = append(parts, k+"="+v)
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// externalDepth is the metric as the autoscaler reads it: the adapter's
// answer through the aggregator, summed over its series.
func externalDepth(ctx context.Context, kube kubernetes.Interface, b backend) (int, error) {
	raw, err := kube.Discovery().RESTClient().Get().
		AbsPath("/apis/external.metrics.k8s.io/v1beta1/namespaces", namespace, b.metric).
		Param("labelSelector", selectorString(b.selector)).
		DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading %s through the aggregator: %w", b.metric, err)
	}
	var list externalv1beta1.ExternalMetricValueList
	if err := json.Unmarshal(raw, &list); err != nil {
		return 0, fmt.Errorf("reading %s through the aggregator: %w", b.metric, err)
	}
	total := int64(0)
	for _, v := range list.Items {
		total += v.Value.Value()
	}
	return int(total), nil
}

// secret reads a password file a backend's start script wrote.
func secret(backendName, file string) (string, error) {
	if file == "" {
		return "", fmt.Errorf("%s: hack/cluster.sh env names no password file (does the cluster run the backend?)", backendName)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s: reading its password: %w", backendName, err)
	}
	return strings.TrimSpace(string(b)), nil
}

func envOr(env map[string]string, key, def string) string {
	if v := env[key]; v != "" {
		return v
	}
	return def
}
