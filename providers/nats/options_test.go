package nats

import (
	"encoding/json"
	"github.com/metricscale/metricscale/providers/providertest"
	"strings"
	"testing"

	"github.com/metricscale/metricscale/providers"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	// each case changes one thing in a valid config
	const base = `"servers": ["nats://127.0.0.1:4222"]`
	const metric = `{"name": "nats_jobs_backlog", "stream": "JOBS", "consumer": "worker"}`
	opts := func(parts ...string) string { return "{" + strings.Join(parts, ",") + "}" }
	metrics := func(ms ...string) string { return `"metrics": [` + strings.Join(ms, ",") + `]` }
	for _, tc := range []struct {
		name string
		raw  string
		want []string // substrings of the error; none: valid
	}{
		{"minimal", opts(base, metrics(metric)), nil},
		{"everything", opts(`"servers": ["nats://a:4222", "tls://b:4222", "wss://c:443"]`,
			`"user": {"env": "NATS_USER"}`, `"password": {"file": "/secrets/pass"}`,
			`"tls": {"caFile": "/ca.pem"}`, `"domain": "hub"`, `"cacheTTL": "5s"`,
			metrics(
				`{"name": "nats_pending", "value": "pending", "stream": "JOBS", "consumer": "worker", "namespace": "team-a", "labels": {"tier": "batch"}, "cacheTTL": "1s"}`,
				`{"name": "nats_ack", "value": "ackPending", "stream": "JOBS", "consumer": "worker"}`,
				`{"name": "nats_msgs", "value": "messages", "stream": "JOBS"}`,
				`{"name": "nats_backlog", "series": [{"stream": "A", "consumer": "w", "namespace": "a", "labels": {"queue": "a"}}, {"stream": "B", "consumer": "w"}]}`,
			)), nil},
		{"token", opts(base, `"token": {"env": "T"}`, metrics(metric)), nil},
		{"creds", opts(base, `"credsFile": "/x.creds"`, metrics(metric)), nil},

		{"empty", ``, []string{"options: required"}},
		{"unknown field", opts(base, `"url": "nats://x"`, metrics(metric)), []string{"options:", `unknown field "url"`}},
		{"no servers", opts(metrics(metric)), []string{"options.servers: required"}},
		{"bad scheme", opts(`"servers": ["http://x:4222"]`, metrics(metric)), []string{"options.servers[0]", `scheme "http"`}},
		{"no host", opts(`"servers": ["nats://:4222"]`, metrics(metric)), []string{"options.servers[0]", "no host"}},
		{"credentials in URL", opts(`"servers": ["nats://me:hunter2@x:4222"]`, metrics(metric)), []string{"options.servers[0]", "credentials do not go in the URL"}},
		{"user without password", opts(base, `"user": {"env": "U"}`, metrics(metric)), []string{"options.password", "go together"}},
		{"password without user", opts(base, `"password": {"env": "P"}`, metrics(metric)), []string{"options.password", "go together"}},
		{"user and token", opts(base, `"user": {"env": "U"}`, `"password": {"env": "P"}`, `"token": {"env": "T"}`, metrics(metric)), []string{"options.token", "not both"}},
		{"token and creds", opts(base, `"token": {"env": "T"}`, `"credsFile": "/x"`, metrics(metric)), []string{"options.credsFile"}},
		{"secret file and env", opts(base, `"token": {"env": "T", "file": "/t"}`, metrics(metric)), []string{"options.token", "not both"}},
		{"tls cert without key", opts(base, `"tls": {"certFile": "/c.pem"}`, metrics(metric)), []string{"options.tls.certFile"}},
		{"bad domain", opts(base, `"domain": "a.b"`, metrics(metric)), []string{"options.domain"}},
		{"negative cacheTTL", opts(base, `"cacheTTL": "-1s"`, metrics(metric)), []string{"options.cacheTTL"}},
		{"no metrics", opts(base), []string{"options.metrics: required"}},
		{"metric without name", opts(base, metrics(`{"stream": "S", "consumer": "c"}`)), []string{"options.metrics[0].name: required"}},
		{"bad metric name", opts(base, metrics(`{"name": "Bad Name", "stream": "S", "consumer": "c"}`)), []string{"options.metrics[0].name"}},
		{"duplicate metric", opts(base, metrics(metric, metric)), []string{"options.metrics[1].name", "already configured"}},
		{"unknown value", opts(base, metrics(`{"name": "n", "value": "lag", "stream": "S", "consumer": "c"}`)), []string{"options.metrics[0].value", `"lag"`}},
		{"no stream", opts(base, metrics(`{"name": "n", "consumer": "c"}`)), []string{"options.metrics[0].stream: required"}},
		{"no consumer", opts(base, metrics(`{"name": "n", "stream": "S"}`)), []string{"options.metrics[0].consumer: required"}},
		{"consumer with messages", opts(base, metrics(`{"name": "n", "value": "messages", "stream": "S", "consumer": "c"}`)), []string{"options.metrics[0].consumer", "leave consumer out"}},
		{"stream with a dot", opts(base, metrics(`{"name": "n", "stream": "a.b", "consumer": "c"}`)), []string{"options.metrics[0].stream", "not a valid stream name"}},
		{"consumer with a wildcard", opts(base, metrics(`{"name": "n", "stream": "S", "consumer": "c*"}`)), []string{"options.metrics[0].consumer", "not a valid consumer name"}},
		{"bad namespace", opts(base, metrics(`{"name": "n", "stream": "S", "consumer": "c", "namespace": "Not_A_Namespace"}`)), []string{"options.metrics[0].namespace"}},
		{"label overrides consumer", opts(base, metrics(`{"name": "n", "stream": "S", "consumer": "c", "labels": {"consumer": "x"}}`)), []string{"options.metrics[0].labels", `"consumer"`}},
		{"negative metric cacheTTL", opts(base, metrics(`{"name": "n", "stream": "S", "consumer": "c", "cacheTTL": "-2s"}`)), []string{"options.metrics[0].cacheTTL"}},
		{"series and stream", opts(base, metrics(`{"name": "n", "stream": "S", "series": [{"stream": "S", "consumer": "c"}]}`)), []string{"options.metrics[0].series", "not both"}},
		{"series without consumer", opts(base, metrics(`{"name": "n", "series": [{"stream": "S", "consumer": "c"}, {"stream": "S"}]}`)), []string{"options.metrics[0].series[1].consumer: required"}},
		{"duplicate series", opts(base, metrics(`{"name": "n", "series": [{"stream": "S", "consumer": "c"}, {"stream": "S", "consumer": "c"}]}`)), []string{"options.metrics[0].series[1]", "same stream and consumer"}},
		{"series namespace label", opts(base, metrics(`{"name": "n", "series": [{"stream": "S", "consumer": "c", "labels": {"namespace": "a"}}]}`)), []string{"options.metrics[0].series[0].labels", "use namespace"}},
		{"series bad namespace", opts(base, metrics(`{"name": "n", "series": [{"stream": "S", "consumer": "c", "namespace": "A B"}]}`)), []string{"options.metrics[0].series[0].namespace"}},
		{"series and metric namespace", opts(base, metrics(`{"name": "n", "namespace": "a", "series": [{"stream": "S", "consumer": "c", "namespace": "b"}]}`)), []string{"options.metrics[0].series[0].namespace", "already sets"}},
		{"series bad label value", opts(base, metrics(`{"name": "n", "series": [{"stream": "S", "consumer": "c", "labels": {"q": "a b"}}]}`)), []string{"options.metrics[0].series[0].labels"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := Factory{}.Validate("options", json.RawMessage(tc.raw))
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want an error containing %q, got none", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q echoes the password", err)
			}
			// New refuses what Validate refuses, before connecting
			if p, err := (Factory{}).New("n", json.RawMessage(tc.raw), providers.Deps{}); err == nil {
				_ = p.(*Provider).Close()
				t.Error("New accepted options Validate refused")
			}
		})
	}
}

// TestBackendsConfig checks hack/backends/nats.yaml, the local cluster's
// fragment, through the adapter's own config parser and Factory.Validate.
func TestBackendsConfig(t *testing.T) {
	t.Parallel()
	o, err := decodeOptions("options", providertest.BackendFragment(t, Type, Factory{}))
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Servers) != 1 || o.Servers[0] != "nats://127.0.0.1:14222" {
		t.Errorf("servers %v, want nats://127.0.0.1:14222 (hack/backends/nats.go)", o.Servers)
	}
	backlog := false
	for _, m := range o.Metrics {
		if !strings.HasPrefix(m.Name, "nats_") {
			t.Errorf("metric %s: every name must start with nats_ (the route)", m.Name)
		}
		if m.value() == ValueBacklog && m.Stream == "E2E" && m.Consumer == "e2e-jobs" {
			backlog = true
		}
	}
	if !backlog {
		t.Error("no metric serves the backlog of stream E2E consumer e2e-jobs")
	}
}
