package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/client-go/kubernetes"
	externalv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"

	"github.com/metricscale/metricscale/hack/backends"
)

// queue is a real broker's queue as the demo's workers see it: jobs are
// published to it, and each second the ready workers consume from it.
type queue = backends.Queue

// backend is a queue backend of hack/backends: the External metric its
// adapter provider serves for the e2e queue and how to open that queue,
// emptied, from the cluster's env (hack/cluster.sh env).
type backend struct {
	metric   string
	selector map[string]string
	open     func(ctx context.Context, env map[string]string) (queue, error)
}

func backendNames() []string { return backends.Names() }

func lookupBackend(name string) (backend, error) {
	b, err := backends.Lookup(name)
	if err != nil {
		return backend{}, err
	}
	info := b.Queue()
	open := func(ctx context.Context, env map[string]string) (queue, error) {
		q, err := b.OpenQueue(ctx, env)
		if err != nil {
			return nil, err
		}
		if err := q.Drain(ctx); err != nil {
			q.Close()
			return nil, err
		}
		return q, nil
	}
	return backend{metric: info.Metric, selector: info.Selector, open: open}, nil
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
