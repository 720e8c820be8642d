package render

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"sigs.k8s.io/kustomize/api/hasher"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/yaml"
)

// matrix are the value sets every check runs on: each switch of the chart.
var matrix = []struct {
	name string
	set  []string
}{
	{"defaults", nil},
	{"adapter only", []string{"autoscaler.enabled=false"}},
	{"autoscaler only", []string{"adapter.enabled=false"}},
	{"autoscaler without its CRD", []string{"adapter.enabled=false", "autoscaler.installCRD=false"}},
	{"selfSigned", []string{"certs.mode=selfSigned"}},
	{"certManager", []string{"certs.mode=certManager"}},
	{"certManager with an issuer", []string{"certs.mode=certManager", "certs.certManager.issuerRef.name=corp-ca", "certs.certManager.issuerRef.kind=ClusterIssuer"}},
	{"provided", []string{"certs.mode=provided", "certs.provided.secretName=my-cert", "certs.provided.caBundle=" + testCABundle}},
	{"metrics API", []string{"adapter.metricsAPI.enabled=true"}},
	{"custom v1beta2 off", []string{"adapter.apiServices.customMetrics.v1beta2=false"}},
	{"custom v1beta1 off", []string{"adapter.apiServices.customMetrics.v1beta1=false"}},
	{"custom off", []string{"adapter.apiServices.customMetrics.v1beta2=false", "adapter.apiServices.customMetrics.v1beta1=false"}},
	{"external off", []string{"adapter.apiServices.externalMetrics.v1beta1=false"}},
	{"push off", []string{"adapter.push.enabled=false"}},
	{"push token made by the chart", []string{"adapter.push.tokenSecret.create=true"}},
	{"stable config name", []string{"adapter.configHashSuffix=false"}},
	{"selector resources", []string{"adapter.config.selectorResources={deployments.apps,namespaces,rollouts.argoproj.io}"}},
	{"other release name", []string{"fullnameOverride=ms"}},
	{"change feed, selfSigned", []string{"certs.mode=selfSigned", "autoscaler.changeFeed.enabled=true"}},
	{"change feed, provided", []string{"certs.mode=provided", "certs.provided.secretName=my-cert", "certs.provided.caBundle=" + testCABundle, "autoscaler.changeFeed.enabled=true"}},
	{"change feed, unverified", []string{"autoscaler.changeFeed.enabled=true", "autoscaler.changeFeed.insecureSkipTLSVerify=true"}},
	{"prometheus-adapter layout", []string{"prometheus.url=http://prometheus.monitoring.svc", "adapter.push.enabled=false"}},
	{"prometheus-adapter layout, no port", []string{"prometheus.url=http://prometheus.monitoring.svc:9090", "prometheus.port=null", "adapter.push.enabled=false"}},
	{"prometheusRule", []string{"prometheusRule.enabled=true", "prometheusRule.namespace=monitoring", "prometheusRule.labels.release=kube-prometheus-stack"}},
	{"grafanaDashboard", []string{"grafanaDashboard.enabled=true", "grafanaDashboard.annotations.grafana_folder=Autoscaling"}},
}

// testCABundle is a real CA certificate, base64 (certs.provided.caBundle).
var testCABundle = func() string {
	out, err := Template(chartDir, Options{Set: []string{"certs.mode=selfSigned", "autoscaler.enabled=false"}})
	if err != nil {
		panic(err)
	}
	for _, doc := range splitDocs(out) {
		var s corev1.Secret
		if yaml.Unmarshal(doc, &s) == nil && s.Kind == "Secret" {
			return base64.StdEncoding.EncodeToString(s.Data["ca.crt"])
		}
	}
	panic("no Secret in the selfSigned render")
}()

func TestLint(t *testing.T) {
	t.Parallel()
	for _, tc := range matrix {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			msgs, err := Lint(chartDir, Options{Set: tc.set})
			if err != nil {
				t.Fatalf("lint: %v", err)
			}
			for _, m := range msgs {
				t.Logf("lint: %s", m.Error())
			}
		})
	}
}

