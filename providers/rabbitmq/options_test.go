package rabbitmq

import (
	"encoding/json"
	"github.com/metricscale/metricscale/providers/providertest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metricscale/metricscale/providers"
)

// validOptions is a complete config; cases change one thing in it.
const validOptions = `{
  "managementURL": "http://127.0.0.1:15672",
  "amqpURL": "amqp://127.0.0.1:5672",
  "username": "metricscale",
  "password": {"env": "RABBITMQ_PASSWORD"},
  "metrics": [
    {"name": "rabbitmq_orders_total", "queue": "orders"},
    {"name": "rabbitmq_jobs_ready", "queueRegex": "jobs-.*", "vhost": "work", "measure": "ready"},
    {"name": "rabbitmq_orders_ready_amqp", "queue": "orders", "measure": "ready", "source": "amqp"}
  ]
}`

func TestValidate(t *testing.T) {
	t.Parallel()
	metric := func(m string) string {
		return `{"managementURL": "http://r:15672", "amqpURL": "amqp://r", "username": "u", "password": {"file": "/p"}, "metrics": [` + m + `]}`
	}
	amqpOnly := func(m string) string {
		return `{"amqpURL": "amqp://r", "username": "u", "password": {"file": "/p"}, "metrics": [` + m + `]}`
	}
	for _, tc := range []struct {
		name, raw string
		want      string // substring of the error; "" for valid
	}{
		{"valid", validOptions, ""},
		{"amqp only, ready", amqpOnly(`{"name": "m", "queue": "q", "measure": "ready"}`), ""},
		{"user in URL", `{"managementURL": "http://mon@r:15672", "password": {"env": "P"}, "metrics": [{"name": "m", "queue": "q"}]}`, ""},
		{"empty", ``, "options: required"},
		{"unknown field", `{"url": "http://r"}`, `options: unknown field "url"`},
		{"unknown metric field", metric(`{"name": "m", "queue": "q", "depth": 1}`), `unknown field "depth"`},
		{"no URL", `{"username": "u", "password": {"file": "/p"}, "metrics": [{"name": "m", "queue": "q"}]}`, "options.managementURL: required"},
		{"bad scheme", strings.Replace(validOptions, "http://127", "ftp://127", 1), `options.managementURL: scheme "ftp"`},
		{"amqp scheme", strings.Replace(validOptions, "amqp://127", "http://127", 1), `options.amqpURL: scheme "http"`},
		{"no host", strings.Replace(validOptions, "http://127.0.0.1:15672", "http://", 1), "options.managementURL: has no host"},
		{"query", strings.Replace(validOptions, ":15672", ":15672?x=1", 1), "options.managementURL: must not have a query"},
		{"password in management URL", strings.Replace(validOptions, "http://", "http://u:hunter2@", 1), "options.managementURL: has a password"},
		{"password in amqp URL", strings.Replace(validOptions, "amqp://", "amqp://u:hunter2@", 1), "options.amqpURL: has a password"},
		{"vhost in amqp URL", strings.Replace(validOptions, ":5672", ":5672/prod", 1), "options.amqpURL: must not name a vhost"},
		{"user mismatch", strings.Replace(validOptions, "http://", "http://other@", 1), "options.username"},
		{"no username", strings.Replace(validOptions, `"username": "metricscale",`, "", 1), "options.username: required"},
		{"no password", strings.Replace(validOptions, `"password": {"env": "RABBITMQ_PASSWORD"},`, "", 1), "options.password: required"},
		{"password twice", strings.Replace(validOptions, `{"env": "RABBITMQ_PASSWORD"}`, `{"env": "P", "file": "/p"}`, 1), "options.password: set file or env, not both"},
		{"tls without https", strings.Replace(validOptions, `"metrics"`, `"tls": {"caFile": "/ca"}, "metrics"`, 1), "options.tls: set, but"},
		{"tls cert without key", strings.Replace(strings.Replace(validOptions, "http://", "https://", 1), `"metrics"`, `"tls": {"certFile": "/c"}, "metrics"`, 1), "options.tls.certFile"},
		{"negative ttl", strings.Replace(validOptions, `"metrics"`, `"cacheTTL": "-1s", "metrics"`, 1), "options.cacheTTL: must not be negative"},
		{"no metrics", strings.Replace(validOptions, `"metrics"`, `"unused": 1, "x"`, 1), "unknown field"},
		{"empty metrics", metric(``), "options.metrics: required"},
		{"no name", metric(`{"queue": "q"}`), "options.metrics[0].name: required"},
		{"bad name", metric(`{"name": "Bad Name!", "queue": "q"}`), "options.metrics[0].name"},
		{"duplicate name", metric(`{"name": "m", "queue": "q"}, {"name": "m", "queue": "r"}`), `options.metrics[1].name: "m" is already metrics[0]`},
		{"bad namespace", metric(`{"name": "m", "queue": "q", "namespace": "Not_OK"}`), "options.metrics[0].namespace"},
		{"namespace label", metric(`{"name": "m", "queue": "q", "labels": {"namespace": "x"}}`), "options.metrics[0].labels"},
		{"negative metric ttl", metric(`{"name": "m", "queue": "q", "cacheTTL": "-2s"}`), "options.metrics[0].cacheTTL"},
		{"no queue", metric(`{"name": "m"}`), "options.metrics[0].queue: required"},
		{"queue and regex", metric(`{"name": "m", "queue": "q", "queueRegex": "q.*"}`), "options.metrics[0].queueRegex: set queue or queueRegex"},
		{"bad regex", metric(`{"name": "m", "queueRegex": "q("}`), "options.metrics[0].queueRegex: error parsing regexp"},
		{"vhost group", metric(`{"name": "m", "queueRegex": "(?P<vhost>.*)"}`), "options.metrics[0].queueRegex: a group named \"vhost\""},
		{"namespace group and namespace", metric(`{"name": "m", "namespace": "a", "queueRegex": "(?P<namespace>.*)"}`), "options.metrics[0].queueRegex: a group named namespace"},
		{"group and static label", metric(`{"name": "m", "labels": {"team": "x"}, "queueRegex": "(?P<team>.*)"}`), `options.metrics[0].queueRegex: group "team"`},
		{"unknown measure", metric(`{"name": "m", "queue": "q", "measure": "depth"}`), `options.metrics[0].measure: unknown measure "depth"`},
		{"unknown source", metric(`{"name": "m", "queue": "q", "source": "stomp"}`), `options.metrics[0].source: unknown source "stomp"`},
		{"management source without URL", amqpOnly(`{"name": "m", "queue": "q", "measure": "ready", "source": "management"}`), "options.metrics[0].source: management needs options.managementURL"},
		{"amqp source without URL", `{"managementURL": "http://r", "username": "u", "password": {"file": "/p"}, "metrics": [{"name": "m", "queue": "q", "source": "amqp", "measure": "ready"}]}`, "options.metrics[0].source: amqp needs options.amqpURL"},
		{"amqp default total", amqpOnly(`{"name": "m", "queue": "q"}`), `options.metrics[0].measure: "total" needs the management API`},
		{"amqp unacked", amqpOnly(`{"name": "m", "queue": "q", "measure": "unacked"}`), `options.metrics[0].measure: "unacked" needs the management API`},
		{"amqp rate", metric(`{"name": "m", "queue": "q", "measure": "publishRate", "source": "amqp"}`), `options.metrics[0].measure: "publishRate" needs the management API`},
		{"amqp regex", amqpOnly(`{"name": "m", "queueRegex": "q.*", "measure": "ready"}`), "options.metrics[0].queueRegex: needs the management API"},
		{"second metric", metric(`{"name": "a", "queue": "q"}, {"name": "b", "queue": "q", "measure": "nope"}`), "options.metrics[1].measure"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := Factory{}.Validate("options", json.RawMessage(tc.raw))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("want an error with %q, got none", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("error %q shows the password", err)
			}
		})
	}
}

