package dropin_test

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/metricscale/metricscale/adapter/dropin"
	"github.com/metricscale/metricscale/providers/catalog"
)

const rules = `
externalRules:
- seriesQuery: '{__name__="queue_messages_ready"}'
  resources: {namespaced: false}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (queue)'
`

const native = `
providers:
- name: mem
  type: memory
routes:
- metric: "*"
  provider: mem
`

// prometheus-adapter's arguments land in the flags.
func TestAddFlags(t *testing.T) {
	t.Parallel()
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	var f dropin.Flags
	disableHTTP2 := false
	dropin.AddFlags(fs, &f, &disableHTTP2)
	err := fs.Parse([]string{
		"--prometheus-url=http://prom:9090", "--prometheus-auth-incluster", "--prometheus-auth-config=/kc",
		"--prometheus-ca-file=/ca", "--prometheus-client-tls-cert-file=/crt", "--prometheus-client-tls-key-file=/key",
		"--prometheus-token-file=/tok", "--prometheus-header=A=1", "--prometheus-header=B=2", "--prometheus-verb=POST",
		"--metrics-relist-interval=1m", "--metrics-max-age=2m", "--disable-http2",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := dropin.Flags{
		PrometheusURL: "http://prom:9090", AuthInCluster: true, AuthConfig: "/kc", CAFile: "/ca",
		ClientTLSCertFile: "/crt", ClientTLSKeyFile: "/key", TokenFile: "/tok", Headers: []string{"A=1", "B=2"},
		Verb: "POST", MetricsRelistInterval: time.Minute, MetricsMaxAge: 2 * time.Minute,
	}
	if !reflect.DeepEqual(f, want) {
		t.Errorf("flags = %+v, want %+v", f, want)
	}
	if !disableHTTP2 {
		t.Error("--disable-http2 did not set disableHTTP2")
	}
}

func TestDecode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		data          string
		flags         dropin.Flags
		wantRulesFile bool
		wantProviders []string // name/type
		wantErr       string
	}{
		{name: "rules file", data: rules, flags: dropin.Flags{PrometheusURL: "http://prom:9090"}, wantRulesFile: true, wantProviders: []string{"prometheus/prometheus"}},
		{name: "rules file with an unknown key", data: rules + "bogus: 1\n", flags: dropin.Flags{PrometheusURL: "http://prom:9090"}, wantRulesFile: true, wantErr: "as a prometheus-adapter rules file"},
		{name: "native", data: native, wantProviders: []string{"mem/memory"}},
		{name: "native with an unknown type", data: strings.Replace(native, "memory", "nope", 1), wantErr: "nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, rulesFile, err := dropin.Decode([]byte(tc.data), tc.flags, catalog.Factories())
			if rulesFile != tc.wantRulesFile {
				t.Errorf("rulesFile = %v, want %v", rulesFile, tc.wantRulesFile)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range c.Providers {
				got = append(got, p.Name+"/"+p.Type)
			}
			if !slices.Equal(got, tc.wantProviders) {
				t.Errorf("providers = %v, want %v", got, tc.wantProviders)
			}
		})
	}
}

func TestCheckURL(t *testing.T) {
	t.Parallel()
	url := dropin.Flags{PrometheusURL: "http://prom:9090"}
	for _, tc := range []struct {
		name                  string
		flags                 dropin.Flags
		haveConfig, rulesFile bool
		wantErr               string
	}{
		{name: "no URL, no config"},
		{name: "no URL, native config", haveConfig: true},
		{name: "URL with a rules file", flags: url, haveConfig: true, rulesFile: true},
		{name: "URL without config", flags: url, wantErr: "needs --config"},
		{name: "URL with a native config", flags: url, haveConfig: true, wantErr: "not a prometheus-adapter rules file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := dropin.CheckURL(tc.flags, tc.haveConfig, tc.rulesFile)
			if tc.wantErr == "" && err != nil {
				t.Errorf("err = %v, want none", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.HasPrefix(err.Error(), "--prometheus-url: ")) {
				t.Errorf("err = %v, want one naming --prometheus-url and containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestPushOff(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rulesFile, nativeFile := filepath.Join(dir, "rules.yaml"), filepath.Join(dir, "native.yaml")
	if err := os.WriteFile(rulesFile, []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(nativeFile, []byte(native), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		file      string
		pushAsked bool
		want      bool
	}{
		{name: "rules file", file: rulesFile, want: true},
		{name: "rules file, push asked for", file: rulesFile, pushAsked: true},
		{name: "native config", file: nativeFile},
		{name: "no config"},
		{name: "missing file", file: filepath.Join(dir, "missing.yaml")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := dropin.PushOff(tc.file, tc.pushAsked); got != tc.want {
				t.Errorf("PushOff(%q, %v) = %v, want %v", tc.file, tc.pushAsked, got, tc.want)
			}
		})
	}
}

func TestTrimProgramName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		args     []string
		wantRest []string
		wantName string
	}{
		{name: "prometheus-adapter's chart", args: []string{"/adapter", "--secure-port=6443"}, wantRest: []string{"--secure-port=6443"}, wantName: "/adapter"},
		{name: "bare name", args: []string{"adapter", "-v=2"}, wantRest: []string{"-v=2"}, wantName: "adapter"},
		{name: "other path", args: []string{"/usr/local/bin/adapter"}, wantRest: []string{}, wantName: "/usr/local/bin/adapter"},
		{name: "flags only", args: []string{"--config=/etc/adapter/config.yaml"}, wantRest: []string{"--config=/etc/adapter/config.yaml"}},
		{name: "another argument", args: []string{"/prometheus-adapter", "-v=2"}, wantRest: []string{"/prometheus-adapter", "-v=2"}},
		{name: "not leading", args: []string{"-v=2", "/adapter"}, wantRest: []string{"-v=2", "/adapter"}},
		{name: "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rest, name := dropin.TrimProgramName(tc.args)
			if name != tc.wantName || !slices.Equal(rest, tc.wantRest) {
				t.Errorf("TrimProgramName(%q) = %q, %q; want %q, %q", tc.args, rest, name, tc.wantRest, tc.wantName)
			}
		})
	}
}

// --logtostderr, which older prometheus-adapter charts pass, is accepted
// and reported as ignored.
func TestIgnoredFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{args: nil},
		{args: []string{"--logtostderr=true"}, want: []string{"--logtostderr=true"}},
		{args: []string{"--logtostderr"}, want: []string{"--logtostderr=true"}},
		{args: []string{"--logtostderr=false"}, want: []string{"--logtostderr=false"}},
	} {
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		var f dropin.Flags
		disableHTTP2 := false
		dropin.AddFlags(fs, &f, &disableHTTP2)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if got := dropin.IgnoredFlags(fs); !slices.Equal(got, tc.want) {
			t.Errorf("%q: IgnoredFlags = %q, want %q", tc.args, got, tc.want)
		}
	}
}
