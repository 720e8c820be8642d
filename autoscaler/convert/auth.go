package convert

import (
	"encoding/json"
	"fmt"
	"slices"
)

// The objects of a KEDA input that ScaledObjects refer to: their
// TriggerAuthentications, the Secrets those name, and the workloads whose
// environment a trigger reads. A Secret's values are never decoded: only
// its key names are kept, to say whether a reference resolves.

// secretKey is a key of a Secret: where a provider reads a credential
// once the Secret is mounted.
type secretKey struct {
	Name string
	Key  string
	// cluster: a ClusterTriggerAuthentication's, a Secret of KEDA's own
	// namespace, which the input does not say
	cluster bool
}

// triggerAuth is a TriggerAuthentication or ClusterTriggerAuthentication.
type triggerAuth struct {
	Kind string // TriggerAuthentication or ClusterTriggerAuthentication
	Name string
	Spec struct {
		PodIdentity *struct {
			Provider string `json:"provider"`
		} `json:"podIdentity,omitempty"`
		SecretTargetRef []struct {
			Parameter string `json:"parameter"`
			Name      string `json:"name"`
			Key       string `json:"key"`
		} `json:"secretTargetRef,omitempty"`
		Env []struct {
			Parameter     string `json:"parameter"`
			Name          string `json:"name"`
			ContainerName string `json:"containerName,omitempty"`
		} `json:"env,omitempty"`
		// The other sources (vaults, cloud secret managers, ConfigMaps,
		// files, bound tokens) are named only, to report them.
		Other map[string]json.RawMessage `json:"-"`
	}
	used bool
}

// authSources are the spec keys of a TriggerAuthentication convert reads.
var authSources = []string{"podIdentity", "secretTargetRef", "env"}

// envVar is one environment variable of a workload's container: a value
// written in the manifest, or a Secret's key.
type envVar struct {
	value  *string
	secret *secretKey
}

// workload is a Deployment or StatefulSet of the input: its containers'
// environment, in order.
type workload struct {
	containers []workloadContainer
}

type workloadContainer struct {
	name string
	env  map[string]envVar
}

// inputIndex holds the objects of the input that ScaledObjects refer to.
type inputIndex struct {
	auths     map[string]*triggerAuth    // "namespace/name", "cluster/name"
	secrets   map[string]map[string]bool // "namespace/name" -> its keys
	workloads map[string]*workload       // "Kind namespace/name"
	order     []string                   // auths in input order
	where     map[string]string          // auth key -> Object.Describe()
}

func newInputIndex() *inputIndex {
	return &inputIndex{auths: map[string]*triggerAuth{}, secrets: map[string]map[string]bool{}, workloads: map[string]*workload{}, where: map[string]string{}}
}

type objectMeta struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

