package push

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metricscale/metricscale/providers/providertest"
)

// TestPrometheusRemoteWrite: Debian's Prometheus scrapes a queue depth and
// remote-writes it (1.0, snappy, bearer token) to the push port; each value
// it scrapes is stored with the scrape's labels. It logs the time from a
// change at the target to the stored value.
func TestPrometheusRemoteWrite(t *testing.T) {
	providertest.NeedPrometheus(t)
	t.Parallel()
	var depth atomic.Int64
	depth.Store(11)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintf(w, "# TYPE queue_depth gauge\nqueue_depth{queue=\"orders\"} %d\n", depth.Load())
	}))
	defer target.Close()
	sink := &recordingSink{}
	srv := ingestServer(t, sink, 1<<20)

	cfg := fmt.Sprintf(`global: {scrape_interval: 1s}
scrape_configs:
- job_name: worker
  static_configs: [{targets: [%q]}]
remote_write:
- url: %s%s
  authorization: {credentials_file: $DIR/token}
  queue_config: {batch_send_deadline: 500ms, min_backoff: 100ms}
`, target.Listener.Addr().String(), srv.URL, RemoteWritePath)
	providertest.StartPrometheus(t, cfg, map[string]string{"token": ingestToken})

	waitFor := func(want float64, within time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		for time.Since(start) < within {
			if s, ok := sink.find("queue_depth"); ok && s.Value == want {
				if s.Labels["queue"] != "orders" || s.Labels["job"] != "worker" || s.Labels["instance"] != target.Listener.Addr().String() {
					t.Fatalf("queue_depth stored with labels %v, want queue=orders, job=worker, instance=%s", s.Labels, target.Listener.Addr())
				}
				if s.Timestamp.IsZero() {
					t.Error("queue_depth stored without the scrape's timestamp")
				}
				return time.Since(start)
			}
			time.Sleep(50 * time.Millisecond)
		}
		s, ok := sink.find("queue_depth")
		t.Fatalf("queue_depth %v not stored within %s (last: %+v, %v)", want, within, s, ok)
		return 0
	}
	waitFor(11, time.Minute) // Prometheus' start and first scrape
	var took []time.Duration
	for i := range 5 {
		v := int64(20 + i)
		depth.Store(v)
		took = append(took, waitFor(float64(v), 30*time.Second))
	}
	if up, ok := sink.find("up"); !ok || up.Value != 1 {
		t.Errorf("up stored as %+v (%v), want 1: every scraped series is written", up, ok)
	}
	t.Logf("target change → stored through Prometheus' scrape (1s) and remote write: %v", took)
}
