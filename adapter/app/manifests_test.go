package app

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/metricscale/metricscale/adapter/config"
	"github.com/metricscale/metricscale/adapter/objects"
)

// readManifests returns the objects of manifests/<dir>, by "Kind/name".
func readManifests(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob("../../manifests/" + dir + "/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		if strings.HasSuffix(f, "kustomization.yaml") || strings.HasSuffix(f, "config.yaml") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range bytes.Split(data, []byte("\n---\n")) {
			var u unstructured.Unstructured
			if err := yaml.Unmarshal(doc, &u.Object); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if u.Object == nil {
				continue
			}
			out[u.GetKind()+"/"+u.GetName()] = doc
		}
	}
	return out
}

func TestManifests(t *testing.T) {
	t.Parallel()
	m := readManifests(t, "adapter")
	for _, want := range []string{
		"Namespace/metricscale", "ServiceAccount/metricscale-adapter",
		"ClusterRoleBinding/metricscale-adapter:system:auth-delegator", "RoleBinding/metricscale-adapter-auth-reader",
		"ClusterRole/metricscale-adapter-resource-reader", "ClusterRole/metricscale-metrics-reader",
		"ClusterRoleBinding/metricscale-metrics-reader:horizontal-pod-autoscaler",
		"Deployment/metricscale-adapter", "PodDisruptionBudget/metricscale-adapter", "Service/metricscale-adapter",
		"Service/metricscale-adapter-push", "Service/metricscale-adapter-peers",
		"APIService/v1beta2.custom.metrics.k8s.io", "APIService/v1beta1.custom.metrics.k8s.io", "APIService/v1beta1.external.metrics.k8s.io",
	} {
		if m[want] == nil {
			t.Errorf("manifests/adapter lacks %s", want)
		}
	}

	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict(m["Deployment/metricscale-adapter"], &d); err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 2 || d.Spec.Template.Spec.ServiceAccountName != "metricscale-adapter" {
		t.Errorf("deployment: replicas %d, service account %q", *d.Spec.Replicas, d.Spec.Template.Spec.ServiceAccountName)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.Image != "ghcr.io/metricscale/adapter:v0.1.0" || c.ReadinessProbe == nil || c.LivenessProbe == nil {
		t.Errorf("container: image %q, probes %v %v", c.Image, c.ReadinessProbe, c.LivenessProbe)
	}
	// the Deployment's flags parse and validate
	fs := NewOptions(pflagSet())
	var args []string
	for _, a := range c.Args { // as the kubelet expands them
		args = append(args, strings.ReplaceAll(a, "$(POD_IP)", "10.244.0.7"))
	}
	if err := fs.FlagSet.Parse(args); err != nil {
		t.Fatalf("deployment args: %v", err)
	}
	if err := fs.Validate(); err != nil {
		t.Errorf("deployment args: %v", err)
	}
	cfg, err := os.ReadFile("../../manifests/adapter/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := config.Parse(cfg, Factories()); err != nil {
		t.Errorf("manifests/adapter/config.yaml: %v", err)
	}

	// least privilege, one source of truth: the adapter's own ClusterRole
	// grants list and watch (what the metadata informers need), and nothing
	// else, on exactly the resources the shipped config lets selector
	// queries watch (objects.DefaultSelectorResources without the field).
	var cr rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(m["ClusterRole/metricscale-adapter-resource-reader"], &cr); err != nil {
		t.Fatal(err)
	}
	shipped, err := config.Parse(cfg, Factories())
	if err != nil {
		t.Fatal(err)
	}
	want := shipped.SelectorGroupResources()
	if len(want) == 0 {
		want = objects.DefaultSelectorResources
	}
	granted := map[schema.GroupResource]string{}
	for _, r := range cr.Rules {
		verbs := append([]string(nil), r.Verbs...)
		sort.Strings(verbs)
		if len(r.NonResourceURLs) > 0 || len(r.ResourceNames) > 0 {
			t.Errorf("resource reader rule %+v: want resources only", r)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				granted[schema.GroupResource{Group: g, Resource: res}] += strings.Join(verbs, ",")
			}
		}
	}
	for _, gr := range want {
		if granted[gr] != "list,watch" {
			t.Errorf("selector resource %s: the resource reader grants %q, want exactly list,watch", gr, granted[gr])
		}
	}
	for gr := range granted {
		if !slices.Contains(want, gr) {
			t.Errorf("the resource reader grants %s, which no selector query may watch", gr)
		}
	}
	var rb rbacv1.RoleBinding
	if err := yaml.UnmarshalStrict(m["RoleBinding/metricscale-adapter-auth-reader"], &rb); err != nil {
		t.Fatal(err)
	}
	if rb.Namespace != "kube-system" || rb.RoleRef.Name != "extension-apiserver-authentication-reader" {
		t.Errorf("auth reader binding: %+v", rb)
	}
	var hb rbacv1.ClusterRoleBinding
	if err := yaml.UnmarshalStrict(m["ClusterRoleBinding/metricscale-metrics-reader:horizontal-pod-autoscaler"], &hb); err != nil {
		t.Fatal(err)
	}
	if s := hb.Subjects[0]; s.Name != "horizontal-pod-autoscaler" || s.Namespace != "kube-system" {
		t.Errorf("metrics reader bound to %+v", s)
	}
	for _, name := range []string{"v1beta2.custom.metrics.k8s.io", "v1beta1.custom.metrics.k8s.io", "v1beta1.external.metrics.k8s.io"} {
		var u unstructured.Unstructured
		if err := yaml.Unmarshal(m["APIService/"+name], &u.Object); err != nil {
			t.Fatal(err)
		}
		svc, _, _ := unstructured.NestedString(u.Object, "spec", "service", "name")
		port, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "service", "port")
		if svc != "metricscale-adapter" || port != float64(443) {
			t.Errorf("%s points at %s:%d", name, svc, port)
		}
	}
}

