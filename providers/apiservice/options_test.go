package apiservice

import (
	"strings"
	"testing"
	"time"
)

func TestOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, raw string
		wantErr   []string // each must appear in the error
		check     func(t *testing.T, s *settings)
	}{
		{name: "minimal with token", raw: `{"url":"https://keda-operator-metrics-apiserver.keda:443","caFile":"/ca","tokenFile":"/t"}`,
			check: func(t *testing.T, s *settings) {
				if s.timeout != DefaultTimeout || s.discoveryInterval != DefaultDiscoveryInterval || s.custom != VersionAuto || s.external != VersionV1beta1 {
					t.Errorf("defaults: %+v", s)
				}
				if s.base.String() != "https://keda-operator-metrics-apiserver.keda:443" {
					t.Errorf("base %s", s.base)
				}
			}},
		{name: "client cert, insecure, path prefix, versions", raw: `{"url":"https://h/proxy/","insecureSkipTLSVerify":true,"clientCert":"/c","clientKey":"/k","timeout":"2s","discoveryInterval":"10s","custom":"v1beta1","external":"disabled"}`,
			check: func(t *testing.T, s *settings) {
				if s.base.Path != "/proxy" || s.timeout != 2*time.Second || s.discoveryInterval != 10*time.Second || s.custom != VersionV1beta1 || s.external != VersionDisabled {
					t.Errorf("settings: %+v", s)
				}
			}},
		{name: "empty", raw: ``, wantErr: []string{"opts: required"}},
		{name: "unknown field", raw: `{"url":"https://h","caFile":"/c","tokenFile":"/t","token":"x"}`, wantErr: []string{`unknown field "token"`}},
		{name: "no url", raw: `{"caFile":"/c","tokenFile":"/t"}`, wantErr: []string{"opts.url: required"}},
		{name: "http", raw: `{"url":"http://h","caFile":"/c","tokenFile":"/t"}`, wantErr: []string{"opts.url: must be an https URL"}},
		{name: "userinfo", raw: `{"url":"https://u:p@h","caFile":"/c","tokenFile":"/t"}`, wantErr: []string{"opts.url: must not carry credentials"}},
		{name: "query", raw: `{"url":"https://h?x=1","caFile":"/c","tokenFile":"/t"}`, wantErr: []string{"opts.url: must not have a query"}},
		{name: "no CA", raw: `{"url":"https://h","tokenFile":"/t"}`, wantErr: []string{"opts.caFile: required", "insecureSkipTLSVerify: true"}},
		{name: "CA and insecure", raw: `{"url":"https://h","caFile":"/c","insecureSkipTLSVerify":true,"tokenFile":"/t"}`, wantErr: []string{"opts.insecureSkipTLSVerify: cannot be combined with caFile"}},
		{name: "no credentials", raw: `{"url":"https://h","caFile":"/c"}`, wantErr: []string{"opts.tokenFile: set tokenFile or clientCert"}},
		{name: "cert without key", raw: `{"url":"https://h","caFile":"/c","clientCert":"/c"}`, wantErr: []string{"opts.clientCert: clientCert and clientKey go together"}},
		{name: "bad durations", raw: `{"url":"https://h","caFile":"/c","tokenFile":"/t","timeout":"0s","discoveryInterval":"10ms"}`,
			wantErr: []string{"opts.timeout: must be positive", "opts.discoveryInterval: must be at least 1s"}},
		{name: "bad versions", raw: `{"url":"https://h","caFile":"/c","tokenFile":"/t","custom":"v2","external":"v1beta2"}`,
			wantErr: []string{"opts.custom: must be auto, v1beta2, v1beta1 or disabled", "opts.external: must be v1beta1 or disabled"}},
		{name: "nothing forwarded", raw: `{"url":"https://h","caFile":"/c","tokenFile":"/t","custom":"disabled","external":"disabled"}`,
			wantErr: []string{"opts.custom: custom and external are both disabled"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := decodeOptions("opts", []byte(tc.raw))
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				tc.check(t, s)
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestCustomVersions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		configured, discovered string
		want                   string
	}{
		{VersionAuto, "", "v1beta2 v1beta1"},
		{VersionAuto, VersionV1beta1, "v1beta1"},
		{VersionAuto, VersionV1beta2, "v1beta2"},
		{VersionV1beta1, VersionV1beta2, "v1beta1"},
		{VersionV1beta2, "", "v1beta2"},
	} {
		s := &settings{custom: tc.configured}
		if got := strings.Join(s.customVersions(tc.discovered), " "); got != tc.want {
			t.Errorf("configured %s, discovered %q: %s, want %s", tc.configured, tc.discovered, got, tc.want)
		}
	}
}
