// Package render renders and lints metricscale's Helm chart with the Helm
// library, and builds kustomize directories with the kustomize library, so
// neither a helm nor a kubectl binary is needed.
package render

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/releaseutil"
	"helm.sh/helm/v3/pkg/strvals"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Options are what `helm template` takes: the release and the values.
type Options struct {
	ReleaseName string // default "metricscale"
	Namespace   string // default "metricscale"
	// ValueFiles are merged in order over the chart's values.yaml, then
	// Values, then Set (helm's --set syntax), as helm does.
	ValueFiles []string
	Values     map[string]any
	Set        []string
	// KubeVersion is the cluster version templates see (default: Helm's).
	KubeVersion string

	// Lookups make the template's lookup function read a cluster: either
	// from a rest config or a client provider (tests). Nil: lookup finds
	// nothing, as in `helm template`.
	RESTConfig *rest.Config
	Clients    engine.ClientProvider
}

func (o Options) release() (string, string) {
	name, ns := o.ReleaseName, o.Namespace
	if name == "" {
		name = "metricscale"
	}
	if ns == "" {
		ns = "metricscale"
	}
	return name, ns
}

// values merges the value files, Values and Set, in that order.
func (o Options) values() (map[string]any, error) {
	out := map[string]any{}
	for _, f := range o.ValueFiles {
		v, err := chartutil.ReadValuesFile(f)
		if err != nil {
			return nil, fmt.Errorf("values file %s: %w", f, err)
		}
		mergeInto(out, v)
	}
	mergeInto(out, deepCopy(o.Values))
	for _, s := range o.Set {
		if err := strvals.ParseInto(s, out); err != nil {
			return nil, fmt.Errorf("--set %s: %w", s, err)
		}
	}
	return out, nil
}

// mergeInto merges src into dst: maps merge key by key, anything else
// replaces (helm's rule for user values).
func mergeInto(dst, src map[string]any) {
	for k, v := range src {
		if sv, ok := v.(map[string]any); ok {
			if dv, ok := dst[k].(map[string]any); ok {
				mergeInto(dv, sv)
				continue
			}
		}
		dst[k] = v
	}
}

func deepCopy(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			v = deepCopy(sub)
		}
		out[k] = v
	}
	return out
}

func (o Options) capabilities() (*chartutil.Capabilities, error) {
	caps := chartutil.DefaultCapabilities.Copy()
	if o.KubeVersion != "" {
		kv, err := chartutil.ParseKubeVersion(o.KubeVersion)
		if err != nil {
			return nil, fmt.Errorf("kube version %q: %w", o.KubeVersion, err)
		}
		caps.KubeVersion = *kv
	}
	return caps, nil
}

// Template renders the chart in chartDir as `helm template` does: the
// manifests in Helm's install order, each headed by "# Source: <template>".
// Invalid values (values.schema.json, or a template's fail) are an error
// naming the value.
func Template(chartDir string, o Options) ([]byte, error) {
	chrt, err := loader.Load(chartDir)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", chartDir, err)
	}
	vals, err := o.values()
	if err != nil {
		return nil, err
	}
	caps, err := o.capabilities()
	if err != nil {
		return nil, err
	}
	name, ns := o.release()
	top, err := chartutil.ToRenderValues(chrt, vals, chartutil.ReleaseOptions{
		Name: name, Namespace: ns, Revision: 1, IsInstall: true,
	}, caps)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", chrt.Name(), err)
	}
	var files map[string]string
	switch {
	case o.Clients != nil:
		files, err = engine.RenderWithClientProvider(chrt, top, o.Clients)
	case o.RESTConfig != nil:
		files, err = engine.RenderWithClient(chrt, top, o.RESTConfig)
	default:
		files, err = engine.Render(chrt, top)
	}
	if err != nil {
		return nil, fmt.Errorf("render chart %s: %w", chrt.Name(), err)
	}
	for f := range files {
		if strings.HasSuffix(f, "NOTES.txt") {
			delete(files, f)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, caps.APIVersions, releaseutil.InstallOrder)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", chrt.Name(), err)
	}
	if len(hooks) > 0 {
		return nil, fmt.Errorf("chart %s: hooks are not supported here (%s)", chrt.Name(), hooks[0].Path)
	}
	var out bytes.Buffer
	for _, crd := range chrt.CRDObjects() {
		fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", crd.Filename, bytes.TrimSpace(crd.File.Data))
	}
	for _, m := range manifests {
		fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", m.Name, strings.TrimSpace(m.Content))
	}
	return out.Bytes(), nil
}

// Lint runs `helm lint --strict` on chartDir with the given values, and
// renders it: it returns every lint finding (informational ones included) and
// an error joining the warnings, the errors and the render's error.
func Lint(chartDir string, o Options) ([]support.Message, error) {
	vals, err := o.values()
	if err != nil {
		return nil, err
	}
	caps, err := o.capabilities()
	if err != nil {
		return nil, err
	}
	_, ns := o.release()
	kv := caps.KubeVersion
	linter := lint.AllWithKubeVersion(chartDir, vals, ns, &kv)
	var errs []error
	for _, m := range linter.Messages {
		if m.Severity >= support.WarningSev {
			errs = append(errs, m)
		}
	}
	// helm lint renders in lint mode, where required and fail only log (at
	// INFO): render for real too, so that values the chart refuses fail here.
	if _, err := Template(chartDir, o); err != nil {
		errs = append(errs, err)
	}
	return linter.Messages, errors.Join(errs...)
}

// Kustomize builds a kustomization directory as `kubectl kustomize` does.
func Kustomize(dir string) ([]byte, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	out, err := m.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	return out, nil
}
