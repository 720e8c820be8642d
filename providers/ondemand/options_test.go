package ondemand

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMetricOptionsValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		m    MetricOptions
		want string // "" means valid
	}{
		{"valid", MetricOptions{Name: "redis_jobs", Namespace: "team-a", Labels: map[string]string{"tier": "gold"}}, ""},
		{"no name", MetricOptions{}, "m.name: required"},
		{"bad name", MetricOptions{Name: "jobs/len"}, "m.name: \"jobs/len\" is not a valid metric name"},
		{"bad namespace", MetricOptions{Name: "a", Namespace: "Team_A"}, "m.namespace: \"Team_A\""},
		{"namespace label", MetricOptions{Name: "a", Labels: map[string]string{"namespace": "x"}}, "m.labels: use namespace"},
		{"bad label value", MetricOptions{Name: "a", Labels: map[string]string{"vhost": "/"}}, "m.labels: label vhost value \"/\""},
		{"negative ttl", MetricOptions{Name: "a", CacheTTL: &metav1.Duration{Duration: -time.Second}}, "m.cacheTTL: must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var errs Errors
			tc.m.Validate("m", &errs)
			err := errs.Err()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want valid", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestDecodeIsStrict(t *testing.T) {
	t.Parallel()
	var o struct {
		Address string `json:"address"`
	}
	if err := Decode("options", json.RawMessage(`{"adress":"x"}`), &o); err == nil || !strings.Contains(err.Error(), `options: json: unknown field "adress"`) {
		t.Errorf("misspelt field: %v", err)
	}
	if err := Decode("options", nil, &o); err == nil || err.Error() != "options: required" {
		t.Errorf("no options: %v", err)
	}
}

func TestSecret(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(file, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ONDEMAND_TEST_PW", "fromenv")
	for _, tc := range []struct {
		name    string
		s       *Secret
		want    string
		wantErr string
	}{
		{"unset", nil, "", ""},
		{"file, newline dropped", &Secret{File: file}, "s3cret", ""},
		{"env", &Secret{Env: "ONDEMAND_TEST_PW"}, "fromenv", ""},
		{"missing file", &Secret{File: file + ".nope"}, "", "password.file:"},
		{"missing env", &Secret{Env: "ONDEMAND_TEST_NOPE"}, "", "password.env: environment variable ONDEMAND_TEST_NOPE is not set"},
	} {
		got, err := tc.s.Value("password")
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: error = %v, want %q", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: Value() = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	var errs Errors
	(&Secret{File: "a", Env: "b"}).Validate("password", &errs)
	if err := errs.Err(); err == nil || !strings.Contains(err.Error(), "password: set file or env, not both") {
		t.Errorf("both sources: %v", err)
	}
}

func TestTLSOptions(t *testing.T) {
	t.Parallel()
	var errs Errors
	(&TLSOptions{CertFile: "c"}).Validate("tls", &errs)
	if err := errs.Err(); err == nil || !strings.Contains(err.Error(), "tls.certFile: certFile and keyFile go together") {
		t.Errorf("cert without key: %v", err)
	}
	if c, err := (*TLSOptions)(nil).Config("tls"); c != nil || err != nil {
		t.Errorf("nil options: %v, %v", c, err)
	}
	notPEM := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (&TLSOptions{CAFile: notPEM}).Config("tls"); err == nil || !strings.Contains(err.Error(), "tls.caFile: no PEM certificate") {
		t.Errorf("bad CA file: %v", err)
	}
}