// TestNewDoesNotConnect builds a provider for a broker that is not there:
// building and discovery work, a query is a 503 naming the provider.
func TestNewDoesNotConnect(t *testing.T) {
	t.Parallel()
	pwFile := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pwFile, []byte("hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	raw := strings.NewReplacer("127.0.0.1:15672", "127.0.0.1:1", "127.0.0.1:5672", "127.0.0.1:1",
		`{"env": "RABBITMQ_PASSWORD"}`, `{"file": "`+pwFile+`"}`).Replace(validOptions)
	p, err := Factory{}.New("rabbit", json.RawMessage(raw), providers.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.(*Provider).Close()
	ep := p.(providers.ExternalProvider)
	if got := len(ep.ListAllExternalMetrics()); got != 3 {
		t.Fatalf("discovery lists %d metrics, want 3", got)
	}
	for _, m := range []string{"rabbitmq_orders_total", "rabbitmq_orders_ready_amqp"} {
		_, err = ep.GetExternalMetric(t.Context(), "default", nil, providers.ExternalMetricInfo{Metric: m})
		if providers.ReasonOf(err) != providers.ReasonBackend || !strings.Contains(err.Error(), `"rabbit"`) {
			t.Errorf("%s: want a backend error naming the provider, got %v", m, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: error %q shows the password", m, err)
		}
	}
}

// TestHackConfig validates the local cluster's provider options.
func TestHackConfig(t *testing.T) {
	t.Parallel()
	s, err := decodeOptions("options", providertest.BackendFragment(t, Type, Factory{}))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range s.metrics {
		if !strings.HasPrefix(m.opts.Name, "rabbitmq_") {
			t.Errorf("metric %s does not start with rabbitmq_", m.opts.Name)
		}
		found = found || (m.queue == "e2e-jobs" && m.measure == MeasureTotal && m.source == SourceManagement)
	}
	if !found {
		t.Error("no metric serves the total depth of queue e2e-jobs over the management API")
	}
}
