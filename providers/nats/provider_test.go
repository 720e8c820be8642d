package nats

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/labels"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/metricscale/metricscale/providers"
)

const jobsMetrics = `{"servers": ["nats://127.0.0.1:1"], "metrics": [
  {"name": "nats_backlog", "stream": "JOBS", "consumer": "worker"},
  {"name": "nats_pending", "value": "pending", "stream": "JOBS", "consumer": "worker"},
  {"name": "nats_ack_pending", "value": "ackPending", "stream": "JOBS", "consumer": "worker"},
  {"name": "nats_messages", "value": "messages", "stream": "JOBS"},
  {"name": "nats_all", "value": "backlog", "series": [
    {"stream": "JOBS", "consumer": "worker", "namespace": "a", "labels": {"queue": "jobs"}},
    {"stream": "MAIL", "consumer": "sender", "labels": {"queue": "mail"}}]}]}`

func get(t *testing.T, p *Provider, ns, metric, sel string) (map[string]float64, error) {
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

func TestMetricValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		pending        uint64
		ackPending     int
		msgs           uint64
		backlog, pend  float64
		ackPend, total float64
	}{
		{name: "idle", pending: 0, ackPending: 0, msgs: 0},
		{name: "published, nothing fetched", pending: 10, ackPending: 0, msgs: 10, backlog: 10, pend: 10, total: 10},
		{name: "some in flight", pending: 7, ackPending: 3, msgs: 10, backlog: 10, pend: 7, ackPend: 3, total: 10},
		// acked messages leave the backlog but stay in a limits stream
		{name: "some acked", pending: 4, ackPending: 2, msgs: 10, backlog: 6, pend: 4, ackPend: 2, total: 10},
		{name: "all in flight", pending: 0, ackPending: 5, msgs: 5, backlog: 5, ackPend: 5, total: 5},
		{name: "large", pending: 1 << 40, ackPending: 1000, msgs: 1 << 41, backlog: 1<<40 + 1000, pend: 1 << 40, ackPend: 1000, total: 1 << 41},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeAPI(t)
			f.setConsumer("JOBS", "worker", tc.pending, tc.ackPending)
			f.setConsumer("MAIL", "sender", 1, 1)
			f.setStream("JOBS", tc.msgs)
			p := newTestProvider(t, jobsMetrics, f, nil)
			const one = "consumer=worker,stream=JOBS"
			for metric, want := range map[string]map[string]float64{
				"nats_backlog":     {one: tc.backlog},
				"nats_pending":     {one: tc.pend},
				"nats_ack_pending": {one: tc.ackPend},
				"nats_messages":    {"stream=JOBS": tc.total},
				"nats_all": {
					"consumer=worker,namespace=a,queue=jobs,stream=JOBS": tc.backlog,
					"consumer=sender,queue=mail,stream=MAIL":             2,
				},
			} {
				got, err := get(t, p, "a", metric, "")
				if err != nil {
					t.Errorf("%s: %v", metric, err)
					continue
				}
				if len(got) != len(want) {
					t.Errorf("%s: got %v, want %v", metric, got, want)
				}
				for k, w := range want {
					if g, ok := got[k]; !ok || g != w {
						t.Errorf("%s{%s}: got %v (present %v), want %v; all: %v", metric, k, g, ok, w, got)
					}
				}
			}
		})
	}
}

