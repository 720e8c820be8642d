package app

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/metricscale/metricscale/autoscaler/admission"
	"github.com/metricscale/metricscale/certs/certstest"
	"github.com/metricscale/metricscale/hack/freeport"
)

// TestWebhookFlags: off by default; on, it needs a certificate directory
// and an IP address.
func TestWebhookFlags(t *testing.T) {
	t.Parallel()
	if o := NewOptions(); o.Webhook.Port != 0 || o.Webhook.Validate() != nil {
		t.Errorf("default webhook options %+v: want off and valid", o.Webhook)
	}
	o := NewOptions()
	fs := pflag.NewFlagSet("autoscaler", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--webhook-port=9443", "--webhook-bind-address=127.0.0.1", "--webhook-cert-dir=/certs"}); err != nil {
		t.Fatal(err)
	}
	if o.Webhook != (WebhookOptions{BindAddress: "127.0.0.1", Port: 9443, CertDir: "/certs"}) || o.Webhook.Validate() != nil {
		t.Errorf("webhook options %+v (%v)", o.Webhook, o.Webhook.Validate())
	}
	for _, tc := range []struct {
		w    WebhookOptions
		want string
	}{
		{WebhookOptions{BindAddress: "0.0.0.0", Port: 9443}, "--webhook-cert-dir is required"},
		{WebhookOptions{BindAddress: "0.0.0.0", Port: 70000, CertDir: "/c"}, "--webhook-port"},
		{WebhookOptions{BindAddress: "localhost", Port: 9443, CertDir: "/c"}, "--webhook-bind-address"},
	} {
		o := NewOptions()
		o.Webhook = tc.w
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error with %q", tc.w, err, tc.want)
		}
	}
}

// TestServeWebhook: the webhook answers an AdmissionReview over TLS with
// the certificate of --webhook-cert-dir, without credentials, at
// admission.Path only.
func TestServeWebhook(t *testing.T) {
	t.Parallel()
	dir, caPEM := certstest.Serving(t, "127.0.0.1")
	port := freeport.For(t)
	w := WebhookOptions{BindAddress: "127.0.0.1", Port: port, CertDir: dir}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := w.serveWebhook(ctx); err != nil {
		t.Fatal(err)
	}
	client := certstest.Client(t, caPEM)
	base := "https://127.0.0.1:" + strconv.Itoa(port)
	body := `{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u1",
  "kind": {"group": "autoscaling.metricscale.dev", "version": "v1alpha1", "kind": "MetricAutoscaler"},
  "operation": "CREATE", "name": "a", "namespace": "n",
  "object": {"metadata": {"name": "a"}, "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "w"}, "maxReplicas": 3,
    "schedules": [{"name": "s", "start": "61 * * * *", "duration": "1h", "minReplicas": 2}]}}}}`
	resp, err := client.Post(base+admission.Path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if out.Response == nil || out.Response.Allowed || out.Response.UID != "u1" || !strings.Contains(out.Response.Result.Message, "spec.schedules[0].start: ") {
		t.Errorf("response %+v, want a denial naming spec.schedules[0].start", out.Response)
	}
	other, err := client.Post(base+"/metrics", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	other.Body.Close()
	if other.StatusCode != http.StatusNotFound {
		t.Errorf("POST /metrics: %d, want 404", other.StatusCode)
	}
}