// objects renders the chart and returns its objects by kind/namespace/name.
func objects(t *testing.T, o Options) map[string]object {
	t.Helper()
	out, err := Template(chartDir, o)
	if err != nil {
		t.Fatal(err)
	}
	return parse(t, "chart", out)
}

// as converts an object to a typed one, failing on any unknown field.
func as[T any](t *testing.T, objs map[string]object, k string) *T {
	t.Helper()
	o, ok := objs[k]
	if !ok {
		t.Fatalf("the render has no %s; it has %s", k, strings.Join(slices.Sorted(maps.Keys(objs)), ", "))
	}
	data, err := yaml.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var v T
	if err := yaml.UnmarshalStrict(data, &v); err != nil {
		t.Fatalf("%s: %v", k, err)
	}
	return &v
}

func apiServiceNames(objs map[string]object) []string {
	var names []string
	for k := range objs {
		if n, ok := strings.CutPrefix(k, "APIService//"); ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// TestRender checks each switch of the matrix on the rendered objects.
func TestRender(t *testing.T) {
	t.Parallel()
	all := []string{"v1beta1.custom.metrics.k8s.io", "v1beta1.external.metrics.k8s.io", "v1beta2.custom.metrics.k8s.io"}
	tests := []struct {
		name  string
		set   []string
		check func(t *testing.T, objs map[string]object)
	}{
		{"adapter only", []string{"autoscaler.enabled=false"}, func(t *testing.T, objs map[string]object) {
			for k := range objs {
				if strings.Contains(k, "metricscale-autoscaler") {
					t.Errorf("autoscaler.enabled=false renders %s", k)
				}
			}
			if _, ok := objs["Deployment/metricscale/metricscale-adapter"]; !ok {
				t.Error("no adapter Deployment")
			}
		}},
		{"autoscaler only", []string{"adapter.enabled=false"}, func(t *testing.T, objs map[string]object) {
			for k := range objs {
				if strings.Contains(k, "adapter") || strings.HasPrefix(k, "APIService/") {
					t.Errorf("adapter.enabled=false renders %s", k)
				}
			}
			crd := as[unstructured.Unstructured](t, objs, "CustomResourceDefinition//metricautoscalers.autoscaling.metricscale.dev")
			if crd.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
				t.Errorf("CRD annotations %v: want helm.sh/resource-policy=keep", crd.GetAnnotations())
			}
		}},
		{"each APIService off", []string{"adapter.apiServices.customMetrics.v1beta1=false"}, func(t *testing.T, objs map[string]object) {
			if got := apiServiceNames(objs); !slices.Equal(got, []string{all[1], all[2]}) {
				t.Errorf("APIServices %v", got)
			}
		}},
		{"external off", []string{"adapter.apiServices.externalMetrics.v1beta1=false"}, func(t *testing.T, objs map[string]object) {
			if got := apiServiceNames(objs); !slices.Equal(got, []string{all[0], all[2]}) {
				t.Errorf("APIServices %v", got)
			}
		}},
		{"metrics API", []string{"adapter.metricsAPI.enabled=true"}, func(t *testing.T, objs map[string]object) {
			if got := apiServiceNames(objs); !slices.Contains(got, "v1beta1.metrics.k8s.io") || len(got) != 4 {
				t.Errorf("APIServices %v: want the three and v1beta1.metrics.k8s.io", got)
			}
			cr := as[rbacv1.ClusterRole](t, objs, "ClusterRole//metricscale-adapter-node-reader")
			if len(cr.Rules) != 1 || !slices.Equal(cr.Rules[0].Resources, []string{"nodes"}) || !slices.Equal(cr.Rules[0].Verbs, []string{"list", "watch"}) {
				t.Errorf("node reader rules %+v", cr.Rules)
			}
			as[rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding//metricscale-adapter-node-reader")
			agg := as[rbacv1.ClusterRole](t, objs, "ClusterRole//metricscale:aggregated-metrics-reader")
			if agg.Labels["rbac.authorization.k8s.io/aggregate-to-view"] != "true" {
				t.Errorf("aggregated reader labels %v", agg.Labels)
			}
		}},
		{"selector resources", []string{"adapter.config.selectorResources={deployments.apps,namespaces,rollouts.argoproj.io}"}, func(t *testing.T, objs map[string]object) {
			cr := as[rbacv1.ClusterRole](t, objs, "ClusterRole//metricscale-adapter-resource-reader")
			got := map[string][]string{}
			for _, r := range cr.Rules {
				if !slices.Equal(r.Verbs, []string{"list", "watch"}) || len(r.APIGroups) != 1 {
					t.Errorf("rule %+v: want one group, list and watch", r)
				}
				got[r.APIGroups[0]] = r.Resources
			}
			want := map[string][]string{"": {"pods", "namespaces"}, "apps": {"deployments"}, "argoproj.io": {"rollouts"}}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("resource reader grants %v, want %v", got, want)
			}
		}},
		{"push off", []string{"adapter.push.enabled=false"}, func(t *testing.T, objs map[string]object) {
			d := as[appsv1.Deployment](t, objs, "Deployment/metricscale/metricscale-adapter")
			c := d.Spec.Template.Spec.Containers[0]
			if !slices.Contains(c.Args, "--push-port=0") || slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--push-token-file") }) {
				t.Errorf("args %v: want --push-port=0 and no token", c.Args)
			}
			if len(d.Spec.Template.Spec.Volumes) != 2 || slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "POD_IP" }) {
				t.Errorf("volumes %v env %v: want serving-cert and config only, no POD_IP", d.Spec.Template.Spec.Volumes, c.Env)
			}
			for _, k := range []string{"Service/metricscale/metricscale-adapter-push", "Service/metricscale/metricscale-adapter-peers"} {
				if _, ok := objs[k]; ok {
					t.Errorf("push off renders %s", k)
				}
			}
		}},
		{"push token", []string{"adapter.push.tokenSecret.create=true"}, func(t *testing.T, objs map[string]object) {
			s := as[corev1.Secret](t, objs, "Secret/metricscale/metricscale-adapter-push-token")
			if len(s.Data["token"]) < 32 {
				t.Errorf("token %q: want 32 characters or more", s.Data["token"])
			}
		}},
		{"change feed verified with the chart's CA", []string{"certs.mode=selfSigned", "autoscaler.changeFeed.enabled=true", "autoscaler.changeFeed.minInterval=500ms"}, func(t *testing.T, objs map[string]object) {
			d := as[appsv1.Deployment](t, objs, "Deployment/metricscale/metricscale-autoscaler")
			spec := d.Spec.Template.Spec
			args := spec.Containers[0].Args
			for _, want := range []string{"--change-feed-url=https://metricscale-adapter.metricscale.svc", "--change-feed-ca-file=/var/run/metricscale/adapter-ca/ca.crt", "--change-feed-min-interval=500ms"} {
				if !slices.Contains(args, want) {
					t.Errorf("args %v: no %s", args, want)
				}
			}
			if slices.Contains(args, "--change-feed-insecure-skip-tls-verify") {
				t.Errorf("args %v: verification off", args)
			}
			if len(spec.Volumes) != 1 || spec.Volumes[0].Secret == nil || spec.Volumes[0].Secret.SecretName != "metricscale-adapter-serving-cert" ||
				len(spec.Volumes[0].Secret.Items) != 1 || spec.Volumes[0].Secret.Items[0].Key != "ca.crt" {
				t.Errorf("volumes %+v: want ca.crt of the adapter's serving certificate Secret", spec.Volumes)
			}
			// The Secret the chart makes holds that key, and the URL's host
			// is one of the certificate's names.
			s := as[corev1.Secret](t, objs, "Secret/metricscale/metricscale-adapter-serving-cert")
			block, _ := pem.Decode(s.Data["tls.crt"])
			if block == nil {
				t.Fatal("no certificate in the serving Secret")
			}
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Data["ca.crt"]) == 0 || cert.VerifyHostname("metricscale-adapter.metricscale.svc") != nil {
				t.Errorf("serving Secret: ca.crt %d bytes, names %v: want a CA and the Service's name", len(s.Data["ca.crt"]), cert.DNSNames)
			}
		}},
		{"change feed verified with a provided CA", []string{"certs.mode=provided", "certs.provided.secretName=my-cert", "certs.provided.caBundle=" + testCABundle, "autoscaler.changeFeed.enabled=true"}, func(t *testing.T, objs map[string]object) {
			d := as[appsv1.Deployment](t, objs, "Deployment/metricscale/metricscale-autoscaler")
			if v := d.Spec.Template.Spec.Volumes; len(v) != 1 || v[0].ConfigMap == nil || v[0].ConfigMap.Name != "metricscale-autoscaler-adapter-ca" {
				t.Errorf("volumes %+v: want the CA ConfigMap", v)
			}
			cm := as[corev1.ConfigMap](t, objs, "ConfigMap/metricscale/metricscale-autoscaler-adapter-ca")
			want, _ := base64.StdEncoding.DecodeString(testCABundle)
			if strings.TrimSpace(cm.Data["ca.crt"]) != strings.TrimSpace(string(want)) {
				t.Errorf("CA ConfigMap %q, want certs.provided.caBundle decoded", cm.Data["ca.crt"])
			}
		}},
		{"change feed unverified", []string{"autoscaler.changeFeed.enabled=true", "autoscaler.changeFeed.insecureSkipTLSVerify=true", "autoscaler.changeFeed.url=https://adapter.elsewhere.svc:6443"}, func(t *testing.T, objs map[string]object) {
			d := as[appsv1.Deployment](t, objs, "Deployment/metricscale/metricscale-autoscaler")
			args := d.Spec.Template.Spec.Containers[0].Args
			if !slices.Contains(args, "--change-feed-insecure-skip-tls-verify") || !slices.Contains(args, "--change-feed-url=https://adapter.elsewhere.svc:6443") {
				t.Errorf("args %v", args)
			}
			if v := d.Spec.Template.Spec.Volumes; len(v) != 0 {
				t.Errorf("volumes %+v: want none", v)
			}
		}},
		{"change feed off by default", nil, func(t *testing.T, objs map[string]object) {
			d := as[appsv1.Deployment](t, objs, "Deployment/metricscale/metricscale-autoscaler")
			if slices.ContainsFunc(d.Spec.Template.Spec.Containers[0].Args, func(a string) bool { return strings.HasPrefix(a, "--change-feed") }) {
				t.Errorf("args %v", d.Spec.Template.Spec.Containers[0].Args)
			}
			// Its RBAC is there all the same: the autoscaler alone may subscribe.
			cr := as[rbacv1.ClusterRole](t, objs, "ClusterRole//metricscale-autoscaler")
			if !slices.ContainsFunc(cr.Rules, func(r rbacv1.PolicyRule) bool {
				return slices.Equal(r.NonResourceURLs, []string{"/changes"}) && slices.Equal(r.Verbs, []string{"get"})
			}) {
				t.Errorf("autoscaler rules %+v: no get on /changes", cr.Rules)
			}
		}},
		{"other namespace and release", []string{"fullnameOverride=ms"}, func(t *testing.T, objs map[string]object) {
			d := as[appsv1.Deployment](t, objs, "Deployment/monitoring/ms-adapter")
			if !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--push-peers-dns=ms-adapter-peers.monitoring.svc") {
				t.Errorf("args %v", d.Spec.Template.Spec.Containers[0].Args)
			}
			a := as[apiregv1.APIService](t, objs, "APIService//v1beta1.external.metrics.k8s.io")
			if a.Spec.Service.Name != "ms-adapter" || a.Spec.Service.Namespace != "monitoring" {
				t.Errorf("APIService service %+v", a.Spec.Service)
			}
			rb := as[rbacv1.RoleBinding](t, objs, "RoleBinding/kube-system/ms-adapter-auth-reader")
			if rb.Subjects[0].Namespace != "monitoring" {
				t.Errorf("auth reader subject %+v", rb.Subjects)
			}
			as[appsv1.Deployment](t, objs, "Deployment/monitoring/ms-autoscaler")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := Options{Set: tc.set}
			if tc.name == "other namespace and release" {
				o.Namespace = "monitoring"
			}
			tc.check(t, objects(t, o))
		})
	}
}