// add indexes o when it is of a kind ScaledObjects refer to; false when
// not.
func (x *inputIndex) add(o Object) (bool, error) {
	switch o.Kind {
	case "TriggerAuthentication", "ClusterTriggerAuthentication":
		var raw struct {
			Metadata objectMeta                 `json:"metadata"`
			Spec     map[string]json.RawMessage `json:"spec"`
		}
		if err := json.Unmarshal(o.JSON, &raw); err != nil {
			return true, fmt.Errorf("%s: %s: %w", o.Where, o.Describe(), err)
		}
		ta := &triggerAuth{Kind: o.Kind, Name: raw.Metadata.Name}
		var spec struct {
			Spec json.RawMessage `json:"spec"`
		}
		_ = json.Unmarshal(o.JSON, &spec)
		if len(spec.Spec) > 0 {
			if err := json.Unmarshal(spec.Spec, &ta.Spec); err != nil {
				return true, fmt.Errorf("%s: %s: spec: %w", o.Where, o.Describe(), err)
			}
		}
		ta.Spec.Other = map[string]json.RawMessage{}
		for k, v := range raw.Spec {
			if !slices.Contains(authSources, k) {
				ta.Spec.Other[k] = v
			}
		}
		key := authKey(o.Kind, raw.Metadata.Namespace, raw.Metadata.Name)
		x.auths[key] = ta
		x.order = append(x.order, key)
		x.where[key] = o.Where + ": " + o.Describe()
		return true, nil
	case "Secret":
		if o.APIVersion != "v1" {
			return false, nil
		}
		var s struct {
			Metadata   objectMeta                 `json:"metadata"`
			Data       map[string]json.RawMessage `json:"data"`
			StringData map[string]json.RawMessage `json:"stringData"`
		}
		if err := json.Unmarshal(o.JSON, &s); err != nil {
			return false, nil // not one the API server takes: skipped, its keys unknown
		}
		keys := map[string]bool{}
		for k := range s.Data {
			keys[k] = true
		}
		for k := range s.StringData {
			keys[k] = true
		}
		x.secrets[s.Metadata.Namespace+"/"+s.Metadata.Name] = keys
		return false, nil // a Secret is listed as skipped: convert uses only its key names
	case "Deployment", "StatefulSet":
		var w struct {
			Metadata objectMeta `json:"metadata"`
			Spec     struct {
				Template struct {
					Spec struct {
						Containers []struct {
							Name string `json:"name"`
							Env  []struct {
								Name      string  `json:"name"`
								Value     *string `json:"value"`
								ValueFrom *struct {
									SecretKeyRef *struct {
										Name string `json:"name"`
										Key  string `json:"key"`
									} `json:"secretKeyRef"`
								} `json:"valueFrom"`
							} `json:"env"`
						} `json:"containers"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(o.JSON, &w); err != nil {
			return false, nil // not ours to check: skipped
		}
		wl := &workload{}
		for _, c := range w.Spec.Template.Spec.Containers {
			wc := workloadContainer{name: c.Name, env: map[string]envVar{}}
			for _, e := range c.Env {
				switch {
				case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
					wc.env[e.Name] = envVar{secret: &secretKey{Name: e.ValueFrom.SecretKeyRef.Name, Key: e.ValueFrom.SecretKeyRef.Key}}
				case e.ValueFrom == nil:
					v := ""
					if e.Value != nil {
						v = *e.Value
					}
					wc.env[e.Name] = envVar{value: &v}
				default:
					wc.env[e.Name] = envVar{} // a ConfigMap's key, a field: not resolved
				}
			}
			wl.containers = append(wl.containers, wc)
		}
		x.workloads[o.Kind+" "+w.Metadata.Namespace+"/"+w.Metadata.Name] = wl
		return false, nil
	}
	return false, nil
}

func authKey(kind, ns, name string) string {
	if kind == "ClusterTriggerAuthentication" {
		return "cluster/" + name
	}
	return ns + "/" + name
}

// auth is the TriggerAuthentication a trigger of a ScaledObject in ns
// names; nil when it is not in the input.
func (x *inputIndex) auth(ns string, ref *KEDAAuthRef) *triggerAuth {
	kind := ref.Kind
	if kind == "" {
		kind = "TriggerAuthentication"
	}
	ta := x.auths[authKey(kind, ns, ref.Name)]
	if ta != nil {
		ta.used = true
	}
	return ta
}

// container is the container of the target workload KEDA reads the
// environment of (envSourceContainerName, else the first); nil when the
// workload is not in the input.
func (x *inputIndex) container(ns string, ref *KEDAScaleTarget, name string) *workloadContainer {
	kind := ref.Kind
	if kind == "" {
		kind = "Deployment"
	}
	if ref.APIVersion != "" && ref.APIVersion != "apps/v1" {
		return nil
	}
	w := x.workloads[kind+" "+ns+"/"+ref.Name]
	if w == nil || len(w.containers) == 0 {
		return nil
	}
	if name == "" {
		name = ref.EnvSourceContainerName
	}
	if name == "" {
		return &w.containers[0]
	}
	for i := range w.containers {
		if w.containers[i].name == name {
			return &w.containers[i]
		}
	}
	return nil
}

// hasSecretKey says whether the input has Secret ns/name with key; known
// is false when the Secret is not in the input.
func (x *inputIndex) hasSecretKey(ns string, s secretKey) (has, known bool) {
	if s.cluster {
		return false, false
	}
	keys, ok := x.secrets[ns+"/"+s.Name]
	if !ok {
		return false, false
	}
	return keys[s.Key], true
}

// otherSources lists a TriggerAuthentication's sources convert does not
// read, sorted.
func (ta *triggerAuth) otherSources() []string {
	var out []string
	for k := range ta.Spec.Other {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// describe is "TriggerAuthentication \"name\"".
func (ta *triggerAuth) describe() string {
	return fmt.Sprintf("%s %q", ta.Kind, ta.Name)
}
