package options

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type common struct {
	Name string `json:"name"`
}

type metric struct {
	common
	Key    string            `json:"key,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
}

type testOptions struct {
	Address  string            `json:"address"`
	Port     int               `json:"port,omitempty"`
	Password *Secret           `json:"password,omitempty"`
	TTL      *metav1.Duration  `json:"ttl,omitempty"`
	Headers  map[string]Header `json:"headers,omitempty"`
	Metrics  []metric          `json:"metrics"`
	hidden   string
}

func TestDecode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		raw  string
		want []string // substrings of the error; nil means valid
		not  []string // must not appear (values)
	}{
		{"valid", `{"address":"a","port":1,"password":{"file":"/p"},"ttl":"2s","metrics":[{"name":"m","key":"k","labels":{"a":"b"}}]}`, nil, nil},
		{"empty", ``, []string{"options: required"}, nil},
		{"null", `null`, []string{"options: required"}, nil},
		{"unknown top-level", `{"adress":"a"}`, []string{`options: unknown field "adress"`}, nil},
		{"case differs", `{"Address":"a"}`, []string{`options: unknown field "Address" (did you mean "address"?)`}, nil},
		{"unknown in a list item", `{"metrics":[{"name":"a"},{"name":"b","kye":"x"}]}`, []string{`options.metrics[1]: unknown field "kye"`}, nil},
		{"several errors", `{"port":"x","metrics":[{"name":1},{"key":[]}]}`, []string{
			"options.port: want an integer, got a string",
			"options.metrics[0].name: want a string, got a number",
			"options.metrics[1].key: want a string, got a list",
		}, nil},
		{"wrong shape", `{"metrics":{"name":"a"}}`, []string{"options.metrics: want a list, got an object"}, nil},
		{"duration", `{"ttl":"soon"}`, []string{"options.ttl: time: invalid duration"}, nil},
		{"unexported is no field", `{"hidden":"x"}`, []string{`options: unknown field "hidden"`}, nil},
		{"inline secret", `{"password":"hunter2"}`, []string{"options.password: an inline secret is refused"}, []string{"hunter2"}},
		{"secret unknown source", `{"password":{"vault":"hunter2"}}`, []string{`options.password: want {file: ...} or {env: ...}: json: unknown field "vault"`}, []string{"hunter2"}},
		{"inline secret, nested", `{"metrics":[{"name":"m"}],"password":"hunter2","port":"x"}`, []string{"options.password: an inline secret", "options.port: want an integer"}, []string{"hunter2"}},
		{"map value", `{"metrics":[{"labels":{"a":1}}]}`, []string{"options.metrics[0].labels.a: want a string, got a number"}, nil},
		{"not JSON", `{"address":`, []string{"options: not valid JSON"}, nil},
		{"integer overflow does not echo", `{"port":123456789012345678901234567890}`, []string{"options.port: want an integer, got a number that does not fit"}, []string{"1234567890"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var o testOptions
			err := Decode("options", json.RawMessage(tc.raw), &o)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Decode() = %v, want no error", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Decode() = nil, want %q", tc.want)
			}
			if n := len(strings.Split(err.Error(), "\n")); n != len(tc.want) {
				t.Errorf("Decode() = %v: %d errors, want %d", err, n, len(tc.want))
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Decode() = %v\nwant it to contain %q", err, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(err.Error(), n) {
					t.Errorf("Decode() = %v: it quotes %q", err, n)
				}
			}
		})
	}
}

func TestDecodeFills(t *testing.T) {
	t.Parallel()
	var o testOptions
	raw := `{"address":"a","password":{"env":"PW"},"ttl":"3s","headers":{"X-Org":"t","Authorization":{"file":"/tok"}},"metrics":[{"name":"m","key":"k"}]}`
	if err := Decode("options", json.RawMessage(raw), &o); err != nil {
		t.Fatal(err)
	}
	if o.Address != "a" || o.Password.Env != "PW" || o.TTL.Duration != 3*time.Second || o.Metrics[0].Name != "m" || o.Metrics[0].Key != "k" ||
		o.Headers["X-Org"].Value != "t" || o.Headers["Authorization"].Secret.File != "/tok" {
		t.Errorf("decoded %+v", o)
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func fifo(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	return p
}

func TestSecret(t *testing.T) {
	file := writeFile(t, "s3cret\n")
	big := writeFile(t, strings.Repeat("x", MaxFileBytes+1))
	pipe := fifo(t)
	t.Setenv("OPTIONS_TEST_PW", "fromenv")
	for _, tc := range []struct {
		name    string
		s       *Secret
		want    string
		wantErr string
		is      error
	}{
		{"unset", nil, "", "", nil},
		{"file, newline dropped", &Secret{File: file}, "s3cret", "", nil},
		{"env", &Secret{Env: "OPTIONS_TEST_PW"}, "fromenv", "", nil},
		{"missing file", &Secret{File: file + ".nope"}, "", "password.file:", os.ErrNotExist},
		{"missing env", &Secret{Env: "OPTIONS_TEST_NOPE"}, "", "password.env: environment variable OPTIONS_TEST_NOPE is not set", nil},
		// a FIFO would block the reader (and, on a reload, the adapter)
		{"FIFO", &Secret{File: pipe}, "", "password.file: " + pipe + " is a FIFO, not a regular file", ErrNotRegular},
		{"device", &Secret{File: os.DevNull}, "", "is a device, not a regular file", ErrNotRegular},
		{"directory", &Secret{File: filepath.Dir(file)}, "", "is a directory", ErrNotRegular},
		{"oversize", &Secret{File: big}, "", fmt.Sprintf("larger than %d bytes", MaxFileBytes), ErrTooLarge},
	} {
		got, err := tc.s.Value("password")
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: error = %v, want %q", tc.name, err, tc.wantErr)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("%s: error = %v, want errors.Is %v", tc.name, err, tc.is)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: Value() = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

func TestSecretValidate(t *testing.T) {
	t.Parallel()
	pipe := fifo(t)
	big := writeFile(t, strings.Repeat("x", MaxFileBytes+1))
	for _, tc := range []struct {
		name string
		s    *Secret
		want string
	}{
		{"both sources", &Secret{File: "a", Env: "b"}, "password: set file or env, not both"},
		{"FIFO", &Secret{File: pipe}, "password.file: " + pipe + " is a FIFO"},
		{"oversize", &Secret{File: big}, "password.file: " + big + " is"},
		{"missing file is left to the read", &Secret{File: pipe + ".nope"}, ""},
		{"nil", nil, ""},
	} {
		var errs Errors
		tc.s.Validate("password", &errs)
		err := errs.Err()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v, want no error", tc.name, err)
			}
		} else if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestReadFileDeadline(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// an ended context fails the read even of a file that is there (the
	// read itself may win the race; only an error other than the
	// context's is wrong)
	if _, err := ReadFile(ctx, writeFile(t, "x")); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("ReadFile(ended context) = %v", err)
	}
}

func TestTLS(t *testing.T) {
	t.Parallel()
	var errs Errors
	(&TLS{CertFile: "c"}).Validate("tls", &errs)
	if err := errs.Err(); err == nil || !strings.Contains(err.Error(), "tls.certFile: certFile and keyFile go together") {
		t.Errorf("cert without key: %v", err)
	}
	if c, err := (*TLS)(nil).Config("tls"); c != nil || err != nil {
		t.Errorf("nil options: %v, %v", c, err)
	}
	if _, err := (&TLS{CAFile: writeFile(t, "hello")}).Config("tls"); err == nil || !strings.Contains(err.Error(), "tls.caFile: no PEM certificate") {
		t.Errorf("bad CA file: %v", err)
	}
	pipe := fifo(t)
	if _, err := (&TLS{CAFile: pipe}).Config("tls"); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "tls.caFile:") {
		t.Errorf("FIFO CA file: %v", err)
	}
	errs = Errors{}
	(&TLS{CAFile: pipe}).Validate("tls", &errs)
	if err := errs.Err(); err == nil || !strings.Contains(err.Error(), "tls.caFile: "+pipe+" is a FIFO") {
		t.Errorf("FIFO CA file at validation: %v", err)
	}
}

func TestCheckHeaders(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		headers string
		want    string // "" means valid
	}{
		{"plain", `{"X-Scope-OrgID":"tenant-a","X-Team":"web"}`, ""},
		{"authorization from a file", `{"Authorization":{"file":"/var/run/token"}}`, ""},
		{"inline authorization", `{"Authorization":"Bearer abc.def"}`, "headers.Authorization: carries a credential: an inline value is refused"},
		{"inline, lower case", `{"authorization":"Basic eDp5"}`, "headers.authorization: carries a credential"},
		{"inline API key", `{"X-Api-Key":"k"}`, "headers.X-Api-Key: carries a credential"},
		{"inline cookie", `{"Cookie":"session=1"}`, "headers.Cookie: carries a credential"},
		{"secret without source", `{"Authorization":{}}`, "headers.Authorization: set file or env"},
		{"bad name", `{"X Bad":"v"}`, `headers: invalid header name "X Bad"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var h map[string]Header
			if err := json.Unmarshal([]byte(tc.headers), &h); err != nil {
				t.Fatal(err)
			}
			var errs Errors
			CheckHeaders("headers", h, &errs)
			err := errs.Err()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("CheckHeaders() = %v, want valid", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("CheckHeaders() = %v, want %q", err, tc.want)
			case err != nil && (strings.Contains(err.Error(), "abc.def") || strings.Contains(err.Error(), "eDp5")):
				t.Fatalf("CheckHeaders() = %v quotes the credential", err)
			}
		})
	}
}

