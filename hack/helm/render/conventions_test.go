package render

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// conventions are the value sets of the common chart conventions, each
// linted (TestConventionsLint) and checked (TestConventions).
var conventions = []struct {
	name  string
	o     Options
	check func(t *testing.T, objs map[string]object)
}{
	{"serviceAccount.create=false with a name", Options{Set: []string{"adapter.serviceAccount.create=false", "adapter.serviceAccount.name=ops-adapter", "autoscaler.serviceAccount.create=false"}}, func(t *testing.T, objs map[string]object) {
		for k := range objs {
			if strings.HasPrefix(k, "ServiceAccount/") {
				t.Errorf("serviceAccount.create=false renders %s", k)
			}
		}
		if got := as[appsv1.Deployment](t, objs, "Deployment/metricscale/metricscale-adapter").Spec.Template.Spec.ServiceAccountName; got != "ops-adapter" {
			t.Errorf("adapter serviceAccountName %q, want ops-adapter", got)
		}
		if got := as[appsv1.Deployment](t, objs, "Deployment/metricscale/metricscale-autoscaler").Spec.Template.Spec.ServiceAccountName; got != "default" {
			t.Errorf("autoscaler serviceAccountName %q, want default", got)
		}
		b := as[rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding//metricscale-adapter:system:auth-delegator")
		if len(b.Subjects) != 1 || b.Subjects[0].Name != "ops-adapter" {
			t.Errorf("auth-delegator subjects %+v, want ops-adapter", b.Subjects)
		}
	}},
	{"rbac.create=false", Options{Set: []string{"rbac.create=false", "autoscaler.record.enabled=true", "adapter.metricsAPI.enabled=true"}}, func(t *testing.T, objs map[string]object) {
		for k := range objs {
			if kind, _, _ := strings.Cut(k, "/"); strings.HasSuffix(kind, "Role") || strings.HasSuffix(kind, "RoleBinding") {
				t.Errorf("rbac.create=false renders %s", k)
			}
		}
		as[corev1.ServiceAccount](t, objs, "ServiceAccount/metricscale/metricscale-adapter")
	}},
	{"nameOverride", Options{ReleaseName: "prod", Set: []string{"nameOverride=scaling"}}, func(t *testing.T, objs map[string]object) {
		as[appsv1.Deployment](t, objs, "Deployment/metricscale/prod-scaling-adapter")
		as[appsv1.Deployment](t, objs, "Deployment/metricscale/prod-scaling-autoscaler")
	}},
	{"namespaceOverride", Options{Set: []string{"namespaceOverride=platform", "certs.mode=selfSigned"}}, func(t *testing.T, objs map[string]object) {
		for k, o := range objs {
			u := as[unstructured.Unstructured](t, objs, k)
			if ns := u.GetNamespace(); ns != "" && ns != "platform" && ns != "kube-system" {
				t.Errorf("%s in namespace %q, want platform (or kube-system, for its auth reader)", k, ns)
			}
			for _, s := range subjects(o) {
				if s["kind"] == "ServiceAccount" && s["namespace"] != "platform" && s["namespace"] != "kube-system" {
					t.Errorf("%s: subject %v not in platform", k, s)
				}
			}
		}
		d := as[appsv1.Deployment](t, objs, "Deployment/platform/metricscale-adapter")
		if !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--push-peers-dns=metricscale-adapter-peers.platform.svc") {
			t.Errorf("adapter args %q: want the peers in platform", d.Spec.Template.Spec.Containers[0].Args)
		}
		a := as[unstructured.Unstructured](t, objs, "APIService//v1beta1.external.metrics.k8s.io")
		if ns, _, _ := unstructured.NestedString(a.Object, "spec", "service", "namespace"); ns != "platform" {
			t.Errorf("APIService service namespace %q, want platform", ns)
		}
	}},
	{"commonLabels", Options{Set: []string{"commonLabels.team=platform", "certs.mode=certManager"}}, func(t *testing.T, objs map[string]object) {
		for k := range objs {
			if l := as[unstructured.Unstructured](t, objs, k).GetLabels(); l["team"] != "platform" {
				t.Errorf("%s labels %v: no team=platform", k, l)
			}
		}
		for _, k := range []string{"Deployment/metricscale/metricscale-adapter", "Deployment/metricscale/metricscale-autoscaler"} {
			if l := as[appsv1.Deployment](t, objs, k).Spec.Template.Labels; l["team"] != "platform" {
				t.Errorf("%s pod labels %v: no team=platform", k, l)
			}
		}
	}},
	{"extraObjects", Options{Values: map[string]any{"extraObjects": []any{
		map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "{{ .Release.Name }}-extra", "namespace": "metricscale"}},
		"apiVersion: v1\nkind: Secret\nmetadata:\n  name: {{ include \"metricscale.fullname\" . }}-extra\n  namespace: metricscale\n",
	}}}, func(t *testing.T, objs map[string]object) {
		as[corev1.ConfigMap](t, objs, "ConfigMap/metricscale/metricscale-extra")
		as[corev1.Secret](t, objs, "Secret/metricscale/metricscale-extra")
	}},
	{"probes, revisionHistoryLimit, hostNetwork", Options{Set: []string{
		"adapter.livenessProbe.periodSeconds=20", "adapter.startupProbe=null", "autoscaler.readinessProbe.periodSeconds=7",
		"adapter.revisionHistoryLimit=0", "autoscaler.revisionHistoryLimit=3", "adapter.hostNetwork=true", "adapter.dnsPolicy=ClusterFirstWithHostNet",
		"adapter.securePort=10443",
	}}, func(t *testing.T, objs map[string]object) {
		d := as[appsv1.Deployment](t, objs, "Deployment/metricscale/metricscale-adapter")
		c := d.Spec.Template.Spec.Containers[0]
		if !slices.Contains(c.Args, "--secure-port=10443") || c.Ports[0].ContainerPort != 10443 {
			t.Errorf("adapter args %q ports %+v: want 10443", c.Args, c.Ports)
		}
		if c.LivenessProbe == nil || c.LivenessProbe.PeriodSeconds != 20 || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/livez" {
			t.Errorf("adapter livenessProbe %+v, want /livez every 20s", c.LivenessProbe)
		}
		if c.StartupProbe != nil || c.ReadinessProbe == nil {
			t.Errorf("adapter startupProbe %+v readinessProbe %+v: want none and the default", c.StartupProbe, c.ReadinessProbe)
		}
		if d.Spec.RevisionHistoryLimit == nil || *d.Spec.RevisionHistoryLimit != 0 {
			t.Errorf("adapter revisionHistoryLimit %v, want 0", d.Spec.RevisionHistoryLimit)
		}
		if s := d.Spec.Template.Spec; !s.HostNetwork || s.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
			t.Errorf("adapter hostNetwork %v dnsPolicy %q", s.HostNetwork, s.DNSPolicy)
		}
		a := as[appsv1.Deployment](t, objs, "Deployment/metricscale/metricscale-autoscaler")
		if p := a.Spec.Template.Spec.Containers[0].ReadinessProbe; p == nil || p.PeriodSeconds != 7 || p.HTTPGet.Path != "/readyz" {
			t.Errorf("autoscaler readinessProbe %+v", p)
		}
		if a.Spec.RevisionHistoryLimit == nil || *a.Spec.RevisionHistoryLimit != 3 || a.Spec.Template.Spec.HostNetwork {
			t.Errorf("autoscaler revisionHistoryLimit %v hostNetwork %v", a.Spec.RevisionHistoryLimit, a.Spec.Template.Spec.HostNetwork)
		}
	}},
	{"autoscaler PDB, spread, volumes", Options{Values: map[string]any{"autoscaler": map[string]any{
		"podDisruptionBudget":       map[string]any{"enabled": true, "maxUnavailable": 1},
		"topologySpreadConstraints": []any{map[string]any{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"}},
		"extraVolumes":              []any{map[string]any{"name": "cache", "emptyDir": map[string]any{}}},
		"extraVolumeMounts":         []any{map[string]any{"name": "cache", "mountPath": "/cache"}},
	}}}, func(t *testing.T, objs map[string]object) {
		pdb := as[policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget/metricscale/metricscale-autoscaler")
		if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.MinAvailable != nil {
			t.Errorf("autoscaler PDB %+v, want maxUnavailable 1 only", pdb.Spec)
		}
		if pdb.Spec.Selector.MatchLabels["app.kubernetes.io/name"] != "metricscale-autoscaler" {
			t.Errorf("autoscaler PDB selector %v", pdb.Spec.Selector)
		}
		s := as[appsv1.Deployment](t, objs, "Deployment/metricscale/metricscale-autoscaler").Spec.Template.Spec
		if len(s.TopologySpreadConstraints) != 1 || len(s.Volumes) != 1 || s.Volumes[0].Name != "cache" ||
			len(s.Containers[0].VolumeMounts) != 1 || s.Containers[0].VolumeMounts[0].MountPath != "/cache" {
			t.Errorf("autoscaler spread %+v volumes %+v mounts %+v", s.TopologySpreadConstraints, s.Volumes, s.Containers[0].VolumeMounts)
		}
	}},
	{"priority class quota", Options{Set: []string{"adapter.priorityClassResourceQuota.enabled=true"}}, func(t *testing.T, objs map[string]object) {
		q := as[corev1.ResourceQuota](t, objs, "ResourceQuota/metricscale/metricscale-adapter-priority-class")
		if q.Spec.ScopeSelector == nil || len(q.Spec.ScopeSelector.MatchExpressions) != 1 ||
			!slices.Equal(q.Spec.ScopeSelector.MatchExpressions[0].Values, []string{"system-cluster-critical"}) {
			t.Errorf("quota scope %+v, want PriorityClass system-cluster-critical", q.Spec.ScopeSelector)
		}
	}},
	{"NetworkPolicy", Options{Values: map[string]any{"networkPolicy": map[string]any{"enabled": true,
		"push": map[string]any{"from": []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"pushers": "true"}}}}}}}},
		func(t *testing.T, objs map[string]object) {
			np := as[networkingv1.NetworkPolicy](t, objs, "NetworkPolicy/metricscale/metricscale-adapter")
			if len(np.Spec.Ingress) != 2 || np.Spec.Ingress[0].Ports[0].Port.IntValue() != 6443 || len(np.Spec.Ingress[0].From) != 0 {
				t.Fatalf("adapter ingress %+v: want 6443 from anywhere, then push", np.Spec.Ingress)
			}
			push := np.Spec.Ingress[1]
			if push.Ports[0].Port.IntValue() != 6445 || len(push.From) != 2 || push.From[0].PodSelector.MatchLabels["app.kubernetes.io/name"] != "metricscale-adapter" || push.From[1].NamespaceSelector == nil {
				t.Errorf("push ingress %+v: want the adapter's pods and the pushers", push)
			}
			a := as[networkingv1.NetworkPolicy](t, objs, "NetworkPolicy/metricscale/metricscale-autoscaler")
			if len(a.Spec.Ingress) != 1 || a.Spec.Ingress[0].Ports[0].Port.IntValue() != 8080 {
				t.Errorf("autoscaler ingress %+v: want 8080", a.Spec.Ingress)
			}
		}},
	{"adapter.sessionAffinity", Options{}, func(t *testing.T, objs map[string]object) {
		if got := as[corev1.Service](t, objs, "Service/metricscale/metricscale-adapter").Spec.SessionAffinity; got != corev1.ServiceAffinityClientIP {
			t.Errorf("default aggregated API Service affinity %q, want ClientIP (reads stay on one replica)", got)
		}
		if got := as[corev1.Service](t, objs, "Service/metricscale/metricscale-adapter-push").Spec.SessionAffinity; got == corev1.ServiceAffinityClientIP {
			t.Errorf("push Service affinity %q: pushes should spread over the replicas", got)
		}
	}},
	{"adapter.sessionAffinity=None", Options{Set: []string{"adapter.sessionAffinity=None"}}, func(t *testing.T, objs map[string]object) {
		if got := as[corev1.Service](t, objs, "Service/metricscale/metricscale-adapter").Spec.SessionAffinity; got != corev1.ServiceAffinityNone {
			t.Errorf("aggregated API Service affinity %q, want None", got)
		}
	}},
}

// subjects returns a binding's subjects.
func subjects(o object) []map[string]any {
	var out []map[string]any
	list, _ := o["subjects"].([]any)
	for _, s := range list {
		if m, ok := s.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

func TestConventions(t *testing.T) {
	t.Parallel()
	for _, tc := range conventions {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.check(t, objects(t, tc.o))
		})
	}
}

func TestConventionsLint(t *testing.T) {
	t.Parallel()
	for _, tc := range conventions {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := Lint(chartDir, tc.o); err != nil {
				t.Fatalf("lint: %v", err)
			}
		})
	}
}
