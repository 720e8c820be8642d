package postgresql

import (
	"encoding/json"
	"github.com/metricscale/metricscale/providers/providertest"
	"strings"
	"testing"
	"time"
)

const goodMetric = `{"name": "postgresql_jobs_pending", "query": "SELECT queue, count(*) AS value FROM jobs WHERE state = 'pending' GROUP BY queue"}`

func opts(extra string, metrics ...string) string {
	if len(metrics) == 0 {
		metrics = []string{goodMetric}
	}
	o := `{"host": "127.0.0.1", "database": "app", "user": "metricscale", "metrics": [` + strings.Join(metrics, ",") + `]`
	if extra != "" {
		o += ", " + extra
	}
	return o + "}"
}

func metric(query string, extra ...string) string {
	b, _ := json.Marshal(query)
	m := `{"name": "postgresql_m", "query": ` + string(b)
	for _, e := range extra {
		m += ", " + e
	}
	return m + "}"
}

func TestValidateNamesTheField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, opts, field, msg string
	}{
		{"empty", ``, "providers[0].options", "required"},
		{"unknown field", opts(`"hots": "x"`), "providers[0].options", "unknown field"},
		{"no host", `{"database": "a", "user": "u", "metrics": [` + goodMetric + `]}`, ".host", "required"},
		{"host list", opts(`"host": "a,b"`), ".host", "one host"},
		{"bad port", opts(`"port": 70000`), ".port", "between 1 and 65535"},
		{"no database", `{"host": "h", "user": "u", "metrics": [` + goodMetric + `]}`, ".database", "required"},
		{"no user", `{"host": "h", "database": "a", "metrics": [` + goodMetric + `]}`, ".user", "required"},
		{"password twice", opts(`"password": {"file": "/p", "env": "P"}`), ".password", "not both"},
		{"ssl mode", opts(`"sslMode": "verify"`), ".sslMode", "must be one of"},
		{"tls without ssl", opts(`"sslMode": "disable", "tls": {"caFile": "/ca"}`), ".tls", "disable"},
		{"cert without key", opts(`"tls": {"certFile": "/c"}`), ".tls.certFile", "go together"},
		{"insecure", opts(`"tls": {"insecureSkipVerify": true}`), ".tls.insecureSkipVerify", "require"},
		{"statement timeout 0", opts(`"statementTimeout": "0s"`), ".statementTimeout", "at least 1ms"},
		{"statement timeout huge", opts(`"statementTimeout": "2m"`), ".statementTimeout", "at most"},
		{"connect timeout", opts(`"connectTimeout": "-1s"`), ".connectTimeout", "positive"},
		{"cache ttl", opts(`"cacheTTL": "-1s"`), ".cacheTTL", "negative"},
		{"max conns", opts(`"maxConns": 100`), ".maxConns", "between 1 and"},
		{"no metrics", `{"host": "h", "database": "a", "user": "u", "metrics": []}`, ".metrics", "required"},
		{"no name", opts("", `{"query": "SELECT 1 AS value"}`), ".metrics[0].name", "required"},
		{"bad name", opts("", `{"name": "Bad Name!", "query": "SELECT 1 AS value"}`), ".metrics[0].name", "not a valid metric name"},
		{"duplicate name", opts("", goodMetric, goodMetric), ".metrics[1].name", "also metrics[0]"},
		{"bad namespace", opts("", metric("SELECT 1 AS value", `"namespace": "Not_OK"`)), ".metrics[0].namespace", ""},
		{"namespace label", opts("", metric("SELECT 1 AS value", `"labels": {"namespace": "x"}`)), ".metrics[0].labels", "use namespace"},
		{"metric ttl", opts("", metric("SELECT 1 AS value", `"cacheTTL": "-2s"`)), ".metrics[0].cacheTTL", "negative"},
		{"no query", opts("", `{"name": "postgresql_m"}`), ".metrics[0].query", "required"},
		{"comment only", opts("", metric("-- nothing")), ".metrics[0].query", "no statement"},
		{"two statements", opts("", metric("SELECT 1 AS value; DELETE FROM jobs")), ".metrics[0].query", "more than one statement"},
		{"a write", opts("", metric("DELETE FROM jobs RETURNING 1 AS value")), ".metrics[0].query", "read-only"},
		{"parameter", opts("", metric("SELECT count(*) AS value FROM jobs WHERE queue = $1")), ".metrics[0].query", "no parameters"},
		{"unterminated string", opts("", metric("SELECT 'x AS value")), ".metrics[0].query", "unterminated"},
		{"unterminated comment", opts("", metric("SELECT 1 AS value /* x")), ".metrics[0].query", "unterminated"},
		{"value column not named", opts("", metric("SELECT queue, count(*) AS n FROM jobs GROUP BY queue")), ".metrics[0].valueColumn", `no column "value"`},
		{"count star is no column list", opts("", metric("SELECT count(*) FROM jobs")), ".metrics[0].valueColumn", `no column "value"`},
		{"value only in a string", opts("", metric("SELECT count(*) AS n FROM jobs WHERE state = 'value'")), ".metrics[0].valueColumn", `no column`},
		{"mixed case unquoted", opts("", metric("SELECT count(*) AS Depth FROM jobs", `"valueColumn": "Depth"`)), ".metrics[0].valueColumn", "lower-cases"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := Factory{}.Validate("providers[0].options", json.RawMessage(tc.opts))
			if err == nil {
				t.Fatalf("Validate(%s) = nil, want an error naming %s", tc.opts, tc.field)
			}
			if !strings.Contains(err.Error(), "providers[0].options"+strings.TrimPrefix(tc.field, "providers[0].options")+":") {
				t.Errorf("error %q does not name the field %s", err, tc.field)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not say %q", err, tc.msg)
			}
		})
	}
}