func TestRedaction(t *testing.T) {
	t.Parallel()
	type withSecret struct {
		User string
		Pass Sensitive
	}
	v := withSecret{User: "u", Pass: "hunter2"}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{fmt.Sprintf("%v", v), fmt.Sprintf("%+v", v), fmt.Sprintf("%#v", v), fmt.Sprintf("%s %q %x", v.Pass, v.Pass, v.Pass), string(b)} {
		if strings.Contains(s, "hunter2") || !strings.Contains(s, Redacted) {
			t.Errorf("printed %q", s)
		}
	}
	if string(v.Pass) != "hunter2" {
		t.Errorf("string(Sensitive) = %q", string(v.Pass))
	}
	err = Redact(errors.New(`dial "amqp://u:s3cret@host": refused`), "s3cret", "")
	if err.Error() != `dial "amqp://u:REDACTED@host": refused` {
		t.Errorf("Redact() = %q", err)
	}
	if ctxErr := Redact(context.DeadlineExceeded, "x"); !errors.Is(ctxErr, context.DeadlineExceeded) {
		t.Error("Redact lost the cause")
	}
	wrapped := Redact(errors.Join(errors.New("pw=x1"), context.DeadlineExceeded), "x1")
	if !errors.Is(wrapped, context.DeadlineExceeded) || strings.Contains(wrapped.Error(), "x1") {
		t.Errorf("Redact(wrapped) = %v", wrapped)
	}
	h, err := json.Marshal(map[string]Header{"Authorization": {Secret: &Secret{File: "/tok"}}, "X": {Value: "v"}})
	if err != nil || string(h) != `{"Authorization":{"file":"/tok"},"X":"v"}` {
		t.Errorf("headers marshal as %s, %v", h, err)
	}
}
