//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/metricscale/metricscale/autoscaler/admission"
	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/certs/certstest"
	"github.com/metricscale/metricscale/hack/freeport"
)

// TestAdmissionWebhook: an autoscaler of this checkout, run on the host as
// a second replica (a standby of the cluster's Lease, so it reconciles
// nothing while the cluster's autoscaler leads), serves the admission
// webhook with a certificate the test makes; a ValidatingWebhookConfiguration
// for the test's namespace points kube-apiserver at it. kube-apiserver then
// refuses a MetricAutoscaler whose formula does not compile or costs too
// much, or whose schedule's cron does not parse, naming the field, and an
// update adding such an error; it accepts a valid one. Once the webhook is
// down, failurePolicy Ignore lets writes through.
func TestAdmissionWebhook(t *testing.T) {
	ctx := context.Background()
	ns := cluster.CreateNamespace(t, "admission")
	if err := requireFormulaCRD(ctx); err != nil {
		t.Fatal(err)
	}

	// The serving certificate, for 127.0.0.1, and its CA as caBundle.
	certDir, caPEM := certstest.Serving(t, "127.0.0.1")

	port := freeport.For(t)
	cmd := exec.Command(autoscalerBinary(t),
		"--kubeconfig="+filepath.Join(cluster.Dir, "kubeconfigs", "metricscale-autoscaler.kubeconfig"),
		"--bind-address=127.0.0.1:"+strconv.Itoa(freeport.For(t)),
		"--leader-elect=true", "--leader-elect-resource-namespace=metricscale", "--leader-elect-identity=e2e-admission",
		"--webhook-port="+strconv.Itoa(port), "--webhook-bind-address=127.0.0.1", "--webhook-cert-dir="+certDir, "-v=2")
	logPath := filepath.Join(t.TempDir(), "autoscaler.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			if log, err := os.ReadFile(logPath); err == nil {
				t.Logf("the webhook's autoscaler log:\n%s", log)
			}
		}
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	Eventually(t, 60*time.Second, 200*time.Millisecond, "the webhook's TLS port", func(context.Context) (bool, string, error) {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only whether it listens
		if err != nil {
			return false, err.Error(), nil
		}
		_ = conn.Close()
		return true, "", nil
	})

	// A configuration of the test's namespace only, so that other tests'
	// writes never reach this webhook.
	name := "metricscale-e2e-" + ns
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "metricautoscalers.autoscaling.metricscale.dev",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				URL:      ptr.To("https://" + addr + admission.Path),
				CABundle: caPEM,
			},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{v1alpha1.GroupVersion.Group}, APIVersions: []string{v1alpha1.GroupVersion.Version},
					Resources: []string{v1alpha1.Resource}, Scope: ptr.To(admissionregistrationv1.NamespacedScope),
				},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To(int32(5)),
		}},
	}
	webhooks := cluster.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if _, err := webhooks.Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := webhooks.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting ValidatingWebhookConfiguration %s: %v", name, err)
		}
	})

	valid := func(name string) *v1alpha1.MetricAutoscaler {
		ma := newMA(ns, name, 1, 10, 15*time.Second, queueSpec("orders-"+ns, "10"), queueSpec("payments-"+ns, "10"))
		ma.Spec.Paused = true // nothing to reconcile here
		target := resource.MustParse("10")
		ma.Spec.Formula = &v1alpha1.Formula{
			Name:       "backlog",
			Inputs:     []v1alpha1.FormulaInput{{Name: "orders", Metric: 0}, {Name: "payments", Metric: 1}},
			Expression: "orders + 2 * payments",
			Target:     autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &target},
		}
		ma.Spec.Schedules = []v1alpha1.Schedule{{Name: "business-hours", Start: "0 8 * * 1-5", Duration: &metav1.Duration{Duration: 9 * time.Hour}, TimeZone: "Europe/Paris", MinReplicas: 3}}
		return ma
	}
	list := "[" + strings.Repeat("orders,", 29) + "orders]"
	heavy := "double(" + list + ".map(x, " + list + ".map(y, " + list + ".map(z, x * y * z).size()).size()).size())"

	// The configuration takes effect once kube-apiserver's informer has
	// it: until a dry run of a bad object is refused.
	Eventually(t, 30*time.Second, 200*time.Millisecond, "kube-apiserver calling the webhook", func(ctx context.Context) (bool, string, error) {
		ma := valid("probe")
		ma.Spec.Formula.Expression = "orders +"
		err := writeMA(ctx, ma, false, true)
		return err != nil, fmt.Sprint(err), nil
	})

	for _, tc := range []struct {
		name   string
		mutate func(*v1alpha1.MetricAutoscaler)
		says   []string
	}{
		{"does-not-compile", func(ma *v1alpha1.MetricAutoscaler) { ma.Spec.Formula.Expression = "orders +* payments" }, []string{"spec.formula.expression: "}},
		{"unknown-input", func(ma *v1alpha1.MetricAutoscaler) { ma.Spec.Formula.Expression = "orders + refunds" }, []string{"spec.formula.expression: ", "refunds"}},
		{"too-costly", func(ma *v1alpha1.MetricAutoscaler) { ma.Spec.Formula.Expression = heavy }, []string{"spec.formula.expression: ", "exceeds the limit"}},
		{"bad-cron", func(ma *v1alpha1.MetricAutoscaler) { ma.Spec.Schedules[0].Start = "0 25 * * *" }, []string{"spec.schedules[0].start: "}},
		{"bad-zone", func(ma *v1alpha1.MetricAutoscaler) { ma.Spec.Schedules[0].TimeZone = "Mars/Olympus" }, []string{"spec.schedules[0].timeZone: "}},
	} {
		ma := valid(tc.name)
		tc.mutate(ma)
		err := writeMA(ctx, ma, false, false)
		if !apierrors.IsInvalid(err) {
			t.Errorf("%s: created (%v), want it refused as Invalid", tc.name, err)
			continue
		}
		msg := err.Error()
		for _, s := range append([]string{`admission webhook "metricautoscalers.autoscaling.metricscale.dev" denied the request`}, tc.says...) {
			if !strings.Contains(msg, s) {
				t.Errorf("%s: refusal %q does not say %q", tc.name, msg, s)
			}
		}
		t.Logf("%s: %s", tc.name, msg)
	}

	ok := valid("valid")
	if err := writeMA(ctx, ok, false, false); err != nil {
		t.Fatalf("a valid MetricAutoscaler was refused: %v", err)
	}
	got, err := getMA(ctx, ns, "valid")
	if err != nil {
		t.Fatal(err)
	}
	got.Spec.Formula.Expression = heavy
	if err := writeMA(ctx, got, true, false); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.formula.expression: ") {
		t.Errorf("an update to a too costly formula: %v, want it refused naming spec.formula.expression", err)
	}
	got.Spec.Formula.Expression = "math.greatest(orders, payments)"
	if err := writeMA(ctx, got, true, false); err != nil {
		t.Errorf("a valid update was refused: %v", err)
	}

	// The webhook down: failurePolicy Ignore lets the write through (the
	// controller reports what is wrong on the object instead).
	stop()
	bad := valid("while-down")
	bad.Spec.Formula.Expression = "orders +"
	if err := writeMA(ctx, bad, false, false); err != nil {
		t.Errorf("with the webhook down and failurePolicy Ignore, a write was refused: %v", err)
	}
}

