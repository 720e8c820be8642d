package app

import (
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/metricscale/metricscale/certs"
	"github.com/metricscale/metricscale/providers/changefeed"
)

func TestChangeFeedFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		wantURL string
		wantErr string
	}{
		{name: "off by default"},
		{name: "the path is added", args: []string{"--change-feed-url=https://metricscale-adapter.metricscale.svc"}, wantURL: "https://metricscale-adapter.metricscale.svc/changes"},
		{name: "a port and a trailing slash", args: []string{"--change-feed-url=https://127.0.0.1:6444/"}, wantURL: "https://127.0.0.1:6444/changes"},
		{name: "a path of its own (a proxy)", args: []string{"--change-feed-url=https://proxy/adapter/changes"}, wantURL: "https://proxy/adapter/changes"},
		{name: "plain http would send the credentials in the clear", args: []string{"--change-feed-url=http://adapter"}, wantErr: "not an https:// URL"},
		{name: "no host", args: []string{"--change-feed-url=https:///changes"}, wantErr: "not an https:// URL"},
		{name: "credentials in the URL", args: []string{"--change-feed-url=https://u:p@adapter"}, wantErr: "no user, query or fragment"},
		{name: "a CA and no verification", args: []string{"--change-feed-url=https://a", "--change-feed-ca-file=ca.crt", "--change-feed-insecure-skip-tls-verify"}, wantErr: "exclude each other"},
		{name: "options without a URL", args: []string{"--change-feed-token-file=t"}, wantErr: "need --change-feed-url"},
		{name: "a negative interval", args: []string{"--change-feed-url=https://a", "--change-feed-min-interval=-1s"}, wantErr: "must not be negative"},
	}
	for _, tt := range tests {
		o := NewOptions()
		fs := pflag.NewFlagSet("autoscaler", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		err := o.ChangeFeed.Validate()
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: %v, want an error with %q", tt.name, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if o.ChangeFeed.MinInterval != time.Second {
			t.Errorf("%s: min interval %s, want 1s by default", tt.name, o.ChangeFeed.MinInterval)
		}
		if tt.wantURL != "" {
			u, err := o.ChangeFeed.feedURL()
			if err != nil || u.String() != tt.wantURL {
				t.Errorf("%s: URL %v %v, want %s", tt.name, u, err, tt.wantURL)
			}
		}
	}
}

// TestChangeFeedCredentials connects the feed's client to a TLS server and
// checks what it presents and what it trusts.
func TestChangeFeedCredentials(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var auth []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", changefeed.ContentType)
		fmt.Fprintln(w, `{"type":"hello","heartbeatSeconds":10}`)
	}))
	defer srv.Close()
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("file-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, otherCA, err := certs.NewCA("not the adapter's", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	kube := &rest.Config{Host: "https://apiserver:6443", BearerToken: "kube-token",
		TLSClientConfig: rest.TLSClientConfig{CAData: otherCA.CertPEM, ServerName: "apiserver"}}

	connect := func(o ChangeFeedOptions) error {
		o.URL = srv.URL
		u, hc, err := o.httpClient(kube)
		if err != nil {
			return err
		}
		resp, err := hc.Get(u)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s", resp.Status)
		}
		return nil
	}
	if err := connect(ChangeFeedOptions{CAFile: caFile}); err != nil {
		t.Errorf("with the CA file: %v", err)
	}
	if err := connect(ChangeFeedOptions{CAFile: caFile, TokenFile: tokenFile}); err != nil {
		t.Errorf("with the token file: %v", err)
	}
	if err := connect(ChangeFeedOptions{InsecureSkipTLSVerify: true}); err != nil {
		t.Errorf("without verification: %v", err)
	}
	if err := connect(ChangeFeedOptions{}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("with the kubeconfig's CA, which did not sign the server's: %v, want a certificate error", err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := "/changes Bearer kube-token; /changes Bearer file-token; /changes Bearer kube-token"
	if got := strings.Join(auth, "; "); got != want {
		t.Errorf("the server saw %q, want %q", got, want)
	}
}
