package render

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

const (
	chartDir     = "../../../manifests/chart"
	manifestsDir = "../../../manifests"
)

// object is one rendered Kubernetes object.
type object = map[string]any

// parse splits a YAML stream into objects, keyed by kind/namespace/name.
func parse(t *testing.T, what string, stream []byte) map[string]object {
	t.Helper()
	out := map[string]object{}
	for i, doc := range splitDocs(stream) {
		var o object
		if err := yaml.Unmarshal(doc, &o); err != nil {
			t.Fatalf("%s: document %d: %v\n%s", what, i, err, doc)
		}
		if o == nil {
			continue
		}
		k := key(o)
		if _, dup := out[k]; dup {
			t.Fatalf("%s: %s twice", what, k)
		}
		out[k] = o
	}
	return out
}

func splitDocs(stream []byte) [][]byte {
	var docs [][]byte
	for _, d := range bytes.Split(append([]byte("\n"), stream...), []byte("\n---")) {
		if len(bytes.TrimSpace(d)) > 0 {
			docs = append(docs, d)
		}
	}
	return docs
}

func key(o object) string {
	md, _ := o["metadata"].(map[string]any)
	ns, _ := md["namespace"].(string)
	return fmt.Sprintf("%s/%s/%s", o["kind"], ns, md["name"])
}

// helmOwn are the labels and annotations only Helm adds; the kustomize base
// has none of them. They are the only fields the comparison ignores.
var (
	helmLabels      = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version"}
	helmAnnotations = []string{"helm.sh/resource-policy"}
)

// compareObjects fails t for each object only one side has and each that
// differs once Helm's own labels are stripped.
func compareObjects(t *testing.T, want, got map[string]object) {
	t.Helper()
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("the chart lacks %s", k)
			continue
		}
		stripHelm(g)
		if d := cmp.Diff(w, g); d != "" {
			t.Errorf("%s differs (-kustomize +chart):\n%s", k, d)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("only the chart renders %s", k)
		}
	}
}

// stripHelm removes helmOwn from the object's own metadata (not from pod
// templates, which carry none).
func stripHelm(o object) {
	md, _ := o["metadata"].(map[string]any)
	for field, keys := range map[string][]string{"labels": helmLabels, "annotations": helmAnnotations} {
		m, _ := md[field].(map[string]any)
		for _, k := range keys {
			delete(m, k)
		}
		if m != nil && len(m) == 0 {
			delete(md, field)
		}
	}
}

