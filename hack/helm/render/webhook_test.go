package render

import (
	"encoding/base64"
	"slices"
	"strconv"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const (
	webhookConfig = "ValidatingWebhookConfiguration//metricscale-autoscaler"
	autoscalerDep = "Deployment/metricscale/metricscale-autoscaler"
	autoscalerSvc = "Service/metricscale/metricscale-autoscaler"
)

// checkWebhookWiring: the configuration calls the autoscaler's Service on
// 443 at the handler's path for MetricAutoscalers' creates and updates,
// failing open; the Service's webhook port reaches the container's, which
// --webhook-port serves with the certificate of Secret secret mounted at
// --webhook-cert-dir. It returns the configuration.
func checkWebhookWiring(t *testing.T, objs map[string]object, secret string) *admissionregistrationv1.ValidatingWebhookConfiguration {
	t.Helper()
	vwc := as[admissionregistrationv1.ValidatingWebhookConfiguration](t, objs, webhookConfig)
	if len(vwc.Webhooks) != 1 {
		t.Fatalf("%d webhooks", len(vwc.Webhooks))
	}
	w := vwc.Webhooks[0]
	svc := w.ClientConfig.Service
	if svc == nil || svc.Name != "metricscale-autoscaler" || svc.Namespace != "metricscale" || svc.Path == nil || *svc.Path != "/validate-metricautoscaler" || svc.Port == nil || *svc.Port != 443 {
		t.Errorf("clientConfig %+v", w.ClientConfig)
	}
	if w.FailurePolicy == nil || *w.FailurePolicy != admissionregistrationv1.Ignore || w.SideEffects == nil || *w.SideEffects != admissionregistrationv1.SideEffectClassNone ||
		!slices.Equal(w.AdmissionReviewVersions, []string{"v1"}) || w.TimeoutSeconds == nil || *w.TimeoutSeconds > 10 {
		t.Errorf("webhook %s: failurePolicy %v, sideEffects %v, versions %v, timeout %v", w.Name, w.FailurePolicy, w.SideEffects, w.AdmissionReviewVersions, w.TimeoutSeconds)
	}
	if len(w.Rules) != 1 || !slices.Equal(w.Rules[0].Resources, []string{"metricautoscalers"}) || !slices.Equal(w.Rules[0].APIGroups, []string{"autoscaling.metricscale.dev"}) ||
		!slices.Equal(w.Rules[0].Operations, []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}) {
		t.Errorf("rules %+v", w.Rules)
	}
	s := as[corev1.Service](t, objs, autoscalerSvc)
	var target string
	for _, p := range s.Spec.Ports {
		if p.Port == 443 {
			target = p.TargetPort.String()
		}
	}
	d := as[appsv1.Deployment](t, objs, autoscalerDep)
	c := d.Spec.Template.Spec.Containers[0]
	var port int32
	for _, p := range c.Ports {
		if p.Name == target {
			port = p.ContainerPort
		}
	}
	if port == 0 || !slices.Contains(c.Args, "--webhook-port="+strconv.Itoa(int(port))) {
		t.Errorf("Service port 443 → %q, container ports %+v, args %v: the Service does not reach --webhook-port", target, c.Ports, c.Args)
	}
	var dir string
	for _, m := range c.VolumeMounts {
		if m.Name == "webhook-cert" {
			dir = m.MountPath
		}
	}
	if dir == "" || !slices.Contains(c.Args, "--webhook-cert-dir="+dir) {
		t.Errorf("mounts %+v, args %v: --webhook-cert-dir is not the mounted certificate", c.VolumeMounts, c.Args)
	}
	found := false
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "webhook-cert" {
			found = v.Secret != nil && v.Secret.SecretName == secret
		}
	}
	if !found {
		t.Errorf("volumes %+v: want webhook-cert from Secret %s", d.Spec.Template.Spec.Volumes, secret)
	}
	return vwc
}

