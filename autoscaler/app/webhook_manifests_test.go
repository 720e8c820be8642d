package app

import (
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"

	"github.com/metricscale/metricscale/autoscaler/admission"
)

// TestWebhookManifests: manifests/webhook's arguments are flags of this
// program that validate, serve on the container port the Service's webhook
// port reaches, from the mounted certificate, and the configuration calls
// the handler's path.
func TestWebhookManifests(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../manifests/webhook/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Patches []struct {
			Target struct{ Kind string }
			Patch  string
		}
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatal(err)
	}
	var args []string
	var containerPort int
	var mountPath string
	for _, p := range k.Patches {
		var ops []struct {
			Path  string
			Value any
		}
		if err := yaml.Unmarshal([]byte(p.Patch), &ops); err != nil {
			t.Fatal(err)
		}
		for _, op := range ops {
			switch {
			case strings.HasSuffix(op.Path, "/args/-"):
				args = append(args, op.Value.(string))
			case strings.HasSuffix(op.Path, "/ports/-") && p.Target.Kind == "Deployment":
				containerPort = int(op.Value.(map[string]any)["containerPort"].(float64))
			case strings.HasSuffix(op.Path, "/volumeMounts"):
				mountPath = op.Value.([]any)[0].(map[string]any)["mountPath"].(string)
			}
		}
	}
	o := NewOptions()
	fs := pflag.NewFlagSet("autoscaler", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("manifests/webhook's args %v: %v", args, err)
	}
	if err := o.Webhook.Validate(); err != nil {
		t.Error(err)
	}
	if o.Webhook.Port == 0 || o.Webhook.Port != containerPort || o.Webhook.CertDir != mountPath {
		t.Errorf("--webhook-port %d on container port %d, --webhook-cert-dir %q of the mount %q", o.Webhook.Port, containerPort, o.Webhook.CertDir, mountPath)
	}
	data, err = os.ReadFile("../../manifests/webhook/webhook.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(data, &vwc); err != nil {
		t.Fatal(err)
	}
	svc := vwc.Webhooks[0].ClientConfig.Service
	if svc == nil || svc.Path == nil || *svc.Path != admission.Path || svc.Port == nil || *svc.Port != 443 {
		t.Errorf("the configuration calls %+v, want the Service's port 443 at %s", svc, admission.Path)
	}
}