func TestSelectorsAndNamespaces(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	f.setConsumer("JOBS", "worker", 3, 1)
	f.setConsumer("MAIL", "sender", 5, 0)
	p := newTestProvider(t, jobsMetrics, f, nil)
	for _, tc := range []struct {
		ns, sel string
		want    []string
	}{
		{"a", "", []string{"jobs", "mail"}},
		{"b", "", []string{"mail"}}, // the JOBS series is scoped to namespace a
		{"a", "queue=mail", []string{"mail"}},
		{"a", "consumer in (worker)", []string{"jobs"}},
		{"a", "stream!=JOBS", []string{"mail"}},
		{"b", "queue=jobs", nil},
	} {
		got, err := get(t, p, tc.ns, "nats_all", tc.sel)
		if len(tc.want) == 0 {
			if providers.ReasonOf(err) != providers.ReasonNoValue {
				t.Errorf("ns %s %q: want a 404 (no value), got %v %v", tc.ns, tc.sel, got, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ns %s %q: %v", tc.ns, tc.sel, err)
			continue
		}
		var queues []string
		for k := range got {
			queues = append(queues, labels.Set(mustLabels(t, k))["queue"])
		}
		if strings.Join(sorted(queues), ",") != strings.Join(tc.want, ",") {
			t.Errorf("ns %s %q: got queues %v, want %v", tc.ns, tc.sel, queues, tc.want)
		}
	}
}

func mustLabels(t *testing.T, s string) labels.Set {
	t.Helper()
	l, err := labels.ConvertSelectorToLabelsMap(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func sorted(s []string) []string {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s
}

// TestOneCallPerConsumer: the three metrics of one consumer, queried a
// thousand times each within the TTL, cost one consumer-info call; after
// the TTL, one more.
func TestOneCallPerConsumer(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	f.setConsumer("JOBS", "worker", 3, 1)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	p := newTestProvider(t, jobsMetrics, f, clk)
	var wg sync.WaitGroup
	for i := 0; i < 1000; i++ {
		for _, m := range []string{"nats_backlog", "nats_pending", "nats_ack_pending"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := get(t, p, "a", m, ""); err != nil {
					t.Error(err)
				}
			}()
		}
	}
	wg.Wait()
	if n := f.calls.Load(); n != 1 {
		t.Errorf("3,000 queries of one consumer within the TTL: %d consumer-info calls, want 1", n)
	}
	if n := p.APICalls(); n != 1 {
		t.Errorf("APICalls %d, want 1", n)
	}
	clk.SetTime(clk.Now().Add(3 * time.Second))
	f.setConsumer("JOBS", "worker", 10, 0)
	got, err := get(t, p, "a", "nats_pending", "")
	if err != nil {
		t.Fatal(err)
	}
	if got["consumer=worker,stream=JOBS"] != 10 {
		t.Errorf("after the TTL: got %v, want the new pending 10", got)
	}
	if n := f.calls.Load(); n != 2 {
		t.Errorf("after the TTL: %d calls, want 2", n)
	}
}

func TestBackendErrors(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	f.setConsumer("JOBS", "worker", 3, 1)
	p := newTestProvider(t, jobsMetrics, f, nil)

	// a missing consumer fails the metric (the other series alone would be
	// a wrong sum), naming it
	_, err := get(t, p, "a", "nats_all", "")
	if providers.ReasonOf(err) != providers.ReasonBackend {
		t.Fatalf("missing consumer: want a 503, got %v", err)
	}
	for _, w := range []string{`"nats-test"`, "MAIL", "sender", "not found"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not name %s", err, w)
		}
	}
	_, err = get(t, p, "a", "nats_messages", "")
	if providers.ReasonOf(err) != providers.ReasonBackend || !strings.Contains(err.Error(), "stream JOBS") {
		t.Errorf("missing stream: want a 503 naming it, got %v", err)
	}

	g := newFakeAPI(t)
	g.setErr(errors.New("nats: connection closed"))
	q := newTestProvider(t, jobsMetrics, g, nil)
	if _, err := get(t, q, "a", "nats_backlog", ""); providers.ReasonOf(err) != providers.ReasonBackend || !strings.Contains(err.Error(), "connection closed") {
		t.Errorf("broken backend: want a 503 with its reason, got %v", err)
	}
	if q.Health() == nil {
		t.Error("Health is nil after a failed read")
	}
}

func TestConsumerValueRejectsBadAnswers(t *testing.T) {
	t.Parallel()
	if _, err := consumerValue(ValueBacklog, &jetstream.ConsumerInfo{NumAckPending: -1}); err == nil {
		t.Error("a negative num_ack_pending gave a value")
	}
	if _, err := consumerValue("lag", &jetstream.ConsumerInfo{}); err == nil {
		t.Error("an unknown value kind gave a value")
	}
}

// TestNewDoesNotBlock: with no server, New returns at once, discovery
// lists the metrics, and a query fails fast with a 503 naming the provider.
func TestNewDoesNotBlock(t *testing.T) {
	t.Parallel()
	tokenFile := filepath.Join(t.TempDir(), "token")
	raw := `{"servers": ["nats://127.0.0.1:1"], "token": {"file": "` + tokenFile + `"}, "metrics": [{"name": "nats_backlog", "stream": "S", "consumer": "c"}]}`
	if _, err := (Factory{}).New("down", json.RawMessage(raw), providers.Deps{}); err == nil || !strings.Contains(err.Error(), "options.token.file") {
		t.Errorf("missing token file: want an error naming options.token.file, got %v", err)
	}
	if err := os.WriteFile(tokenFile, []byte("s3cr3t-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	pp, err := Factory{}.New("down", json.RawMessage(raw), providers.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	p := pp.(*Provider)
	defer p.Close()
	if took := time.Since(start); took > time.Second {
		t.Errorf("New took %s with the server down", took)
	}
	if l := p.ListAllExternalMetrics(); len(l) != 1 || l[0].Metric != "nats_backlog" {
		t.Errorf("discovery: %v", l)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start = time.Now()
	_, err = p.GetExternalMetric(ctx, "a", labels.Everything(), providers.ExternalMetricInfo{Metric: "nats_backlog"})
	if providers.ReasonOf(err) != providers.ReasonBackend || !strings.Contains(err.Error(), `"down"`) {
		t.Errorf("server down: want a 503 naming the provider, got %v", err)
	}
	if took := time.Since(start); took > 2500*time.Millisecond {
		t.Errorf("the query took %s, beyond its 2s timeout", took)
	}
	if err != nil && strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("the error echoes the token: %v", err)
	}
	if p.Connected() == nil {
		t.Error("Connected says yes with no server")
	}
}
