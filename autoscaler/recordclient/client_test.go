package recordclient

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/metricscale/metricscale/autoscaler/record"
	"github.com/metricscale/metricscale/autoscaler/recordserver"
)

func TestPodOf(t *testing.T) {
	t.Parallel()
	for identity, want := range map[string]string{
		"metricscale-autoscaler-7d9f8b6c5-x2x9q_1": "metricscale-autoscaler-7d9f8b6c5-x2x9q",
		"metricscale-autoscaler-7d9f8b6c5-x2x9q":   "metricscale-autoscaler-7d9f8b6c5-x2x9q",
		"host_name_4242":                           "host_name",
		"pod_a1":                                   "pod_a1",
	} {
		if got := PodOf(identity); got != want {
			t.Errorf("PodOf(%q) = %q, want %q", identity, got, want)
		}
	}
}

// server answers like the record endpoint: the recording for a token
// "good", a Status otherwise.
func server(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path != recordserver.Path("shop", "workers") {
			w.WriteHeader(404)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"metricautoscalers.autoscaling.metricscale.dev \"x\" not found","code":404}`))
			return
		}
		switch r.Header.Get("Authorization") {
		case "Bearer good":
		case "Bearer standby":
			w.Header().Set(recordserver.LeaderHeader, "pod-b_1")
			w.WriteHeader(503)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"this autoscaler replica (pod-a_1) does not lead","code":503}`))
			return
		default:
			w.WriteHeader(401)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"authentication required","code":401}`))
			return
		}
		_ = json.NewEncoder(w).Encode(record.Recording{Recorded: []record.Decision{{At: "0s", Replicas: 3, Rule: r.URL.Query().Get("last")}}})
	}))
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return srv, ca
}

func TestGet(t *testing.T) {
	t.Parallel()
	srv, ca := server(t)
	cfg := func(token string) *rest.Config {
		// A kubeconfig for another server, with its own CA: only its
		// credentials go to the autoscaler.
		return &rest.Config{Host: "https://kube.example:6443", BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: []byte("not used")}}
	}
	base := Options{Namespace: "shop", Name: "workers", Server: srv.URL}
	cases := []struct {
		name     string
		token    string
		o        func(*Options)
		wantErr  string
		wantCode int
		wantLast string
	}{
		{name: "verified with the CA", token: "good", o: func(o *Options) { o.CAFile = ca; o.Last = 30 * time.Minute }, wantLast: "30m0s"},
		{name: "not verified", token: "good", o: func(o *Options) { o.Insecure = true }},
		{name: "unknown CA", token: "good", o: func(*Options) {}, wantErr: "--certificate-authority"},
		{name: "no token", o: func(o *Options) { o.CAFile = ca }, wantCode: 401, wantErr: "authentication required"},
		{name: "standby", token: "standby", o: func(o *Options) { o.CAFile = ca }, wantCode: 503, wantErr: "does not lead"},
		{name: "not https", token: "good", o: func(o *Options) { o.Server = strings.Replace(srv.URL, "https", "http", 1) }, wantErr: "https://"},
		{name: "other object", token: "good", o: func(o *Options) { o.CAFile, o.Name = ca, "x" }, wantCode: 404, wantErr: `"x" not found`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := base
			tc.o(&o)
			rec, err := get(context.Background(), cfg(tc.token), o.Server, o, true)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				var se *StatusError
				if tc.wantCode != 0 && (!errors.As(err, &se) || se.Code != tc.wantCode) {
					t.Errorf("error %#v, want a StatusError of code %d", err, tc.wantCode)
				}
				if tc.wantCode == 503 && se.Leader != "pod-b_1" {
					t.Errorf("leader %q, want pod-b_1", se.Leader)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(rec.Recorded) != 1 || rec.Recorded[0].Replicas != 3 || rec.Recorded[0].Rule != tc.wantLast {
				t.Errorf("recording %+v (last %q), want one step of 3 replicas and last %q", rec.Recorded, rec.Recorded[0].Rule, tc.wantLast)
			}
		})
	}
}

func TestLeaderPod(t *testing.T) {
	t.Parallel()
	o := Options{LeaseNamespace: "metricscale", LeaseName: "metricscale-autoscaler"}
	lease := func(holder string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "metricscale", Name: "metricscale-autoscaler"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "metricscale", Name: "metricscale-autoscaler-5c9-abcde"}}
	cases := []struct {
		name    string
		objects []runtime.Object
		want    string
		wantErr string
	}{
		{name: "no lease", wantErr: "or pass --server"},
		{name: "no holder", objects: []runtime.Object{lease("")}, wantErr: "no autoscaler leads now"},
		{name: "outside the cluster", objects: []runtime.Object{lease("laptop_4242")}, wantErr: `the leader "laptop_4242" is not a pod`},
		{name: "default identity", objects: []runtime.Object{lease("metricscale-autoscaler-5c9-abcde_1"), pod}, want: "metricscale-autoscaler-5c9-abcde"},
		{name: "pod name identity", objects: []runtime.Object{lease("metricscale-autoscaler-5c9-abcde"), pod}, want: "metricscale-autoscaler-5c9-abcde"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := leaderPod(context.Background(), fake.NewClientset(tc.objects...), o)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("leaderPod = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