func TestValidateAccepts(t *testing.T) {
	t.Parallel()
	for name, o := range map[string]string{
		"minimal":           opts(""),
		"everything":        opts(`"port": 6432, "password": {"file": "/run/secrets/pw"}, "sslMode": "verify-ca", "tls": {"caFile": "/ca.pem", "serverName": "db"}, "connectTimeout": "1s", "statementTimeout": "500ms", "maxConns": 4, "cacheTTL": "5s"`),
		"unix socket":       `{"host": "/var/run/postgresql", "database": "a", "user": "u", "metrics": [` + goodMetric + `]}`,
		"select star":       opts("", metric("SELECT * FROM queue_depths")),
		"qualified star":    opts("", metric("SELECT d.* FROM queue_depths d")),
		"quoted column":     opts("", metric(`SELECT count(*) AS "Depth" FROM jobs`, `"valueColumn": "Depth"`)),
		"custom column":     opts("", metric(`SELECT queue, count(*) AS n FROM jobs GROUP BY 1`, `"valueColumn": "n"`, `"nullAs": 0`, `"emptyAs": 0`)),
		"with cte":          opts("", metric("WITH p AS (SELECT * FROM jobs WHERE state = 'pending') SELECT queue, count(*) AS value FROM p GROUP BY queue")),
		"trailing ;":        opts("", metric("SELECT 1 AS value; -- done")),
		"; in a string":     opts("", metric("SELECT count(*) AS value FROM jobs WHERE state <> ';'")),
		"; in dollar quote": opts("", metric("SELECT $x$a;b$x$ AS queue, 1 AS value")),
		"; in E string":     opts("", metric(`SELECT E'a\';b' AS queue, 1 AS value`)),
		"parenthesized":     opts("", metric("(SELECT 1 AS value)")),
		"metric labels":     opts("", metric("SELECT 1 AS value", `"namespace": "team-a"`, `"labels": {"db": "main"}`, `"cacheTTL": "1s"`)),
	} {
		if err := (Factory{}).Validate("o", json.RawMessage(o)); err != nil {
			t.Errorf("%s: Validate(%s): %v", name, o, err)
		}
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	s, err := decodeOptions("o", json.RawMessage(opts("", metric("SELECT 1 AS value;"))))
	if err != nil {
		t.Fatal(err)
	}
	if s.Port != DefaultPort || s.sslMode != "prefer" || s.statementTimeout != DefaultStatementTimeout ||
		s.connectTimeout != DefaultConnectTimeout || s.maxConns != DefaultMaxConns || s.cacheTTL != 2*time.Second {
		t.Errorf("defaults: %+v", s)
	}
	if m := s.metrics[0]; m.valueColumn != "value" || m.query != "SELECT 1 AS value" {
		t.Errorf("metric: value column %q, query %q (want the trailing ; dropped)", m.valueColumn, m.query)
	}
	s, err = decodeOptions("o", json.RawMessage(opts(`"tls": {"caFile": "/ca"}`)))
	if err != nil {
		t.Fatal(err)
	}
	if s.sslMode != "verify-full" {
		t.Errorf("sslMode with tls options: %q, want verify-full", s.sslMode)
	}
}

// TestHackConfig loads hack/backends/postgresql.yaml, the local cluster's
// config fragment, through Validate.
func TestHackConfig(t *testing.T) {
	t.Parallel()
	s, err := decodeOptions("providers[0].options", providertest.BackendFragment(t, Type, Factory{}))
	if err != nil {
		t.Fatal(err)
	}
	const timeout = 2 * time.Second // BackendFragment's
	if s.statementTimeout >= timeout {
		t.Errorf("statementTimeout %s is not below the provider timeout %s", s.statementTimeout, timeout)
	}
	if s.Port != 15432 || s.Host != "127.0.0.1" {
		t.Errorf("want 127.0.0.1:15432 (hack/backends/postgresql.go), got %s:%d", s.Host, s.Port)
	}
	for _, m := range s.metrics {
		if !strings.HasPrefix(m.Name, "postgresql_") {
			t.Errorf("metric %s: every name must start with postgresql_ (the route)", m.Name)
		}
	}
}