// servingCert checks that the APIServices trust the adapter's serving
// certificate for the name the aggregator dials.
func checkCertificate(t *testing.T, caBundle, crtPEM []byte, dnsName string) {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caBundle) {
		t.Fatalf("caBundle holds no PEM certificate: %q", caBundle)
	}
	block, _ := pem.Decode(crtPEM)
	if block == nil {
		t.Fatalf("tls.crt is not PEM: %q", crtPEM)
	}
	crt, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := crt.Verify(x509.VerifyOptions{Roots: pool, DNSName: dnsName, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("the serving certificate does not verify for %s with the caBundle: %v", dnsName, err)
	}
}

func TestCertModes(t *testing.T) {
	t.Parallel()
	t.Run("adapter", func(t *testing.T) {
		t.Parallel()
		objs := objects(t, Options{})
		for _, n := range apiServiceNames(objs) {
			a := as[apiregv1.APIService](t, objs, "APIService//"+n)
			if !a.Spec.InsecureSkipTLSVerify || len(a.Spec.CABundle) > 0 {
				t.Errorf("%s: insecureSkipTLSVerify %v, caBundle %d bytes", n, a.Spec.InsecureSkipTLSVerify, len(a.Spec.CABundle))
			}
		}
		d := as[appsv1.Deployment](t, objs, "Deployment/metricscale/metricscale-adapter")
		if v := d.Spec.Template.Spec.Volumes[0]; v.Name != "serving-cert" || v.EmptyDir == nil {
			t.Errorf("serving-cert volume %+v: want an emptyDir", v)
		}
	})
	t.Run("selfSigned", func(t *testing.T) {
		t.Parallel()
		objs := objects(t, Options{Set: []string{"certs.mode=selfSigned"}})
		s := as[corev1.Secret](t, objs, "Secret/metricscale/metricscale-adapter-serving-cert")
		if s.Type != corev1.SecretTypeTLS {
			t.Errorf("Secret type %q", s.Type)
		}
		checkCertificate(t, s.Data["ca.crt"], s.Data["tls.crt"], "metricscale-adapter.metricscale.svc")
		for _, n := range apiServiceNames(objs) {
			a := as[apiregv1.APIService](t, objs, "APIService//"+n)
			if a.Spec.InsecureSkipTLSVerify || string(a.Spec.CABundle) != string(s.Data["ca.crt"]) {
				t.Errorf("%s: insecureSkipTLSVerify %v, caBundle is not the Secret's ca.crt", n, a.Spec.InsecureSkipTLSVerify)
			}
		}
		d := as[appsv1.Deployment](t, objs, "Deployment/metricscale/metricscale-adapter")
		if v := d.Spec.Template.Spec.Volumes[0]; v.Secret == nil || v.Secret.SecretName != s.Name {
			t.Errorf("serving-cert volume %+v: want Secret %s", v, s.Name)
		}
		if args := d.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--tls-cert-file=/var/run/serving-cert/tls.crt") {
			t.Errorf("args %v: want --tls-cert-file", args)
		}
	})
	t.Run("certManager", func(t *testing.T) {
		t.Parallel()
		objs := objects(t, Options{Set: []string{"certs.mode=certManager"}})
		crt := as[unstructured.Unstructured](t, objs, "Certificate/metricscale/metricscale-adapter-serving-cert")
		issuer, _, _ := unstructured.NestedString(crt.Object, "spec", "issuerRef", "name")
		as[unstructured.Unstructured](t, objs, "Issuer/metricscale/"+issuer)
		ca := as[unstructured.Unstructured](t, objs, "Certificate/metricscale/metricscale-adapter-ca")
		if isCA, _, _ := unstructured.NestedBool(ca.Object, "spec", "isCA"); !isCA {
			t.Error("the CA Certificate is not isCA")
		}
		dns, _, _ := unstructured.NestedStringSlice(crt.Object, "spec", "dnsNames")
		if !slices.Contains(dns, "metricscale-adapter.metricscale.svc") {
			t.Errorf("dnsNames %v", dns)
		}
		for _, n := range apiServiceNames(objs) {
			a := as[apiregv1.APIService](t, objs, "APIService//"+n)
			if a.Annotations["cert-manager.io/inject-ca-from"] != "metricscale/metricscale-adapter-serving-cert" || a.Spec.InsecureSkipTLSVerify || len(a.Spec.CABundle) > 0 {
				t.Errorf("%s: annotations %v, insecureSkipTLSVerify %v, caBundle %d bytes", n, a.Annotations, a.Spec.InsecureSkipTLSVerify, len(a.Spec.CABundle))
			}
		}
		objs = objects(t, Options{Set: []string{"certs.mode=certManager", "certs.certManager.issuerRef.name=corp", "certs.certManager.issuerRef.kind=ClusterIssuer"}})
		crt = as[unstructured.Unstructured](t, objs, "Certificate/metricscale/metricscale-adapter-serving-cert")
		if ref, _, _ := unstructured.NestedStringMap(crt.Object, "spec", "issuerRef"); ref["name"] != "corp" || ref["kind"] != "ClusterIssuer" {
			t.Errorf("issuerRef %v", ref)
		}
		if _, ok := objs["Issuer/metricscale/metricscale-adapter-ca"]; ok {
			t.Error("with an issuerRef the chart still makes its own CA")
		}
	})
	t.Run("provided", func(t *testing.T) {
		t.Parallel()
		objs := objects(t, Options{Set: []string{"certs.mode=provided", "certs.provided.secretName=my-cert", "certs.provided.caBundle=" + testCABundle}})
		for _, n := range apiServiceNames(objs) {
			a := as[apiregv1.APIService](t, objs, "APIService//"+n)
			if base64.StdEncoding.EncodeToString(a.Spec.CABundle) != testCABundle {
				t.Errorf("%s: caBundle is not certs.provided.caBundle", n)
			}
		}
		d := as[appsv1.Deployment](t, objs, "Deployment/metricscale/metricscale-adapter")
		if v := d.Spec.Template.Spec.Volumes[0]; v.Secret == nil || v.Secret.SecretName != "my-cert" {
			t.Errorf("serving-cert volume %+v: want Secret my-cert", v)
		}
		for k := range objs {
			// The push token (adapter.push.tokenSecret.create) is no certificate.
			if strings.HasPrefix(k, "Secret/") && k != "Secret/metricscale/metricscale-adapter-push-token" {
				t.Errorf("provided mode renders %s", k)
			}
		}
	})
}