// writeMA creates (or with update, updates) a MetricAutoscaler, as a dry
// run with dryRun, and returns the API server's error.
func writeMA(ctx context.Context, ma *v1alpha1.MetricAutoscaler, update, dryRun bool) error {
	ma.APIVersion, ma.Kind = v1alpha1.GroupVersion.String(), "MetricAutoscaler"
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ma)
	if err != nil {
		return err
	}
	var dry []string
	if dryRun {
		dry = []string{metav1.DryRunAll}
	}
	client := cluster.Dynamic.Resource(v1alpha1.GroupVersionResource).Namespace(ma.Namespace)
	obj := &unstructured.Unstructured{Object: u}
	if update {
		_, err = client.Update(ctx, obj, metav1.UpdateOptions{DryRun: dry})
	} else {
		_, err = client.Create(ctx, obj, metav1.CreateOptions{DryRun: dry})
	}
	return err
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// requireFormulaCRD fails when the cluster's CRD predates spec.formula and
// spec.schedules, which it would prune before the webhook saw them.
func requireFormulaCRD(ctx context.Context) error {
	crd, err := cluster.Dynamic.Resource(crdResource).Get(ctx, v1alpha1.Resource+"."+v1alpha1.GroupVersion.Group, metav1.GetOptions{})
	if err != nil {
		return err
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		vm, _ := v.(map[string]any)
		if vm["name"] != v1alpha1.GroupVersion.Version {
			continue
		}
		props, _, _ := unstructured.NestedMap(vm, "schema", "openAPIV3Schema", "properties", "spec", "properties")
		if props["formula"] != nil && props["schedules"] != nil {
			return nil
		}
	}
	return errors.New("the cluster's MetricAutoscaler CRD has no spec.formula or spec.schedules: restart the cluster from this checkout (hack/cluster.sh down && hack/cluster.sh up)")
}
