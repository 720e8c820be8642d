package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/metricscale/metricscale/autoscaler/metricsource"
)

// DefaultMetricReadTimeout bounds one reconcile's metric reads when
// Config.MetricReadTimeout is 0: below the default sync period (15s), so
// a hung adapter costs each object at most this much of a worker per
// period, and well above a read through the aggregator (p99 64 ms in
// docs/benchmarks.md).
const DefaultMetricReadTimeout = 10 * time.Second

// readTimeout is how long one reconcile's metric reads may take: the
// configured timeout, never more than the object's sync period (a read
// longer than the period only delays the next one).
func (c *Controller) readTimeout(period time.Duration) time.Duration {
	d := c.cfg.MetricReadTimeout
	if d <= 0 {
		d = DefaultMetricReadTimeout
	}
	if period > 0 && period < d {
		d = period
	}
	return d
}

// deadlineSource names the deadline in the error of a read it cut, which
// the core then reports as a failed read (a FailedGet…Metric event and
// condition), never as a value.
type deadlineSource struct {
	metricsource.Source
	timeout time.Duration
}

func (d deadlineSource) explain(ctx context.Context, err error) error {
	// the read was cut by the deadline, not failed for a reason of its own
	// while another read used the time up
	cut := errors.Is(err, context.DeadlineExceeded) || err != nil && strings.Contains(err.Error(), "deadline")
	if cut && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("no answer within the reconcile's metric read deadline of %s (--metric-read-timeout, at most the sync period): %w", d.timeout, err)
	}
	return err
}

func (d deadlineSource) ResourceMetric(ctx context.Context, resource corev1.ResourceName, namespace string, selector labels.Selector, container string) (metricsource.PodMetricsInfo, time.Time, error) {
	v, ts, err := d.Source.ResourceMetric(ctx, resource, namespace, selector, container)
	return v, ts, d.explain(ctx, err)
}

func (d deadlineSource) PodsMetric(ctx context.Context, metricName, namespace string, selector, metricSelector labels.Selector) (metricsource.PodMetricsInfo, time.Time, error) {
	v, ts, err := d.Source.PodsMetric(ctx, metricName, namespace, selector, metricSelector)
	return v, ts, d.explain(ctx, err)
}

func (d deadlineSource) ObjectMetric(ctx context.Context, metricName, namespace string, ref *autoscalingv2.CrossVersionObjectReference, metricSelector labels.Selector) (int64, time.Time, error) {
	v, ts, err := d.Source.ObjectMetric(ctx, metricName, namespace, ref, metricSelector)
	return v, ts, d.explain(ctx, err)
}

func (d deadlineSource) ExternalMetric(ctx context.Context, metricName, namespace string, selector labels.Selector) ([]int64, time.Time, error) {
	v, ts, err := d.Source.ExternalMetric(ctx, metricName, namespace, selector)
	return v, ts, d.explain(ctx, err)
}

// metricReadsPerObject bounds the concurrent metric reads of one
// reconcile: an object with many metrics waits for about
// len/metricReadsPerObject reads instead of all of them in turn, and
// --workers objects at once make at most workers × this many reads.
const metricReadsPerObject = 8

// batch is the metrics source of one reconcile of hpa: its spec's reads
// made concurrently (metricsource.Batch) when it has more than one.
func (c *Controller) batch(key string, hpa *autoscalingv2.HorizontalPodAutoscaler, sc *autoscalingv1.Scale) metricsource.Source {
	src := c.metricSource(key)
	if len(hpa.Spec.Metrics) < 2 {
		return src
	}
	var pods labels.Selector
	if sc != nil && sc.Status.Selector != "" {
		if sel, err := labels.Parse(sc.Status.Selector); err == nil {
			pods = sel
		}
	}
	reads := metricsource.ReadsOf(hpa.Spec.Metrics, pods)
	if len(reads) < 2 {
		return src
	}
	return metricsource.NewBatch(src, hpa.Namespace, reads, metricReadsPerObject)
}
