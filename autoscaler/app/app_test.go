package app

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestFlags: component-base's leader election, feature gate and logging
// flags, the names hack/cluster.sh and earlier releases pass, and a
// loopback default for the unauthenticated endpoints.
func TestFlags(t *testing.T) {
	t.Parallel()
	o := NewOptions()
	if !strings.HasPrefix(o.BindAddress, "127.0.0.1:") {
		t.Errorf("default --bind-address %q, want a loopback address", o.BindAddress)
	}
	fs := pflag.NewFlagSet("autoscaler", pflag.ContinueOnError)
	o.AddFlags(fs)
	args := []string{
		"--kubeconfig=kc", "--bind-address=127.0.0.1:6446", "--leader-elect=true", "--leader-elect-namespace=ns",
		"--leader-elect-resource-name=lease", "--leader-elect-lease-duration=20s", "--leader-elect-identity=me",
		"--feature-gates=HPAScaleToZero=false,HPAGeneration=false", "--kube-api-qps=50", "--kube-api-burst=80",
		"--metrics-api-qps=300", "--metrics-api-burst=400", "--metric-read-timeout=3s",
		"-v=2", "--logging-format=text",
	}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	le := o.LeaderElection
	if le.ResourceNamespace != "ns" || le.ResourceName != "lease" || le.LeaseDuration.Duration != 20*time.Second || o.Identity != "me" {
		t.Errorf("leader election %+v identity %q", le, o.Identity)
	}
	if s := o.Settings(); s.Gates.ScaleToZero || !s.Gates.ConfigurableTolerance || !s.Gates.PodLevelResources || s.Gates.Generation {
		t.Errorf("gates %+v, want ScaleToZero off, ConfigurableTolerance on, PodLevelResources on, Generation off", s.Gates)
	}
	// v1.37's defaults: scale to zero beta and on, tolerance GA and locked.
	if s := NewOptions().Settings(); !s.Gates.ScaleToZero || !s.Gates.ConfigurableTolerance || !s.Gates.Generation {
		t.Errorf("default gates %+v, want v1.37's: ScaleToZero, ConfigurableTolerance and Generation on", s.Gates)
	}
	if err := NewOptions().Gates.Set("HPAConfigurableTolerance=false"); err == nil {
		t.Error("HPAConfigurableTolerance=false was accepted; the gate is GA and locked in v1.37")
	}
	if o.KubeAPIQPS != 50 || o.KubeAPIBurst != 80 {
		t.Errorf("qps %v burst %d", o.KubeAPIQPS, o.KubeAPIBurst)
	}
	if o.MetricsAPIQPS != 300 || o.MetricsAPIBurst != 400 {
		t.Errorf("metrics qps %v burst %d", o.MetricsAPIQPS, o.MetricsAPIBurst)
	}
	if o.MetricReadTimeout != 3*time.Second || NewOptions().MetricReadTimeout != 10*time.Second {
		t.Errorf("--metric-read-timeout %s (default %s), want 3s (10s)", o.MetricReadTimeout, NewOptions().MetricReadTimeout)
	}
	// one limiter for the three metrics APIs, of the flags' figures
	base := &rest.Config{Host: "https://kube", QPS: 50, Burst: 80}
	mc := o.metricsConfig(base)
	if mc.RateLimiter == nil || mc.RateLimiter.QPS() != 300 || base.RateLimiter != nil {
		t.Errorf("metrics client config: limiter %v, base %v; want one shared 300 qps limiter", mc.RateLimiter, base.RateLimiter)
	}
	if o.Logging.Verbosity != 2 {
		t.Errorf("verbosity %d, want 2", o.Logging.Verbosity)
	}
	if err := NewOptions().Gates.Set("NoSuchGate=true"); err == nil {
		t.Error("an unknown feature gate was accepted")
	}
	if NewOptions().KubeAPIContentType != "application/vnd.kubernetes.protobuf" {
		t.Error("built-in APIs are not read in protobuf by default, as kube-controller-manager reads them")
	}
	bad := NewOptions()
	bad.KubeAPIContentType = "text/plain"
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "--kube-api-content-type") {
		t.Errorf("--kube-api-content-type=text/plain: %v", err)
	}
	bad = NewOptions()
	bad.MetricReadTimeout = 0
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "--metric-read-timeout") {
		t.Errorf("--metric-read-timeout=0: %v", err)
	}
	bad = NewOptions()
	bad.MetricsAPIQPS = 0
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "--metrics-api-qps") {
		t.Errorf("--metrics-api-qps=0: %v", err)
	}
}

type checker struct{ err error }

