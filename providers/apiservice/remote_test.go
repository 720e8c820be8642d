package apiservice

import (
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/util/compatibility"
	"k8s.io/client-go/rest"
	cmapiserver "sigs.k8s.io/custom-metrics-apiserver/pkg/apiserver"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/memory"
	"github.com/metricscale/metricscale/providers/registry"
)

// remote is a real custom-metrics-apiserver — the library KEDA,
// prometheus-adapter, Datadog's cluster agent and metricscale all serve
// their APIs with — over a registry with one memory provider, served over
// TLS behind a bearer token check and a switch that makes it hang.
type remote struct {
	srv       *httptest.Server
	caFile    string
	tokenFile string // holds the token the remote accepts
	mem       providers.Appender

	token   atomic.Pointer[string]
	hung    atomic.Bool
	release chan struct{}
	once    sync.Once
	calls   atomic.Int64
}

func newRemote(t *testing.T, deps providers.Deps, maxAge time.Duration) *remote {
	t.Helper()
	opts, err := json.Marshal(map[string]string{"maxAge": maxAge.String()})
	if err != nil {
		t.Fatal(err)
	}
	mem, err := memory.Factory{}.New("remote-memory", opts, deps)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.New([]*registry.Instance{{Provider: mem, Timeout: 5 * time.Second}},
		[]registry.Route{{Metric: "*", Provider: mem.Name()}}, deps.Resources, 0, deps.Clock)
	if err != nil {
		t.Fatal(err)
	}
	gc := genericapiserver.NewConfig(cmapiserver.Codecs)
	gc.EffectiveVersion = compatibility.DefaultBuildEffectiveVersion()
	gc.LoopbackClientConfig = &rest.Config{Host: "https://127.0.0.1:0"}
	gc.ExternalAddress = "127.0.0.1:443"
	cfg := &cmapiserver.Config{GenericConfig: gc}
	server, err := cfg.Complete(nil).New("remote", reg, reg)
	if err != nil {
		t.Fatal(err)
	}
	r := &remote{mem: mem.(providers.Appender), release: make(chan struct{})}
	tok := "remote-accepts-this-token"
	r.token.Store(&tok)
	handler := server.GenericAPIServer.Handler
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.calls.Add(1)
		if req.Header.Get("Authorization") != "Bearer "+*r.token.Load() {
			http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`, http.StatusUnauthorized)
			return
		}
		if r.hung.Load() {
			select {
			case <-r.release:
			case <-req.Context().Done():
			}
			return
		}
		handler.ServeHTTP(w, req)
	}))
	r.srv.StartTLS()
	// runs before the server's Close, which waits for hung requests
	t.Cleanup(r.srv.Close)
	t.Cleanup(func() { r.once.Do(func() { close(r.release) }) })

	dir := t.TempDir()
	r.caFile = filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(r.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	r.tokenFile = filepath.Join(dir, "token")
	if err := os.WriteFile(r.tokenFile, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return r
}

// options are provider options pointing at r.
func (r *remote) options(extra map[string]any) json.RawMessage {
	o := map[string]any{"url": r.srv.URL, "caFile": r.caFile, "tokenFile": r.tokenFile}
	for k, v := range extra {
		o[k] = v
	}
	b, _ := json.Marshal(o)
	return b
}
