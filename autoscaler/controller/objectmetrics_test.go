package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-base/metrics"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/objectmetrics"
)

// samples renders the registry's metricscale_metricautoscaler_* samples as
// sorted "name{label=value,...} value" lines.
func samples(t *testing.T, reg metrics.KubeRegistry) []string {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "metricscale_metricautoscaler_") {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			out = append(out, fmt.Sprintf("%s{%s} %g", strings.TrimPrefix(f.GetName(), "metricscale_metricautoscaler_"), strings.Join(labels, ","), m.GetGauge().GetValue()))
		}
	}
	sort.Strings(out)
	return out
}

// TestObjectMetricsFollowTheStatus: a reconcile sets the object's gauges
// from the status it writes; deleting the object deletes every series.
func TestObjectMetricsFollowTheStatus(t *testing.T) {
	t.Parallel()
	f := newFixture(t, metricAutoscaler(nil), 4, 240)
	f.ctrl.objects = objectmetrics.New()
	reg := metrics.NewKubeRegistry()
	f.ctrl.objects.MustRegister(reg.CustomRegister)

	st := f.reconcile(t)
	if st.Status.DesiredReplicas != 8 {
		t.Fatalf("status.desiredReplicas %d, want 8", st.Status.DesiredReplicas)
	}
	got := strings.Join(samples(t, reg), "\n")
	for _, want := range []string{
		"current_replicas{name=workers,namespace=default} 4",
		"desired_replicas{name=workers,namespace=default} 8",
		"min_replicas{name=workers,namespace=default} 1",
		"max_replicas{name=workers,namespace=default} 20",
		"metric_value{metric_name=queue_messages_ready,metric_type=External,name=workers,namespace=default} 60",
		"metric_target{metric_name=queue_messages_ready,metric_type=External,name=workers,namespace=default,target_type=AverageValue} 30",
		"condition{condition=AbleToScale,name=workers,namespace=default,status=True} 1",
		"fallback_active{name=workers,namespace=default} 0",
		"active{name=workers,namespace=default} 1",
		fmt.Sprintf("last_scale_time_seconds{name=workers,namespace=default} %g", float64(t0.Unix())),
	} {
		if !strings.Contains(got+"\n", want+"\n") {
			t.Errorf("no sample %q in\n%s", want, got)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.dyn.Resource(v1alpha1.GroupVersionResource).Namespace("default").Delete(ctx, "workers", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The informer delivers the deletion asynchronously.
	err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
		return len(samples(t, reg)) == 0, nil
	})
	if err != nil {
		t.Fatalf("series left after the deletion: %v", samples(t, reg))
	}
	// A reconcile of the key queued before the deletion adds none back.
	if _, err := f.ctrl.reconcile(context.Background(), kindMA+"/default/workers"); err != nil {
		t.Fatal(err)
	}
	if left := samples(t, reg); len(left) != 0 {
		t.Fatalf("series after a reconcile of the deleted object: %v", left)
	}
}