// TestWebhook: autoscaler.webhook.enabled in each cert mode that gives a
// CA kube-apiserver can verify with; off by default.
func TestWebhook(t *testing.T) {
	t.Parallel()
	t.Run("off", func(t *testing.T) {
		t.Parallel()
		objs := objects(t, Options{Set: []string{"certs.mode=selfSigned"}})
		if _, ok := objs[webhookConfig]; ok {
			t.Error("the webhook is configured by default")
		}
		d := as[appsv1.Deployment](t, objs, autoscalerDep)
		for _, a := range d.Spec.Template.Spec.Containers[0].Args {
			if strings.HasPrefix(a, "--webhook") {
				t.Errorf("arg %s by default", a)
			}
		}
	})
	t.Run("selfSigned", func(t *testing.T) {
		t.Parallel()
		objs := objects(t, Options{Set: []string{"certs.mode=selfSigned", "autoscaler.webhook.enabled=true"}})
		s := as[corev1.Secret](t, objs, "Secret/metricscale/metricscale-autoscaler-webhook-cert")
		checkCertificate(t, s.Data["ca.crt"], s.Data["tls.crt"], "metricscale-autoscaler.metricscale.svc")
		vwc := checkWebhookWiring(t, objs, s.Name)
		if string(vwc.Webhooks[0].ClientConfig.CABundle) != string(s.Data["ca.crt"]) {
			t.Error("caBundle is not the Secret's ca.crt")
		}
	})
	t.Run("certManager", func(t *testing.T) {
		t.Parallel()
		// Without the adapter too: the chart's CA is made for the webhook.
		for _, set := range [][]string{{"certs.mode=certManager", "autoscaler.webhook.enabled=true"}, {"certs.mode=certManager", "autoscaler.webhook.enabled=true", "adapter.enabled=false"}} {
			objs := objects(t, Options{Set: set})
			crt := as[unstructured.Unstructured](t, objs, "Certificate/metricscale/metricscale-autoscaler-webhook-cert")
			issuer, _, _ := unstructured.NestedString(crt.Object, "spec", "issuerRef", "name")
			as[unstructured.Unstructured](t, objs, "Issuer/metricscale/"+issuer)
			dns, _, _ := unstructured.NestedStringSlice(crt.Object, "spec", "dnsNames")
			if secret, _, _ := unstructured.NestedString(crt.Object, "spec", "secretName"); !slices.Contains(dns, "metricscale-autoscaler.metricscale.svc") || secret != "metricscale-autoscaler-webhook-cert" {
				t.Errorf("%v: dnsNames %v, secretName %s", set, dns, secret)
			}
			vwc := checkWebhookWiring(t, objs, "metricscale-autoscaler-webhook-cert")
			if vwc.Annotations["cert-manager.io/inject-ca-from"] != "metricscale/metricscale-autoscaler-webhook-cert" {
				t.Errorf("%v: annotations %v", set, vwc.Annotations)
			}
			_, adapterCert := objs["Certificate/metricscale/metricscale-adapter-serving-cert"]
			if adapterCert == slices.Contains(set, "adapter.enabled=false") {
				t.Errorf("%v: the adapter's Certificate rendered: %v", set, adapterCert)
			}
		}
	})
	t.Run("provided", func(t *testing.T) {
		t.Parallel()
		objs := objects(t, Options{Set: []string{"certs.mode=provided", "certs.provided.secretName=my-cert", "certs.provided.caBundle=" + testCABundle,
			"autoscaler.webhook.enabled=true", "autoscaler.webhook.provided.secretName=my-webhook-cert"}})
		vwc := checkWebhookWiring(t, objs, "my-webhook-cert")
		if base64.StdEncoding.EncodeToString(vwc.Webhooks[0].ClientConfig.CABundle) != testCABundle {
			t.Error("caBundle is not certs.provided.caBundle")
		}
	})
	t.Run("failurePolicy Fail and a NetworkPolicy", func(t *testing.T) {
		t.Parallel()
		objs := objects(t, Options{Set: []string{"certs.mode=selfSigned", "autoscaler.webhook.enabled=true", "autoscaler.webhook.failurePolicy=Fail", "autoscaler.webhook.port=10443", "networkPolicy.enabled=true"}})
		vwc := as[admissionregistrationv1.ValidatingWebhookConfiguration](t, objs, webhookConfig)
		if p := vwc.Webhooks[0].FailurePolicy; p == nil || *p != admissionregistrationv1.Fail {
			t.Errorf("failurePolicy %v", p)
		}
		np := as[networkingv1.NetworkPolicy](t, objs, "NetworkPolicy/metricscale/metricscale-autoscaler")
		open := false
		for _, r := range np.Spec.Ingress {
			for _, p := range r.Ports {
				open = open || (p.Port != nil && p.Port.IntValue() == 10443)
			}
		}
		if !open {
			t.Errorf("the NetworkPolicy does not admit the webhook's port: %+v", np.Spec.Ingress)
		}
	})
}

// TestWebhookInvalidValues: a webhook without a certificate kube-apiserver
// can verify is refused at install.
func TestWebhookInvalidValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		set  []string
		want string
	}{
		{"adapter cert mode", []string{"autoscaler.webhook.enabled=true"}, "autoscaler.webhook: kube-apiserver verifies"},
		{"provided without a Secret", []string{"certs.mode=provided", "certs.provided.secretName=x", "certs.provided.caBundle=" + testCABundle, "autoscaler.webhook.enabled=true"}, "autoscaler.webhook.provided.secretName is required"},
		{"provided without a CA", []string{"adapter.enabled=false", "certs.mode=provided", "autoscaler.webhook.enabled=true", "autoscaler.webhook.provided.secretName=x"}, "certs.provided.caBundle is required with autoscaler.webhook.enabled"},
		{"bad failure policy", []string{"certs.mode=selfSigned", "autoscaler.webhook.enabled=true", "autoscaler.webhook.failurePolicy=Retry"}, "/autoscaler/webhook/failurePolicy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Template(chartDir, Options{Set: tc.set})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("template error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestWebhookMatchesKustomize: autoscaler.webhook.enabled (without the
// adapter, certificate provided as the overlay expects it) renders the
// objects of `kustomize build manifests/webhook`, but for the caBundle,
// which the overlay leaves to the user (its kustomization.yaml says how).
func TestWebhookMatchesKustomize(t *testing.T) {
	t.Parallel()
	kust, err := Kustomize(manifestsDir + "/webhook")
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := Template(chartDir, Options{Set: []string{"adapter.enabled=false", "certs.mode=provided", "certs.provided.caBundle=" + testCABundle,
		"autoscaler.webhook.enabled=true", "autoscaler.webhook.provided.secretName=metricscale-autoscaler-webhook-cert"}})
	if err != nil {
		t.Fatal(err)
	}
	want := parse(t, "kustomize build manifests/webhook", kust)
	got := parse(t, "chart", rendered)
	delete(want, "Namespace//metricscale")
	vwc, ok := got[webhookConfig]
	if !ok {
		t.Fatalf("the chart renders no %s", webhookConfig)
	}
	hook := vwc["webhooks"].([]any)[0].(map[string]any)["clientConfig"].(map[string]any)
	if hook["caBundle"] != testCABundle {
		t.Errorf("the chart's caBundle %v, want certs.provided.caBundle", hook["caBundle"])
	}
	delete(hook, "caBundle")
	compareObjects(t, want, got)
}