func pflagSet() *pflag.FlagSet { return pflag.NewFlagSet("manifests", pflag.ContinueOnError) }

// TestMetricsAPIOverlay: manifests/metrics-api adds to the base exactly what
// serving metrics.k8s.io needs — the APIService on the adapter's Service,
// list and watch on nodes, read access for kubectl top — and a config whose
// resource route goes to a Prometheus provider.
func TestMetricsAPIOverlay(t *testing.T) {
	t.Parallel()
	m := readManifests(t, "metrics-api")
	var names []string
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	if got := strings.Join(names, " "); got != "APIService/v1beta1.metrics.k8s.io ClusterRole/metricscale-adapter-node-reader "+
		"ClusterRole/metricscale:aggregated-metrics-reader ClusterRoleBinding/metricscale-adapter-node-reader" {
		t.Errorf("overlay objects: %s", got)
	}

	// the kustomization builds on the base, lists its files, and replaces
	// the config the Deployment mounts
	var k struct {
		Resources          []string `json:"resources"`
		ConfigMapGenerator []struct {
			Name, Namespace, Behavior string
			Files                     []string
		} `json:"configMapGenerator"`
	}
	data, err := os.ReadFile("../../manifests/metrics-api/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(k.Resources, "../adapter") {
		t.Errorf("kustomization resources %v lack ../adapter", k.Resources)
	}
	for _, r := range k.Resources {
		if _, err := os.Stat(filepath.Join("../../manifests/metrics-api", r)); err != nil {
			t.Errorf("kustomization resource %s: %v", r, err)
		}
	}
	if len(k.ConfigMapGenerator) != 1 {
		t.Fatalf("configMapGenerator = %+v, want one", k.ConfigMapGenerator)
	}
	g := k.ConfigMapGenerator[0]
	if g.Name != "metricscale-adapter-config" || g.Namespace != "metricscale" || g.Behavior != "replace" || !slices.Equal(g.Files, []string{"config.yaml"}) {
		t.Errorf("configMapGenerator = %+v, want config.yaml replacing metricscale/metricscale-adapter-config", g)
	}
	cfgData, err := os.ReadFile("../../manifests/metrics-api/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(cfgData, Factories())
	if err != nil {
		t.Fatalf("manifests/metrics-api/config.yaml: %v", err)
	}
	types := map[string]string{}
	for _, p := range cfg.Providers {
		types[p.Name] = p.Type
	}
	resourceRoutes := 0
	for _, r := range cfg.Routes {
		if r.Kind == config.KindResource {
			resourceRoutes++
			if types[r.Provider] != "prometheus" {
				t.Errorf("the resource route goes to %q (type %q), want a prometheus provider", r.Provider, types[r.Provider])
			}
		}
	}
	if resourceRoutes != 1 {
		t.Errorf("%d resource routes, want 1", resourceRoutes)
	}

	var u unstructured.Unstructured
	if err := yaml.Unmarshal(m["APIService/v1beta1.metrics.k8s.io"], &u.Object); err != nil {
		t.Fatal(err)
	}
	for field, want := range map[string]any{
		"spec.group": "metrics.k8s.io", "spec.version": "v1beta1",
		"spec.service.name": "metricscale-adapter", "spec.service.namespace": "metricscale", "spec.service.port": float64(443),
	} {
		got, _, _ := unstructured.NestedFieldNoCopy(u.Object, strings.Split(field, ".")...)
		if got != want {
			t.Errorf("APIService %s = %v, want %v", field, got, want)
		}
	}

	// least privilege: each ClusterRole grants exactly this
	grants := func(name string) string {
		var cr rbacv1.ClusterRole
		if err := yaml.UnmarshalStrict(m["ClusterRole/"+name], &cr); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range cr.Rules {
			if len(r.NonResourceURLs) > 0 || len(r.ResourceNames) > 0 {
				t.Errorf("%s rule %+v: want resources only", name, r)
			}
			verbs := slices.Sorted(slices.Values(r.Verbs))
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					out = append(out, schema.GroupResource{Group: g, Resource: res}.String()+":"+strings.Join(verbs, ","))
				}
			}
		}
		sort.Strings(out)
		return strings.Join(out, " ")
	}
	if got := grants("metricscale-adapter-node-reader"); got != "nodes:list,watch" {
		t.Errorf("node reader grants %s, want nodes:list,watch", got)
	}
	if got := grants("metricscale:aggregated-metrics-reader"); got != "nodes.metrics.k8s.io:get,list pods.metrics.k8s.io:get,list" {
		t.Errorf("aggregated metrics reader grants %s", got)
	}
	var rb rbacv1.ClusterRoleBinding
	if err := yaml.UnmarshalStrict(m["ClusterRoleBinding/metricscale-adapter-node-reader"], &rb); err != nil {
		t.Fatal(err)
	}
	if rb.RoleRef.Name != "metricscale-adapter-node-reader" || len(rb.Subjects) != 1 ||
		rb.Subjects[0].Name != "metricscale-adapter" || rb.Subjects[0].Namespace != "metricscale" {
		t.Errorf("node reader binding: %+v %+v", rb.RoleRef, rb.Subjects)
	}
}

