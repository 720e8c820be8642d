package rabbitmq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/metricscale/metricscale/providers"
)

// fakeManagement serves files of testdata as the management API's queue
// list of a vhost. queues-work.json has the shape of RabbitMQ 3.10's answer
// to the provider's columns query, with counts and rates set for the
// tests; queues-new.json is what 3.10 answers before its first statistics
// round (a queue without counts).
type fakeManagement struct {
	t        *testing.T
	srv      *httptest.Server
	files    map[string]string // raw vhost path → file
	status   atomic.Int32      // answer with this code when set
	requests atomic.Int32
	password string
}

func newFakeManagement(t *testing.T, password string, files map[string]string) *fakeManagement {
	f := &fakeManagement{t: t, files: files, password: password}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeManagement) serve(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	if c := f.status.Load(); c != 0 {
		http.Error(w, `{"error":"not_authorised","reason":"Login failed"}`, int(c))
		return
	}
	if u, p, ok := r.BasicAuth(); !ok || u != "monitor" || p != f.password {
		http.Error(w, `{"error":"not_authorised"}`, http.StatusUnauthorized)
		return
	}
	if got := r.URL.Query().Get("columns"); got != queueColumns {
		f.t.Errorf("columns=%q, want %q", got, queueColumns)
	}
	file, ok := f.files[r.URL.EscapedPath()]
	if !ok {
		http.Error(w, `{"error":"Object Not Found","reason":"Not Found"}`, http.StatusNotFound)
		return
	}
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		f.t.Error(err)
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// passwordFile writes a password file and returns its path.
func passwordFile(t *testing.T, pw string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(p, []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func mustNew(t *testing.T, raw string, deps providers.Deps) *Provider {
	t.Helper()
	p, err := Factory{}.New("rabbit", json.RawMessage(raw), deps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.(*Provider).Close() })
	return p.(*Provider)
}

// values queries metric and returns its items as labels → value.
func values(t *testing.T, p providers.ExternalProvider, ns, metric, sel string) (map[string]float64, error) {
	t.Helper()
	s, err := labels.Parse(sel)
	if err != nil {
		t.Fatal(err)
	}
	list, err := p.GetExternalMetric(context.Background(), ns, s, providers.ExternalMetricInfo{Metric: metric})
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, it := range list.Items {
		out[labels.Set(it.MetricLabels).String()] = it.Value.AsApproximateFloat64()
	}
	return out, nil
}

func TestManagementMetrics(t *testing.T) {
	t.Parallel()
	const pw = "s3cret-pw"
	f := newFakeManagement(t, pw, map[string]string{"/api/queues/work": "queues-work.json", "/api/queues/%2F": "queues-new.json"})
	clk := clocktesting.NewFakePassiveClock(time.Now())
	raw := fmt.Sprintf(`{"managementURL": %q, "username": "monitor", "password": {"file": %q}, "cacheTTL": "5s", "metrics": [
		{"name": "rabbitmq_a1_total", "queue": "jobs-a.1", "vhost": "work"},
		{"name": "rabbitmq_a1_ready", "queue": "jobs-a.1", "vhost": "work", "measure": "ready"},
		{"name": "rabbitmq_a1_unacked", "queue": "jobs-a.1", "vhost": "work", "measure": "unacked"},
		{"name": "rabbitmq_a1_consumers", "queue": "jobs-a.1", "vhost": "work", "measure": "consumers"},
		{"name": "rabbitmq_a1_publish", "queue": "jobs-a.1", "vhost": "work", "measure": "publishRate"},
		{"name": "rabbitmq_a1_deliver", "queue": "jobs-a.1", "vhost": "work", "measure": "deliverRate"},
		{"name": "rabbitmq_jobs_total", "queueRegex": "jobs-(?P<namespace>[a-z])\\.(?P<shard>[0-9]+)", "vhost": "work"},
		{"name": "rabbitmq_jobs_deliver", "queueRegex": "jobs-.*", "vhost": "work", "measure": "deliverRate", "labels": {"team": "x"}},
		{"name": "rabbitmq_other_ready", "queue": "other", "vhost": "work", "measure": "ready", "namespace": "ops"},
		{"name": "rabbitmq_missing", "queue": "nope", "vhost": "work"},
		{"name": "rabbitmq_new_total", "queue": "jobs-a.1"},
		{"name": "rabbitmq_new_other", "queue": "other"}
	]}`, f.srv.URL+"/", passwordFile(t, pw))
	p := mustNew(t, raw, providers.Deps{Clock: clk})

	a1 := "queue=jobs-a.1,vhost=work"
	for _, tc := range []struct {
		metric, ns, sel string
		want            map[string]float64
	}{
		{"rabbitmq_a1_total", "default", "", map[string]float64{a1: 39}},
		{"rabbitmq_a1_ready", "default", "", map[string]float64{a1: 35}},
		{"rabbitmq_a1_unacked", "default", "", map[string]float64{a1: 4}},
		{"rabbitmq_a1_consumers", "default", "", map[string]float64{a1: 2}},
		{"rabbitmq_a1_publish", "default", "", map[string]float64{a1: 15}},
		{"rabbitmq_a1_deliver", "default", "", map[string]float64{a1: 12.4}},
		// named groups: namespace scopes, shard is a label
		{"rabbitmq_jobs_total", "a", "", map[string]float64{
			"namespace=a,queue=jobs-a.1,shard=1,vhost=work": 39, "namespace=a,queue=jobs-a.2,shard=2,vhost=work": 0}},
		{"rabbitmq_jobs_total", "b", "", map[string]float64{"namespace=b,queue=jobs-b.1,shard=1,vhost=work": 21}},
		{"rabbitmq_jobs_total", "a", "shard=2", map[string]float64{"namespace=a,queue=jobs-a.2,shard=2,vhost=work": 0}},
		// no message_stats: no traffic, a rate of 0
		{"rabbitmq_jobs_deliver", "any", "queue in (jobs-a.1,jobs-b.1)", map[string]float64{
			"queue=jobs-a.1,team=x,vhost=work": 12.4, "queue=jobs-b.1,team=x,vhost=work": 0}},
		{"rabbitmq_other_ready", "ops", "", map[string]float64{"namespace=ops,queue=other,vhost=work": 0}},
		{"rabbitmq_new_other", "default", "", map[string]float64{"queue=other,vhost=/": 3}},
	} {
		got, err := values(t, p, tc.ns, tc.metric, tc.sel)
		if err != nil {
			t.Errorf("%s in %s (%s): %v", tc.metric, tc.ns, tc.sel, err)
			continue
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s in %s (%s): got %v, want %v", tc.metric, tc.ns, tc.sel, got, tc.want)
		}
	}
	// one request per vhost for the twelve metrics, within the TTL
	if n := f.requests.Load(); n != 2 {
		t.Errorf("%d management requests, want 2 (one per vhost)", n)
	}
	if n := p.BrokerCalls(); n != 2 {
		t.Errorf("BrokerCalls %d, want 2", n)
	}

	for _, tc := range []struct {
		metric, ns string
		reason     providers.Reason
		msg        string
	}{
		{"rabbitmq_jobs_total", "c", providers.ReasonNoValue, "rabbitmq_jobs_total"},
		{"rabbitmq_other_ready", "default", providers.ReasonNoValue, "rabbitmq_other_ready"},
		{"rabbitmq_missing", "default", providers.ReasonNoValue, "rabbitmq_missing"},
		// no counts yet: a 503, never a 0
		{"rabbitmq_new_total", "default", providers.ReasonBackend, `queue "jobs-a.1" in vhost "/": the management API reports no messages_ready`},
	} {
		_, err := values(t, p, tc.ns, tc.metric, "")
		if providers.ReasonOf(err) != tc.reason || err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s in %s: want %s naming %q, got %v", tc.metric, tc.ns, tc.reason, tc.msg, err)
		}
	}

	// past the TTL, the broker is asked again; a refusal is a 503 that
	// names the provider and never shows the password
	clk.SetTime(clk.Now().Add(6 * time.Second))
	f.status.Store(http.StatusUnauthorized)
	_, err := values(t, p, "default", "rabbitmq_a1_total", "")
	if providers.ReasonOf(err) != providers.ReasonBackend || !strings.Contains(err.Error(), `"rabbit"`) || !strings.Contains(err.Error(), `user "monitor" was refused`) {
		t.Errorf("refused: want a 503 naming the provider and the user, got %v", err)
	}
	if err != nil && strings.Contains(err.Error(), pw) {
		t.Errorf("error %q shows the password", err)
	}
	if p.Health() == nil {
		t.Error("Health is nil after a failed read")
	}
}

func TestManagementErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		status int
		files  map[string]string
		want   string
	}{
		{"no such vhost", 0, map[string]string{}, `no such vhost, or the management plugin is not at`},
		{"server error", http.StatusInternalServerError, nil, "500 Internal Server Error"},
		{"bad json", 0, map[string]string{"/api/queues/%2F": "../options.go"}, "decoding the queues"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeManagement(t, "pw", tc.files)
			f.status.Store(int32(tc.status))
			p := mustNew(t, fmt.Sprintf(`{"managementURL": %q, "username": "monitor", "password": {"file": %q}, "metrics": [{"name": "m", "queue": "q"}]}`,
				f.srv.URL, passwordFile(t, "pw")), providers.Deps{})
			_, err := values(t, p, "default", "m", "")
			if providers.ReasonOf(err) != providers.ReasonBackend || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("want a 503 with %q, got %v", tc.want, err)
			}
		})
	}
}

