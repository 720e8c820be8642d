package rabbitmq

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/backendhttp"
)

// TestManagementHardening: the management client follows no redirect (its
// target never gets the password), shows only a short sanitised excerpt of
// an error answer, and refuses an answer over maxBody before reading it.
func TestManagementHardening(t *testing.T) {
	t.Parallel()
	const pw = "rabbit-Pa55word-never-sent-elsewhere"
	var reached atomic.Int64
	var gotPassword atomic.Bool
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		if _, p, ok := r.BasicAuth(); ok && p == pw {
			gotPassword.Store(true)
		}
		_, _ = w.Write([]byte(`[{"name":"q","vhost":"/","messages_ready":1}]`))
	}))
	t.Cleanup(target.Close)
	// after the parallel subtests
	t.Cleanup(func() {
		if n := reached.Load(); n != 0 || gotPassword.Load() {
			t.Errorf("the redirect targets got %d requests (password sent: %v), want none", n, gotPassword.Load())
		}
	})
	port := target.Listener.Addr().(*net.TCPAddr).Port
	hostile := "boom\r\n\x1b[31mSPOOFED\x1b[0m\u202e " + strings.Repeat("z", 300) + "TAIL-NEVER-SHOWN"

	for _, tc := range []struct {
		name   string
		handle func(w http.ResponseWriter, r *http.Request)
		want   string
	}{
		{"302 to plain http on the same host", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+r.URL.RequestURI(), http.StatusFound)
		}, "302 Found: a redirect to " + target.URL + ", not followed"},
		{"307 to another host", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, fmt.Sprintf("http://localhost:%d%s", port, r.URL.RequestURI()), http.StatusTemporaryRedirect)
		}, "307 Temporary Redirect: a redirect to http://localhost:" + strconv.Itoa(port) + ", not followed"},
		{"500 with a hostile body", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(hostile))
		}, "500 Internal Server Error: boom [31mSPOOFED [0m zzz"},
		{"an answer over the size bound", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(maxBody+1))
			chunk := make([]byte, 1<<20)
			for i := 0; i <= maxBody>>20; i++ {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}, "larger than 64 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(tc.handle))
			defer srv.Close()
			p := mustNew(t, fmt.Sprintf(`{"managementURL": %q, "username": "monitor", "password": {"file": %q}, "metrics": [{"name": "m", "queue": "q"}]}`,
				srv.URL, passwordFile(t, pw)), providers.Deps{})
			got, err := p.GetExternalMetric(context.Background(), "default", nil, providers.ExternalMetricInfo{Metric: "m"})
			if err == nil || got != nil {
				t.Fatalf("served %v, %v; want a 503", got, err)
			}
			msg := err.Error()
			if providers.ReasonOf(err) != providers.ReasonBackend || !strings.Contains(msg, tc.want) {
				t.Errorf("got %q; want a 503 saying %q", msg, tc.want)
			}
			if strings.Contains(msg, pw) || strings.Contains(msg, "TAIL-NEVER-SHOWN") || strings.Contains(msg, strings.Repeat("z", backendhttp.ExcerptBytes)) {
				t.Errorf("the message shows the password or more than an excerpt: %q", msg)
			}
			for _, r := range msg {
				if r < 0x20 || r == 0x7f || r == '\u202e' {
					t.Errorf("message %q has the control character %U", msg, r)
					break
				}
			}
		})
	}
}