// TestManifestsReloadEvents: the Deployment names the pod to the adapter
// (downward API) and the adapter may create and patch events in its own
// namespace, nothing more, for its config reload events.
func TestManifestsReloadEvents(t *testing.T) {
	t.Parallel()
	m := readManifests(t, "adapter")
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict(m["Deployment/metricscale-adapter"], &d); err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			fields[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	for env, path := range map[string]string{envPodName: "metadata.name", envPodNamespace: "metadata.namespace", envPodUID: "metadata.uid"} {
		if fields[env] != path {
			t.Errorf("env %s = fieldRef %q, want %q", env, fields[env], path)
		}
	}

	var role rbacv1.Role
	if err := yaml.UnmarshalStrict(m["Role/metricscale-adapter-events"], &role); err != nil {
		t.Fatal(err)
	}
	if role.Namespace != d.Namespace || len(role.Rules) != 1 {
		t.Fatalf("events role: namespace %q (deployment's %q), %d rules", role.Namespace, d.Namespace, len(role.Rules))
	}
	r := role.Rules[0]
	verbs := append([]string(nil), r.Verbs...)
	sort.Strings(verbs)
	if strings.Join(r.APIGroups, ",") != "" || strings.Join(r.Resources, ",") != "events" || strings.Join(verbs, ",") != "create,patch" || len(r.ResourceNames) > 0 {
		t.Errorf("events role rule %+v: want create,patch on core events only", r)
	}
	var rb rbacv1.RoleBinding
	if err := yaml.UnmarshalStrict(m["RoleBinding/metricscale-adapter-events"], &rb); err != nil {
		t.Fatal(err)
	}
	if rb.Namespace != d.Namespace || rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != role.Name || len(rb.Subjects) != 1 ||
		rb.Subjects[0].Name != d.Spec.Template.Spec.ServiceAccountName || rb.Subjects[0].Namespace != d.Namespace {
		t.Errorf("events binding: %+v %+v", rb.RoleRef, rb.Subjects)
	}
}
