package render

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// endpoint returns the first scrape endpoint of a ServiceMonitor or
// PodMonitor.
func endpoint(t *testing.T, objs map[string]object, k string) map[string]any {
	t.Helper()
	u := as[unstructured.Unstructured](t, objs, k)
	field := "endpoints"
	if u.GetKind() == "PodMonitor" {
		field = "podMetricsEndpoints"
	}
	eps, _, _ := unstructured.NestedSlice(u.Object, "spec", field)
	if len(eps) != 1 {
		t.Fatalf("%s: %d endpoints, want 1", k, len(eps))
	}
	return eps[0].(map[string]any)
}

func str(m map[string]any, path ...string) string {
	s, _, _ := unstructured.NestedString(m, path...)
	return s
}

// monitoring are the value sets of metrics:, each linted
// (TestMonitoringLint) and checked (TestMonitoring).
var monitoring = []struct {
	name  string
	o     Options
	check func(t *testing.T, objs map[string]object)
}{
	{"defaults: secure autoscaler, its Service, no monitors", Options{}, func(t *testing.T, objs map[string]object) {
		c := as[appsv1.Deployment](t, objs, "Deployment/metricscale/metricscale-autoscaler").Spec.Template.Spec.Containers[0]
		if slices.Contains(c.Args, "--insecure-metrics") || !slices.Contains(c.Args, "--bind-address=:8080") {
			t.Errorf("autoscaler args %q: want --bind-address=:8080, secure", c.Args)
		}
		for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
			if p == nil || p.HTTPGet == nil || p.HTTPGet.Scheme != corev1.URISchemeHTTPS {
				t.Errorf("autoscaler %s probe %+v: want HTTPS", name, p)
			}
		}
		s := as[corev1.Service](t, objs, "Service/metricscale/metricscale-autoscaler")
		if len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Port != 8080 || s.Spec.Ports[0].TargetPort.String() != "metrics" || s.Spec.Selector["app.kubernetes.io/name"] != "metricscale-autoscaler" {
			t.Errorf("autoscaler Service %+v", s.Spec)
		}
		as[rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding//metricscale-autoscaler:system:auth-delegator")
		as[rbacv1.RoleBinding](t, objs, "RoleBinding/kube-system/metricscale-autoscaler-auth-reader")
		for k := range objs {
			if strings.Contains(k, "Monitor/") || strings.Contains(k, "metrics-scraper") {
				t.Errorf("the defaults render %s", k)
			}
		}
	}},
	{"metrics.autoscaler.insecure", Options{Set: []string{"metrics.autoscaler.insecure=true", "metrics.serviceMonitor.enabled=true", "autoscaler.livenessProbe.httpGet.scheme=HTTPS"}}, func(t *testing.T, objs map[string]object) {
		c := as[appsv1.Deployment](t, objs, "Deployment/metricscale/metricscale-autoscaler").Spec.Template.Spec.Containers[0]
		if !slices.Contains(c.Args, "--insecure-metrics") {
			t.Errorf("autoscaler args %q: want --insecure-metrics", c.Args)
		}
		if p := c.ReadinessProbe; p == nil || p.HTTPGet.Scheme != corev1.URISchemeHTTP {
			t.Errorf("readiness probe %+v: want HTTP", p)
		}
		// a scheme of the values' own stays
		if p := c.LivenessProbe; p == nil || p.HTTPGet.Scheme != corev1.URISchemeHTTPS {
			t.Errorf("liveness probe %+v: want the given HTTPS", p)
		}
		ep := endpoint(t, objs, "ServiceMonitor/metricscale/metricscale-autoscaler")
		if ep["scheme"] != "http" || ep["authorization"] != nil || ep["tlsConfig"] != nil {
			t.Errorf("insecure autoscaler endpoint %v: want plain http without credentials", ep)
		}
		if ep := endpoint(t, objs, "ServiceMonitor/metricscale/metricscale-adapter"); ep["scheme"] != "https" {
			t.Errorf("adapter endpoint %v: want https", ep)
		}
	}},
	{"metrics.serviceMonitor", Options{Set: []string{"metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.interval=15s", "metrics.serviceMonitor.labels.release=kube-prometheus"}}, func(t *testing.T, objs map[string]object) {
		for _, c := range []struct{ name, port string }{{"metricscale-adapter", "https"}, {"metricscale-autoscaler", "metrics"}} {
			k := "ServiceMonitor/metricscale/" + c.name
			u := as[unstructured.Unstructured](t, objs, k)
			if u.GetLabels()["release"] != "kube-prometheus" {
				t.Errorf("%s labels %v: no release=kube-prometheus", k, u.GetLabels())
			}
			sel, _, _ := unstructured.NestedStringMap(u.Object, "spec", "selector", "matchLabels")
			if sel["app.kubernetes.io/name"] != c.name || sel["app.kubernetes.io/instance"] != "metricscale" {
				t.Errorf("%s selector %v", k, sel)
			}
			ep := endpoint(t, objs, k)
			if ep["port"] != c.port || ep["path"] != "/metrics" || ep["scheme"] != "https" || ep["interval"] != "15s" {
				t.Errorf("%s endpoint %v", k, ep)
			}
			if str(ep, "authorization", "type") != "Bearer" || str(ep, "authorization", "credentials", "name") != "metricscale-metrics-scraper-token" || str(ep, "authorization", "credentials", "key") != "token" {
				t.Errorf("%s authorization %v: want the scraper's token Secret", k, ep["authorization"])
			}
			if skip, _, _ := unstructured.NestedBool(ep, "tlsConfig", "insecureSkipVerify"); !skip {
				t.Errorf("%s tlsConfig %v: want insecureSkipVerify (self-signed)", k, ep["tlsConfig"])
			}
		}
		// The Service each selects serves the port it names.
		if s := as[corev1.Service](t, objs, "Service/metricscale/metricscale-adapter"); s.Spec.Ports[0].Name != "https" {
			t.Errorf("adapter Service ports %+v", s.Spec.Ports)
		}
		role := as[rbacv1.ClusterRole](t, objs, "ClusterRole//metricscale-metrics-scraper")
		if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].NonResourceURLs, []string{"/metrics"}) || !slices.Equal(role.Rules[0].Verbs, []string{"get"}) {
			t.Errorf("metrics-scraper rules %+v", role.Rules)
		}
		b := as[rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding//metricscale-metrics-scraper:serviceaccount")
		if b.RoleRef.Name != "metricscale-metrics-scraper" || len(b.Subjects) != 1 || b.Subjects[0].Name != "metricscale-metrics-scraper" || b.Subjects[0].Namespace != "metricscale" {
			t.Errorf("scraper binding %+v", b)
		}
		as[corev1.ServiceAccount](t, objs, "ServiceAccount/metricscale/metricscale-metrics-scraper")
		sec := as[corev1.Secret](t, objs, "Secret/metricscale/metricscale-metrics-scraper-token")
		if sec.Type != corev1.SecretTypeServiceAccountToken || sec.Annotations[corev1.ServiceAccountNameKey] != "metricscale-metrics-scraper" {
			t.Errorf("scraper token Secret %+v", sec)
		}
	}},
	{"metrics.podMonitor with a token Secret and a CA", Options{Values: map[string]any{"metrics": map[string]any{
		"podMonitor":        map[string]any{"enabled": true, "scrapeTimeout": "5s"},
		"bearerTokenSecret": map[string]any{"name": "prometheus-token", "key": "jwt"},
		"tlsConfig":         map[string]any{"insecureSkipVerify": false, "ca": map[string]any{"secret": map[string]any{"name": "metricscale-adapter-tls", "key": "ca.crt"}}, "serverName": "metricscale-adapter.metricscale.svc"},
	}}, Set: []string{"certs.mode=selfSigned"}}, func(t *testing.T, objs map[string]object) {
		for _, c := range []struct{ name, port string }{{"metricscale-adapter", "https"}, {"metricscale-autoscaler", "metrics"}} {
			k := "PodMonitor/metricscale/" + c.name
			ep := endpoint(t, objs, k)
			if ep["port"] != c.port || ep["scrapeTimeout"] != "5s" || str(ep, "authorization", "credentials", "name") != "prometheus-token" || str(ep, "authorization", "credentials", "key") != "jwt" {
				t.Errorf("%s endpoint %v", k, ep)
			}
			// The autoscaler's per-object namespace label stays namespace.
			if honor, _ := ep["honorLabels"].(bool); honor != (c.name == "metricscale-autoscaler") {
				t.Errorf("%s honorLabels %v", k, ep["honorLabels"])
			}
			if _, found, _ := unstructured.NestedBool(ep, "tlsConfig", "insecureSkipVerify"); found || str(ep, "tlsConfig", "ca", "secret", "name") != "metricscale-adapter-tls" || str(ep, "tlsConfig", "serverName") != "metricscale-adapter.metricscale.svc" {
				t.Errorf("%s tlsConfig %v", k, ep["tlsConfig"])
			}
			sel, _, _ := unstructured.NestedStringMap(as[unstructured.Unstructured](t, objs, k).Object, "spec", "selector", "matchLabels")
			if sel["app.kubernetes.io/name"] != c.name {
				t.Errorf("%s selector %v", k, sel)
			}
		}
		// The pods' ports the PodMonitors name.
		for k, port := range map[string]string{"Deployment/metricscale/metricscale-adapter": "https", "Deployment/metricscale/metricscale-autoscaler": "metrics"} {
			ports := as[appsv1.Deployment](t, objs, k).Spec.Template.Spec.Containers[0].Ports
			if !slices.ContainsFunc(ports, func(p corev1.ContainerPort) bool { return p.Name == port }) {
				t.Errorf("%s has no port %s: %+v", k, port, ports)
			}
		}
		// A token of the user's own: no scraper ServiceAccount.
		for k := range objs {
			if strings.Contains(k, "metrics-scraper") && !strings.HasPrefix(k, "ClusterRole/") {
				t.Errorf("a given token Secret renders %s", k)
			}
		}
		as[rbacv1.ClusterRole](t, objs, "ClusterRole//metricscale-metrics-scraper")
	}},
	{"metrics.scraperRBAC bound to Prometheus's ServiceAccount", Options{Set: []string{"metrics.scraperRBAC.serviceAccount.name=prometheus-k8s", "metrics.scraperRBAC.serviceAccount.namespace=monitoring"}}, func(t *testing.T, objs map[string]object) {
		as[rbacv1.ClusterRole](t, objs, "ClusterRole//metricscale-metrics-scraper")
		b := as[rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding//metricscale-metrics-scraper")
		if len(b.Subjects) != 1 || b.Subjects[0].Name != "prometheus-k8s" || b.Subjects[0].Namespace != "monitoring" || b.RoleRef.Name != "metricscale-metrics-scraper" {
			t.Errorf("scraper binding %+v", b)
		}
	}},
	{"metrics.scraperRBAC.create alone, renamed release", Options{ReleaseName: "prod", Set: []string{"metrics.scraperRBAC.create=true"}}, func(t *testing.T, objs map[string]object) {
		as[rbacv1.ClusterRole](t, objs, "ClusterRole//prod-metricscale-metrics-scraper")
		for k := range objs {
			if strings.HasPrefix(k, "ClusterRoleBinding//prod-metricscale-metrics-scraper") {
				t.Errorf("no ServiceAccount given, yet %s", k)
			}
		}
	}},
	{"monitors without the autoscaler, rbac.create=false", Options{Set: []string{"autoscaler.enabled=false", "metrics.serviceMonitor.enabled=true", "rbac.create=false"}}, func(t *testing.T, objs map[string]object) {
		as[unstructured.Unstructured](t, objs, "ServiceMonitor/metricscale/metricscale-adapter")
		for k := range objs {
			if strings.Contains(k, "metricscale-autoscaler") || strings.HasPrefix(k, "ClusterRole") {
				t.Errorf("renders %s", k)
			}
		}
		// The scraper and its token stay: bind them yourself.
		as[corev1.Secret](t, objs, "Secret/metricscale/metricscale-metrics-scraper-token")
	}},
}