// clients is an engine.ClientProvider over a fake dynamic client holding
// objects, for lookup in tests.
type clients struct{ dyn dynamic.Interface }

func newClients(objs ...runtime.Object) clients {
	return clients{dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), objs...)}
}

func (c clients) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	if apiVersion != "v1" || kind != "Secret" {
		return nil, false, fmt.Errorf("lookup of %s %s: not in this test", apiVersion, kind)
	}
	return c.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}), true, nil
}

// TestGeneratedSecretsKeptOnUpgrade: an upgrade (lookup finds the Secrets the
// install made) renders the same certificate, CA and push token; an install
// generates new ones.
func TestGeneratedSecretsKeptOnUpgrade(t *testing.T) {
	t.Parallel()
	set := []string{"certs.mode=selfSigned", "adapter.push.tokenSecret.create=true"}
	first := objects(t, Options{Set: set})
	var live []runtime.Object
	for _, k := range []string{"Secret/metricscale/metricscale-adapter-serving-cert", "Secret/metricscale/metricscale-adapter-push-token"} {
		u := as[unstructured.Unstructured](t, first, k)
		live = append(live, u)
	}
	upgrade := objects(t, Options{Set: set, Clients: newClients(live...)})
	fresh := objects(t, Options{Set: set, Clients: newClients()})
	for _, k := range []string{"Secret/metricscale/metricscale-adapter-serving-cert", "Secret/metricscale/metricscale-adapter-push-token"} {
		a, b, c := as[corev1.Secret](t, first, k), as[corev1.Secret](t, upgrade, k), as[corev1.Secret](t, fresh, k)
		if fmt.Sprint(a.Data) != fmt.Sprint(b.Data) {
			t.Errorf("%s: the upgrade generated new data", k)
		}
		if fmt.Sprint(a.Data) == fmt.Sprint(c.Data) {
			t.Errorf("%s: two installs generated the same data", k)
		}
	}
	s := as[corev1.Secret](t, first, "Secret/metricscale/metricscale-adapter-serving-cert")
	a := as[apiregv1.APIService](t, upgrade, "APIService//v1beta1.external.metrics.k8s.io")
	if string(a.Spec.CABundle) != string(s.Data["ca.crt"]) {
		t.Error("after the upgrade the caBundle is not the kept CA")
	}
}