// TestChartMatchesKustomize: with its default values, released as
// "metricscale" in namespace "metricscale", the chart renders the objects of
// `kustomize build manifests/`, field for field, but for
//   - Helm's own labels and annotation (helmLabels, helmAnnotations), and
//   - the Namespace object, which the kustomize base makes and a chart must
//     not: Helm creates the release namespace (helm install
//     --create-namespace) and refuses to install a chart that renders it;
//   - the push token Secret, which the chart makes by default
//     (adapter.push.tokenSecret.create, a random token kustomize cannot
//     generate) so that a default install becomes Ready; with the kustomize
//     base the user creates it.
//
// The default certs.mode (adapter) generates no certificate data, so nothing
// else is left out. A difference is fixed in the chart or in manifests/,
// never by ignoring more here.
func TestChartMatchesKustomize(t *testing.T) {
	t.Parallel()
	kust, err := Kustomize(manifestsDir)
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := Template(chartDir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := parse(t, "kustomize build manifests", kust)
	got := parse(t, "chart", rendered)

	const ns = "Namespace//metricscale"
	if _, ok := want[ns]; !ok {
		t.Errorf("kustomize build manifests has no %s any more: drop the exception", ns)
	}
	if _, ok := got[ns]; ok {
		t.Errorf("the chart renders %s: Helm creates the release namespace", ns)
	}
	delete(want, ns)
	const token = "Secret/metricscale/metricscale-adapter-push-token"
	if _, ok := got[token]; !ok {
		t.Errorf("the chart's defaults render no %s: a default install waits on it", token)
	}
	if _, ok := want[token]; ok {
		t.Errorf("kustomize build manifests makes %s now: drop the exception", token)
	}
	delete(got, token)

	var missing, extra []string
	for k := range want {
		if _, ok := got[k]; !ok {
			missing = append(missing, k)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			extra = append(extra, k)
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	if len(missing) > 0 || len(extra) > 0 {
		t.Errorf("objects differ:\nonly in kustomize: %s\nonly in the chart: %s", strings.Join(missing, ", "), strings.Join(extra, ", "))
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		g, ok := got[k]
		if !ok {
			continue
		}
		stripHelm(g)
		if d := cmp.Diff(want[k], g); d != "" {
			t.Errorf("%s differs (-kustomize +chart):\n%s", k, d)
		}
	}
	if len(want) < 20 {
		t.Errorf("kustomize build manifests made %d objects; the comparison expects the adapter and the autoscaler (over 20)", len(want))
	}
}

// TestCRDCopy: the chart's copy of the MetricAutoscaler CRD is the generated
// file (make generate writes both).
func TestCRDCopy(t *testing.T) {
	t.Parallel()
	gen, err := os.ReadFile(manifestsDir + "/autoscaler/crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cp, err := os.ReadFile(chartDir + "/files/crd-metricautoscalers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gen, cp) {
		t.Errorf("manifests/chart/files/crd-metricautoscalers.yaml differs from manifests/autoscaler/crd.yaml: run make generate (it copies it)")
	}
}

// TestMetricsAPIMatchesKustomize: adapter.metricsAPI.enabled with the
// overlay's config renders the objects of `kustomize build
// manifests/metrics-api`. Besides what TestChartMatchesKustomize leaves out,
// the ConfigMap is compared by its parsed config (the overlay's config.yaml
// keeps its comments, which the chart's value cannot), and hence its hashed
// name, in the ConfigMap and the Deployment's volume, is left out too.
func TestMetricsAPIMatchesKustomize(t *testing.T) {
	t.Parallel()
	kust, err := Kustomize(manifestsDir + "/metrics-api")
	if err != nil {
		t.Fatal(err)
	}
	cfgText, err := os.ReadFile(manifestsDir + "/metrics-api/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(cfgText, &cfg); err != nil {
		t.Fatal(err)
	}
	rendered, err := Template(chartDir, Options{
		Values: map[string]any{"adapter": map[string]any{"metricsAPI": map[string]any{"enabled": true}, "config": cfg}},
		// The push token Secret is TestChartMatchesKustomize's exception.
		Set: []string{"autoscaler.enabled=false", "adapter.push.tokenSecret.create=false"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := parse(t, "kustomize build manifests/metrics-api", kust)
	got := parse(t, "chart", rendered)
	delete(want, "Namespace//metricscale")
	configMap := func(objs map[string]object) (string, any) {
		for k, o := range objs {
			if strings.HasPrefix(k, "ConfigMap/") {
				delete(objs, k)
				var c any
				if err := yaml.Unmarshal([]byte(o["data"].(map[string]any)["config.yaml"].(string)), &c); err != nil {
					t.Fatalf("%s: %v", k, err)
				}
				return k, c
			}
		}
		t.Fatal("no ConfigMap")
		return "", nil
	}
	wk, wc := configMap(want)
	gk, gc := configMap(got)
	if d := cmp.Diff(wc, gc); d != "" {
		t.Errorf("the adapter config differs (-kustomize +chart):\n%s", d)
	}
	for _, objs := range []map[string]object{want, got} {
		d := objs["Deployment/metricscale/metricscale-adapter"]
		if d == nil {
			t.Fatal("no adapter Deployment")
		}
		for _, v := range d["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["volumes"].([]any) {
			if cm, ok := v.(map[string]any)["configMap"].(map[string]any); ok {
				if n := cm["name"]; n != strings.Split(wk, "/")[2] && n != strings.Split(gk, "/")[2] {
					t.Errorf("the Deployment mounts ConfigMap %v, not the rendered one", n)
				}
				cm["name"] = "<config>"
			}
		}
	}
	if len(want) != len(got) {
		t.Errorf("kustomize makes %d objects, the chart %d", len(want), len(got))
	}
	compareObjects(t, want, got)
}

// TestRecordMatchesKustomize: autoscaler.record.enabled (without the
// adapter) renders the objects of `kustomize build manifests/record`: the
// autoscaler with --record and its port, the delegation bindings, and the
// metricscale-record and metricscale-record-portforward roles.
func TestRecordMatchesKustomize(t *testing.T) {
	t.Parallel()
	kust, err := Kustomize(manifestsDir + "/record")
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := Template(chartDir, Options{Set: []string{"adapter.enabled=false", "autoscaler.record.enabled=true"}})
	if err != nil {
		t.Fatal(err)
	}
	want := parse(t, "kustomize build manifests/record", kust)
	got := parse(t, "chart", rendered)
	for _, k := range []string{"ClusterRole//metricscale-record", "Role/metricscale/metricscale-record-portforward",
		"ClusterRoleBinding//metricscale-autoscaler:system:auth-delegator", "RoleBinding/kube-system/metricscale-autoscaler-auth-reader"} {
		if _, ok := want[k]; !ok {
			t.Errorf("kustomize build manifests/record has no %s", k)
		}
	}
	compareObjects(t, want, got)
}