func TestMonitoring(t *testing.T) {
	t.Parallel()
	for _, tc := range monitoring {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.check(t, objects(t, tc.o))
		})
	}
}

func TestMonitoringLint(t *testing.T) {
	t.Parallel()
	for _, tc := range monitoring {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := Lint(chartDir, tc.o); err != nil {
				t.Fatalf("lint: %v", err)
			}
		})
	}
}

// TestMonitoringInvalidValues: the metrics: block refuses unknown keys and
// wrong types, naming them.
func TestMonitoringInvalidValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		set  []string
		want string
	}{
		{"misspelt key", []string{"metrics.serviceMonitor.enable=true"}, "'enable' not allowed"},
		{"unknown metrics key", []string{"metrics.insecure=true"}, "'insecure' not allowed"},
		{"insecure not a boolean", []string{"metrics.autoscaler.insecure=yes"}, "/metrics/autoscaler/insecure"},
		{"empty token key", []string{"metrics.bearerTokenSecret.key="}, "/metrics/bearerTokenSecret/key"},
		{"labels not strings", []string{"metrics.podMonitor.labels.a.b=c"}, "/metrics/podMonitor/labels/a"},
	} {
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

// TestMonitoringKustomization: manifests/monitoring builds; its ClusterRole
// is the chart's (metrics.scraperRBAC.create); each ServiceMonitor selects
// a Service of the base that serves the port it names, over https with a
// bearer token.
func TestMonitoringKustomization(t *testing.T) {
	t.Parallel()
	out, err := Kustomize(manifestsDir + "/monitoring")
	if err != nil {
		t.Fatal(err)
	}
	mon := parse(t, "kustomize build manifests/monitoring", out)
	base, err := Kustomize(manifestsDir)
	if err != nil {
		t.Fatal(err)
	}
	objs := parse(t, "kustomize build manifests", base)
	chart := objects(t, Options{Set: []string{"metrics.scraperRBAC.create=true"}})

	role := as[rbacv1.ClusterRole](t, mon, "ClusterRole//metricscale-metrics-scraper")
	if want := as[rbacv1.ClusterRole](t, chart, "ClusterRole//metricscale-metrics-scraper"); !slices.EqualFunc(role.Rules, want.Rules, func(a, b rbacv1.PolicyRule) bool {
		return slices.Equal(a.NonResourceURLs, b.NonResourceURLs) && slices.Equal(a.Verbs, b.Verbs) && len(a.Resources) == 0 && len(b.Resources) == 0
	}) {
		t.Errorf("manifests/monitoring's rules %+v, the chart's %+v", role.Rules, want.Rules)
	}
	b := as[rbacv1.ClusterRoleBinding](t, mon, "ClusterRoleBinding//metricscale-metrics-scraper")
	if b.RoleRef.Name != role.Name || len(b.Subjects) != 1 {
		t.Errorf("binding %+v", b)
	}
	for _, name := range []string{"metricscale-adapter", "metricscale-autoscaler"} {
		k := "ServiceMonitor/metricscale/" + name
		ep := endpoint(t, mon, k)
		if ep["scheme"] != "https" || ep["bearerTokenFile"] == nil {
			t.Errorf("%s endpoint %v: want https with Prometheus's token", k, ep)
		}
		if honor, _ := ep["honorLabels"].(bool); honor != (name == "metricscale-autoscaler") {
			t.Errorf("%s honorLabels %v: the autoscaler's per-object namespace label must stay namespace", k, ep["honorLabels"])
		}
		sel, _, _ := unstructured.NestedStringMap(as[unstructured.Unstructured](t, mon, k).Object, "spec", "selector", "matchLabels")
		served := false
		for sk := range objs {
			if !strings.HasPrefix(sk, "Service/metricscale/") {
				continue
			}
			s := as[corev1.Service](t, objs, sk)
			if s.Labels["app.kubernetes.io/name"] == sel["app.kubernetes.io/name"] && slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep["port"] }) {
				served = true
			}
		}
		if !served {
			t.Errorf("%s: no Service of manifests/ labelled %v serves port %v", k, sel, ep["port"])
		}
	}
}