// TestConfigMapName: with configHashSuffix the ConfigMap's name is the one
// kustomize's configMapGenerator gives the same data (its hasher), for
// configs with characters JSON escapes; without, a stable name. The
// Deployment mounts it either way.
func TestConfigMapName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		values map[string]any
		hash   bool
	}{
		{"defaults", nil, true},
		{"prometheus rules", map[string]any{"adapter": map[string]any{"config": map[string]any{
			"providers": []any{map[string]any{"name": "prom", "type": "prometheus", "options": map[string]any{
				"url": "http://prometheus:9090", "query": `sum(rate(x{<<.LabelMatchers>>,a!="b & c"}[3m])) by (<<.GroupBy>>) é`}}},
			"routes": []any{map[string]any{"metric": "*", "provider": "prom", "kind": "resource"}}}}}, true},
		{"stable", map[string]any{"adapter": map[string]any{"configHashSuffix": false}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			objs := objects(t, Options{Values: tc.values, Set: []string{"autoscaler.enabled=false"}})
			var cm *corev1.ConfigMap
			for k := range objs {
				if strings.HasPrefix(k, "ConfigMap/") {
					cm = as[corev1.ConfigMap](t, objs, k)
				}
			}
			if cm == nil {
				t.Fatal("no ConfigMap")
			}
			want := "metricscale-adapter-config"
			if tc.hash {
				node, err := kyaml.Parse("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + want + "\n")
				if err != nil {
					t.Fatal(err)
				}
				if err := node.LoadMapIntoConfigMapData(cm.Data); err != nil {
					t.Fatal(err)
				}
				h, err := (&hasher.Hasher{}).Hash(node)
				if err != nil {
					t.Fatal(err)
				}
				want += "-" + h
			}
			if cm.Name != want {
				t.Errorf("ConfigMap %s, want %s", cm.Name, want)
			}
			d := as[appsv1.Deployment](t, objs, "Deployment/metricscale/metricscale-adapter")
			for _, v := range d.Spec.Template.Spec.Volumes {
				if v.Name == "config" && (v.ConfigMap == nil || v.ConfigMap.Name != cm.Name) {
					t.Errorf("config volume %+v: want ConfigMap %s", v, cm.Name)
				}
			}
			var parsed map[string]any
			if err := yaml.Unmarshal([]byte(cm.Data["config.yaml"]), &parsed); err != nil || parsed["providers"] == nil {
				t.Errorf("config.yaml does not parse back (%v):\n%s", err, cm.Data["config.yaml"])
			}
		})
	}
}