func TestDuplicateLabels(t *testing.T) {
	t.Parallel()
	s, err := decodeOptions("options", json.RawMessage(`{"managementURL": "http://r", "username": "u", "password": {"env": "X"},
		"metrics": [{"name": "m", "queueRegex": "(?P<queue>jobs)-.*", "vhost": "work"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	one := 1.0
	_, err = seriesOf(s.metrics[0], []queueStats{
		{Name: "jobs-1", Vhost: "work", Ready: &one, Unacked: &one},
		{Name: "jobs-2", Vhost: "work", Ready: &one, Unacked: &one},
	})
	if err == nil || !strings.Contains(err.Error(), `queues "jobs-1" and "jobs-2"`) {
		t.Errorf("want an error naming both queues, got %v", err)
	}
}

// fakeAMQP answers passive declares from a map.
type fakeAMQP struct {
	mu     sync.Mutex
	queues map[string]amqpQueue // vhost/queue
	err    error
	calls  int
}

func (f *fakeAMQP) Inspect(ctx context.Context, vhost, queue string) (amqpQueue, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return amqpQueue{}, f.err
	}
	q, ok := f.queues[vhost+"/"+queue]
	if !ok {
		return amqpQueue{}, errNoQueue
	}
	return q, nil
}

func TestAMQPMetrics(t *testing.T) {
	t.Parallel()
	s, err := decodeOptions("options", json.RawMessage(`{"amqpURL": "amqp://r", "username": "u", "password": {"env": "X"}, "cacheTTL": "0s", "metrics": [
		{"name": "ready", "queue": "orders", "measure": "ready"},
		{"name": "consumers", "queue": "orders", "measure": "consumers"},
		{"name": "missing", "queue": "nope", "vhost": "work", "measure": "ready"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeAMQP{queues: map[string]amqpQueue{"//orders": {Ready: 7, Consumers: 3}}}
	p, err := newProvider("rabbit", s, providers.Deps{}, nil, f)
	if err != nil {
		t.Fatal(err)
	}
	for metric, want := range map[string]float64{"ready": 7, "consumers": 3} {
		got, err := values(t, p, "default", metric, "")
		if err != nil || got["queue=orders,vhost=/"] != want || len(got) != 1 {
			t.Errorf("%s: got %v (%v), want queue=orders,vhost=/ → %v", metric, got, err, want)
		}
	}
	if _, err := values(t, p, "default", "missing", ""); providers.ReasonOf(err) != providers.ReasonNoValue {
		t.Errorf("missing queue: want a 404, got %v", err)
	}
	f.mu.Lock()
	f.err = errors.New("amqp: connecting: connection refused")
	f.mu.Unlock()
	if _, err := values(t, p, "default", "ready", ""); providers.ReasonOf(err) != providers.ReasonBackend || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("broker down: want a 503 with the cause, got %v", err)
	}
}

// TestManagementBadValues: a count the management API reports below zero,
// and a total that overflows float64, are 503s naming the provider and the
// series, never served (-5 would read as "no load").
func TestManagementBadValues(t *testing.T) {
	t.Parallel()
	const pw = "pw"
	f := newFakeManagement(t, pw, map[string]string{"/api/queues/bad": "queues-bad.json"})
	raw := fmt.Sprintf(`{"managementURL": %q, "username": "monitor", "password": {"file": %q}, "metrics": [
		{"name": "neg_ready", "queue": "negative", "vhost": "bad", "measure": "ready"},
		{"name": "neg_consumers", "queue": "negative", "vhost": "bad", "measure": "consumers"},
		{"name": "huge_total", "queue": "huge", "vhost": "bad"},
		{"name": "huge_ready", "queue": "huge", "vhost": "bad", "measure": "ready"}
	]}`, f.srv.URL+"/", passwordFile(t, pw))
	p := mustNew(t, raw, providers.Deps{})
	for _, tc := range []struct {
		metric string
		want   []string // in the 503; nil when served
	}{
		{"neg_ready", []string{`"rabbit"`, "neg_ready", `queue=negative,vhost=bad`, "-5", "negative"}},
		{"neg_consumers", nil},
		{"huge_total", []string{`"rabbit"`, "huge_total", `queue=huge,vhost=bad`, "+Inf", "not finite"}},
		// finite, beyond the milli range: saturated, a very large backlog
		{"huge_ready", nil},
	} {
		got, err := values(t, p, "default", tc.metric, "")
		if tc.want == nil {
			if err != nil {
				t.Errorf("%s: %v", tc.metric, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: served %v, want a 503", tc.metric, got)
			continue
		}
		if providers.ReasonOf(err) != providers.ReasonBadValue {
			t.Errorf("%s: reason %s, want %s (%v)", tc.metric, providers.ReasonOf(err), providers.ReasonBadValue, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not contain %q", tc.metric, err, w)
			}
		}
	}
}
