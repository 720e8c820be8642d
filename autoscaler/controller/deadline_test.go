package controller

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	externalmetricsv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/metricsource"
)

// fixedVersion is a custom.metrics.k8s.io discovery that always says
// v1beta2.
type fixedVersion struct{}

func (fixedVersion) PreferredVersion() (schema.GroupVersion, error) {
	return schema.GroupVersion{Group: "custom.metrics.k8s.io", Version: "v1beta2"}, nil
}
func (fixedVersion) Invalidate() {}

// adapterServer serves external.metrics.k8s.io: metric "slow" never
// answers (until the client gives up), any other answers value.
func adapterServer(t testing.TB, value string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		metric := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		if metric == "slow" {
			<-r.Context().Done() // hung adapter: accepts, never answers
			return
		}
		list := externalmetricsv1beta1.ExternalMetricValueList{
			TypeMeta: metav1.TypeMeta{APIVersion: "external.metrics.k8s.io/v1beta1", Kind: "ExternalMetricValueList"},
			Items:    []externalmetricsv1beta1.ExternalMetricValue{{MetricName: metric, Value: resource.MustParse(value), Timestamp: metav1.NewTime(t0)}},
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(list)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func restSource(t testing.TB, url string) *metricsource.REST {
	t.Helper()
	src, err := metricsource.NewREST(&rest.Config{Host: url, QPS: -1}, nil, fixedVersion{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func externalMetric(name, average string) autoscalingv2.MetricSpec {
	avg := resource.MustParse(average)
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: name},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &avg},
	}}
}

// TestHungAdapterIsAFailedRead: an adapter that accepts and never answers
// holds a reconcile only until its metric read deadline; the read is a
// failed read that the status and an event name, and the other metric,
// which asks for a scale-down, does not get it (as any failed metric).
// Before, the REST client read with context.TODO() and the reconcile
// hung as long as the adapter did.
func TestHungAdapterIsAFailedRead(t *testing.T) {
	t.Parallel()
	ma := metricAutoscaler(func(ma *v1alpha1.MetricAutoscaler) {
		ma.Spec.Metrics = []autoscalingv2.MetricSpec{externalMetric("slow", "30"), externalMetric("fast", "30")}
		ma.Spec.SyncPeriod = &metav1.Duration{Duration: 15 * time.Second}
	})
	f := newFixture(t, ma, 4, 0)
	f.ctrl.clients.Metrics = restSource(t, adapterServer(t, "1").URL)
	f.ctrl.cfg.MetricReadTimeout = 300 * time.Millisecond

	done := make(chan error, 1)
	go func() {
		_, err := f.ctrl.reconcile(context.Background(), kindMA+"/default/workers")
		done <- err
	}()
	// No timed assertion: without the deadline this waits for the test's
	// own timeout, the symptom.
	err := <-done
	if err == nil || !strings.Contains(err.Error(), "metric read deadline of 300ms") {
		t.Fatalf("reconcile error %v; want the read deadline named", err)
	}
	if f.replicas != 4 || f.writes != 0 {
		t.Errorf("scaled to %d (%d writes): a timed-out read must not let the other metric scale down", f.replicas, f.writes)
	}
	stored := f.stored(t)
	var active *autoscalingv2.HorizontalPodAutoscalerCondition
	for i := range stored.Status.Conditions {
		if stored.Status.Conditions[i].Type == autoscalingv2.ScalingActive {
			active = &stored.Status.Conditions[i]
		}
	}
	if active == nil || active.Status != corev1.ConditionFalse || active.Reason != "FailedGetExternalMetric" ||
		!strings.Contains(active.Message, "slow") || !strings.Contains(active.Message, "metric read deadline") {
		t.Errorf("ScalingActive condition %+v; want False, FailedGetExternalMetric, naming slow and the deadline", active)
	}
	events := strings.Join(eventsOf(f.recorder.Events), "\n")
	if !strings.Contains(events, "FailedGetExternalMetric") || !strings.Contains(events, "metric read deadline") {
		t.Errorf("events %q; want a FailedGetExternalMetric naming the deadline", events)
	}
}

// TestReadTimeoutAtMostThePeriod: the deadline never exceeds the sync
// period.
func TestReadTimeoutAtMostThePeriod(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ cfg, period, want time.Duration }{
		{0, 15 * time.Second, DefaultMetricReadTimeout},
		{0, 2 * time.Second, 2 * time.Second},
		{3 * time.Second, time.Minute, 3 * time.Second},
		{time.Minute, 5 * time.Second, 5 * time.Second},
	} {
		c := &Controller{cfg: Config{MetricReadTimeout: tc.cfg}}
		if got := c.readTimeout(tc.period); got != tc.want {
			t.Errorf("readTimeout(%s) with %s = %s, want %s", tc.period, tc.cfg, got, tc.want)
		}
	}
}

func eventsOf(ch chan string) []string {
	var out []string
	for {
		select {
		case e := <-ch:
			out = append(out, e)
		default:
			return out
		}
	}
}
