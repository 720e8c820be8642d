package kafka

import (
	"encoding/json"
	"github.com/metricscale/metricscale/providers/providertest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metricscale/metricscale/providers"
)

const validOptions = `{"brokers": ["127.0.0.1:9092"], "metrics": [{"name": "kafka_lag", "group": "g", "topics": ["jobs"]}]}`

// withChange returns validOptions with one edit applied to its decoded form.
func withChange(t *testing.T, change func(o map[string]any, m map[string]any)) string {
	t.Helper()
	var o map[string]any
	if err := json.Unmarshal([]byte(validOptions), &o); err != nil {
		t.Fatal(err)
	}
	change(o, o["metrics"].([]any)[0].(map[string]any))
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestValidate(t *testing.T) {
	t.Parallel()
	sasl := func(mech, user string, pw any) func(o, m map[string]any) {
		return func(o, m map[string]any) {
			o["sasl"] = map[string]any{"mechanism": mech, "username": user, "password": pw}
		}
	}
	for _, tc := range []struct {
		name   string
		change func(o, m map[string]any)
		raw    string // instead of change
		field  string // "" means valid
	}{
		{name: "valid", change: func(o, m map[string]any) {}},
		{name: "valid regex, captures, earliest, per partition", change: func(o, m map[string]any) {
			delete(m, "topics")
			m["topicRegex"] = `(?P<namespace>[a-z-]+)\.jobs`
			m["offsetResetPolicy"] = "earliest"
			m["perPartition"] = true
		}},
		{name: "valid SASL and TLS", change: func(o, m map[string]any) {
			sasl("SCRAM-SHA-512", "u", map[string]any{"env": "KAFKA_PW"})(o, m)
			o["tls"] = map[string]any{"caFile": "/ca.pem"}
		}},
		{name: "empty options", raw: ``, field: "options: required"},
		{name: "unknown field", raw: `{"brokers": ["a:1"], "bogus": 1, "metrics": []}`, field: `options: unknown field "bogus"`},
		{name: "no brokers", change: func(o, m map[string]any) { delete(o, "brokers") }, field: "options.brokers: required"},
		{name: "broker without port", change: func(o, m map[string]any) { o["brokers"] = []string{"kafka"} }, field: "options.brokers[0]:"},
		{name: "broker bad port", change: func(o, m map[string]any) { o["brokers"] = []string{"a:1", "kafka:0"} }, field: "options.brokers[1]:"},
		{name: "negative cacheTTL", change: func(o, m map[string]any) { o["cacheTTL"] = "-1s" }, field: "options.cacheTTL:"},
		{name: "sasl mechanism", change: sasl("GSSAPI", "u", map[string]any{"env": "X"}), field: "options.sasl.mechanism:"},
		{name: "sasl no mechanism", change: sasl("", "u", map[string]any{"env": "X"}), field: "options.sasl.mechanism: required"},
		{name: "sasl no username", change: sasl("PLAIN", "", map[string]any{"env": "X"}), field: "options.sasl.username: required"},
		{name: "sasl no password", change: sasl("PLAIN", "u", nil), field: "options.sasl.password: required"},
		{name: "sasl password twice", change: sasl("PLAIN", "u", map[string]any{"env": "X", "file": "/f"}), field: "options.sasl.password: set file or env"},
		{name: "sasl password inline", change: sasl("PLAIN", "u", "hunter2"), field: "options.sasl.password: an inline secret is refused"},
		{name: "tls cert without key", change: func(o, m map[string]any) { o["tls"] = map[string]any{"certFile": "/c"} }, field: "options.tls.certFile:"},
		{name: "no metrics", change: func(o, m map[string]any) { o["metrics"] = []any{} }, field: "options.metrics: required"},
		{name: "metric name", change: func(o, m map[string]any) { m["name"] = "" }, field: "options.metrics[0].name: required"},
		{name: "metric name twice", change: func(o, m map[string]any) { o["metrics"] = []any{m, m} }, field: "options.metrics[1].name:"},
		{name: "metric namespace", change: func(o, m map[string]any) { m["namespace"] = "Not_OK" }, field: "options.metrics[0].namespace:"},
		{name: "no group", change: func(o, m map[string]any) { delete(m, "group") }, field: "options.metrics[0].group: required"},
		{name: "no topics", change: func(o, m map[string]any) { delete(m, "topics") }, field: "options.metrics[0].topics: required"},
		{name: "topics and regex", change: func(o, m map[string]any) { m["topicRegex"] = "x" }, field: "options.metrics[0].topics: set topics or topicRegex"},
		{name: "bad topic name", change: func(o, m map[string]any) { m["topics"] = []string{"ok", "not ok"} }, field: "options.metrics[0].topics[1]:"},
		{name: "topic twice", change: func(o, m map[string]any) { m["topics"] = []string{"a", "a"} }, field: "options.metrics[0].topics[1]:"},
		{name: "bad regex", change: func(o, m map[string]any) { delete(m, "topics"); m["topicRegex"] = "(" }, field: "options.metrics[0].topicRegex:"},
		{name: "regex capture of a reserved label", change: func(o, m map[string]any) {
			delete(m, "topics")
			m["topicRegex"] = "(?P<topic>.*)"
		}, field: "options.metrics[0].topicRegex: capture group \"topic\""},
		{name: "regex namespace and namespace", change: func(o, m map[string]any) {
			delete(m, "topics")
			m["topicRegex"] = "(?P<namespace>.*)"
			m["namespace"] = "ns"
		}, field: "options.metrics[0].topicRegex: capture group \"namespace\""},
		{name: "reset policy", change: func(o, m map[string]any) { m["offsetResetPolicy"] = "none" }, field: "options.metrics[0].offsetResetPolicy:"},
		{name: "reserved static label", change: func(o, m map[string]any) { m["labels"] = map[string]string{"group": "x"} }, field: "options.metrics[0].labels:"},
		{name: "metric cacheTTL", change: func(o, m map[string]any) { m["cacheTTL"] = "-2s" }, field: "options.metrics[0].cacheTTL:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			raw := tc.raw
			if tc.change != nil {
				raw = withChange(t, tc.change)
			}
			err := Factory{}.Validate("options", json.RawMessage(raw))
			if tc.field == "" {
				if err != nil {
					t.Fatalf("%s: %v", raw, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("%s: error %v, want one containing %q", raw, err, tc.field)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error echoes the password: %v", err)
			}
		})
	}
}

// TestNewDoesNotConnect: New builds a provider against brokers that do not
// exist, and discovery lists its metrics.
func TestNewDoesNotConnect(t *testing.T) {
	t.Parallel()
	p, err := Factory{}.New("kafka", json.RawMessage(`{"brokers": ["127.0.0.1:1"], "metrics": [
		{"name": "kafka_a", "group": "g", "topics": ["a"]}, {"name": "kafka_b", "group": "g", "topicRegex": "b.*"}]}`), providers.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	kp := p.(*Provider)
	defer kp.Close()
	got := kp.ListAllExternalMetrics()
	if len(got) != 2 || got[0].Metric != "kafka_a" || got[1].Metric != "kafka_b" {
		t.Errorf("discovery: %v", got)
	}
	if kp.BackendCalls() != 0 {
		t.Errorf("discovery made %d backend calls", kp.BackendCalls())
	}
}

// TestNewSecret: New reads the SASL password and names the field when it
// cannot, never the value.
func TestNewSecret(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := func(file string) json.RawMessage {
		return json.RawMessage(`{"brokers": ["127.0.0.1:1"], "sasl": {"mechanism": "SCRAM-SHA-256", "username": "u",
			"password": {"file": "` + file + `"}}, "metrics": [{"name": "kafka_a", "group": "g", "topics": ["a"]}]}`)
	}
	p, err := Factory{}.New("kafka", opts(pw), providers.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	p.(*Provider).Close()
	_, err = Factory{}.New("kafka", opts(filepath.Join(dir, "missing")), providers.Deps{})
	if err == nil || !strings.Contains(err.Error(), "options.sasl.password.file:") {
		t.Errorf("error %v, want one naming options.sasl.password.file", err)
	}
}

// TestBackendsConfig loads hack/backends/kafka.yaml, the local cluster's
// adapter config fragment, and validates its provider's options.
func TestBackendsConfig(t *testing.T) {
	t.Parallel()
	raw := providertest.BackendFragment(t, Type, Factory{})
	o, err := decodeOptions("providers[0].options", raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Brokers) != 1 || o.Brokers[0] != "127.0.0.1:19092" {
		t.Errorf("brokers %v, want [127.0.0.1:19092]", o.Brokers)
	}
	found := false
	for i, m := range o.Metrics {
		if !strings.HasPrefix(m.Name, "kafka_") {
			t.Errorf("metrics[%d]: %q does not start with kafka_ (the route)", i, m.Name)
		}
		found = found || m.Group == "e2e-workers" && len(m.Topics) == 1 && m.Topics[0] == "e2e-jobs"
	}
	if !found {
		t.Error("no metric reads group e2e-workers on topic e2e-jobs")
	}
}