func (checker) Name() string                { return "leaderElection" }
func (c checker) Check(*http.Request) error { return c.err }

// TestHealth: /healthz fails when leader election does (a leader that no
// longer renews), /readyz until the caches are synced.
func TestHealth(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name            string
		leaderErr       error
		synced          bool
		healthz, readyz int
	}{
		{"starting", nil, false, http.StatusOK, http.StatusInternalServerError},
		{"running", nil, true, http.StatusOK, http.StatusOK},
		{"leader stopped renewing", errors.New("failed election to renew leadership on lease metricscale-autoscaler"), true, http.StatusInternalServerError, http.StatusOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ready atomic.Bool
			ready.Store(tc.synced)
			h := handler(&ready, checker{tc.leaderErr}, false)
			for path, want := range map[string]int{"/healthz": tc.healthz, "/livez": tc.healthz, "/readyz": tc.readyz} {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
				if rec.Code != want {
					t.Errorf("%s: %d, want %d (%s)", path, rec.Code, want, rec.Body.String())
				}
			}
		})
	}
}

// TestProfiling: /debug/pprof is served only when --profiling asks for it.
func TestProfiling(t *testing.T) {
	t.Parallel()
	var ready atomic.Bool
	for _, on := range []bool{false, true} {
		rec := httptest.NewRecorder()
		handler(&ready, checker{}, on).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/pprof/heap?debug=1", nil))
		if got := rec.Code == http.StatusOK && strings.Contains(rec.Body.String(), "HeapAlloc"); got != on {
			t.Errorf("profiling %v: served the heap profile: %v (%d)", on, got, rec.Code)
		}
	}
}

// TestRecordFlags: recording is off by default and its flags set the
// recorder's bounds and the HTTPS server.
func TestRecordFlags(t *testing.T) {
	t.Parallel()
	o := NewOptions()
	if o.Record {
		t.Fatal("recording is on by default")
	}
	fs := pflag.NewFlagSet("autoscaler", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--record", "--record-max-steps=10", "--record-max-age=5m", "--secure-bind-address=127.0.0.1:6447", "--cert-dir=/tmp/certs"}); err != nil {
		t.Fatal(err)
	}
	if !o.Record || o.RecordOptions.MaxSteps != 10 || o.RecordOptions.MaxAge != 5*time.Minute || o.RecordServer.BindAddress != "127.0.0.1:6447" || o.RecordServer.CertDir != "/tmp/certs" {
		t.Errorf("record options %v %+v %+v", o.Record, o.RecordOptions, o.RecordServer)
	}
	for _, tc := range []struct {
		set  func(*Options)
		want string
	}{
		{func(o *Options) { o.RecordOptions.MaxSteps = 0 }, "--record-max-steps"},
		{func(o *Options) { o.RecordOptions.MaxAge = -time.Second }, "--record-max-age"},
		{func(o *Options) { o.RecordServer.CertFile = "tls.crt" }, "--tls-private-key-file"},
	} {
		o := NewOptions()
		tc.set(o)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate: %v, want an error naming %s", err, tc.want)
		}
	}
}

func TestLeadership(t *testing.T) {
	t.Parallel()
	l := &leadership{self: "a_1"}
	if leading, leader := l.get(); leading || leader != "" {
		t.Errorf("before any election: %v %q", leading, leader)
	}
	l.observed("b_1")
	if leading, leader := l.get(); leading || leader != "b_1" {
		t.Errorf("standby: %v %q, want false b_1", leading, leader)
	}
	l.started()
	l.observed("a_1")
	if leading, leader := l.get(); !leading || leader != "a_1" {
		t.Errorf("leading: %v %q", leading, leader)
	}
	l.stopped()
	if leading, _ := l.get(); leading {
		t.Error("still leading after it stopped")
	}
}

// TestKubeAPICompression: the clients accept no gzip unless
// --kube-api-compression (Go's transport asks for it by default).
func TestKubeAPICompression(t *testing.T) {
	t.Parallel()
	encodings := make(chan string, 1)
	// TLS, as every API server: client-go ignores the setting with plain
	// HTTP (Go's default transport serves it).
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		encodings <- r.Header.Get("Accept-Encoding")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"37","gitVersion":"v1.37.2"}`))
	}))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"--kube-api-compression"}, "gzip"},
	} {
		o := NewOptions()
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		kube, err := kubernetes.NewForConfig(o.clientConfig(&rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kube.Discovery().ServerVersion(); err != nil {
			t.Fatal(err)
		}
		if got := <-encodings; got != tc.want {
			t.Errorf("%v: Accept-Encoding %q, want %q", tc.args, got, tc.want)
		}
	}
}