// TestInvalidValues: a wrong value is refused, naming it.
func TestInvalidValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		set  []string
		want string
	}{
		{"unknown cert mode", []string{"certs.mode=letsencrypt"}, "/certs/mode"},
		{"misspelt key", []string{"adapter.replica=3"}, "'replica' not allowed"},
		{"replicas not a number", []string{"adapter.replicas=two"}, "/adapter/replicas"},
		{"provided without a Secret", []string{"certs.mode=provided", "certs.provided.caBundle=" + testCABundle}, "certs.provided.secretName is required"},
		{"provided without a caBundle", []string{"certs.mode=provided", "certs.provided.secretName=x"}, "certs.provided.caBundle is required"},
		{"caBundle not a certificate", []string{"certs.mode=provided", "certs.provided.secretName=x", "certs.provided.caBundle=aGVsbG8="}, "certs.provided.caBundle: not a base64-encoded PEM certificate"},
		{"nothing to install", []string{"adapter.enabled=false", "autoscaler.enabled=false"}, "adapter.enabled and autoscaler.enabled are both false"},
		{"bad duration", []string{"adapter.seriesTTL=ten minutes"}, "/adapter/seriesTTL"},
		{"bad route kind", []string{"adapter.config.routes[0].kind=resources"}, "/adapter/config/routes/0/kind"},
		{"bad selector resource", []string{"adapter.config.selectorResources={Deployments}"}, "/adapter/config/selectorResources/0"},
		{"bad issuer kind", []string{"certs.mode=certManager", "certs.certManager.issuerRef.kind=Vault"}, "/certs/certManager/issuerRef/kind"},
		{"change feed without a CA", []string{"autoscaler.changeFeed.enabled=true"}, "certs.mode=adapter each adapter replica makes its own certificate"},
		{"change feed without the chart's adapter", []string{"adapter.enabled=false", "autoscaler.changeFeed.enabled=true", "certs.mode=selfSigned"}, "without the chart's adapter"},
		{"change feed over http", []string{"autoscaler.changeFeed.enabled=true", "autoscaler.changeFeed.insecureSkipTLSVerify=true", "autoscaler.changeFeed.url=http://adapter"}, "/autoscaler/changeFeed/url"},
		{"change feed interval", []string{"autoscaler.changeFeed.minInterval=1 second"}, "/autoscaler/changeFeed/minInterval"},
		{"prometheus.url with the push endpoint", []string{"prometheus.url=http://prometheus.monitoring.svc"}, "set adapter.push.enabled=false"},
		{"rules.existing", []string{"prometheus.url=http://prometheus.monitoring.svc", "adapter.push.enabled=false", "rules.existing=my-rules"}, "rules.existing: a ConfigMap"},
		{"prometheus.url without rules", []string{"prometheus.url=http://prometheus.monitoring.svc", "adapter.push.enabled=false", "rules.default=false"}, "rules: prometheus.url without rules"},
		{"a rules file as adapter.config", []string{"adapter.config.externalRules[0].seriesQuery=x"}, "adapter.config.externalRules: adapter.config is the adapter's own config"},
		{"misspelt rbac key", []string{"rbac.creat=false"}, "'creat' not allowed"},
		{"bad dnsPolicy", []string{"adapter.dnsPolicy=Cluster"}, "/adapter/dnsPolicy"},
		{"negative revisionHistoryLimit", []string{"autoscaler.revisionHistoryLimit=-1"}, "/autoscaler/revisionHistoryLimit"},
		{"quota without a priority class", []string{"adapter.priorityClassResourceQuota.enabled=true", "adapter.priorityClassName="}, "adapter.priorityClassName is required"},
		{"misspelt rules key", []string{"rules.defaults=true"}, "'defaults' not allowed"},
		{"bad relist interval", []string{"metricsRelistInterval=1 minute"}, "/metricsRelistInterval"},
		{"bad session affinity", []string{"adapter.sessionAffinity=Cookie"}, "/adapter/sessionAffinity"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Template(chartDir, Options{Set: tc.set})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("template error %v, want one containing %q", err, tc.want)
			}
			if _, err := Lint(chartDir, Options{Set: tc.set}); err == nil {
				t.Error("lint passes")
			}
		})
	}
}
