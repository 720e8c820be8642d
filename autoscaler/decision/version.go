package decision

import (
	"fmt"
	"strings"
)

// KubeVersion is the kube-controller-manager minor release whose HPA
// semantics decide: its feature gates and their defaults
// (docs/scenarios.md, "Kubernetes versions").
type KubeVersion string

// The versions the decision core can decide as.
const (
	KubeVersion136 KubeVersion = "1.36"
	KubeVersion137 KubeVersion = "1.37"
	// DefaultKubeVersion is the one the controller decides as.
	DefaultKubeVersion = KubeVersion137
)

// KubeVersions lists the supported versions, oldest first.
var KubeVersions = []KubeVersion{KubeVersion136, KubeVersion137}

// ParseKubeVersion reads "1.36", "v1.37", "1.37.2" (the patch is
// ignored: the HPA's semantics change only with the minor).
func ParseKubeVersion(s string) (KubeVersion, error) {
	t := strings.TrimPrefix(strings.TrimSpace(s), "v")
	if parts := strings.Split(t, "."); len(parts) == 3 {
		t = parts[0] + "." + parts[1]
	}
	for _, v := range KubeVersions {
		if string(v) == t {
			return v, nil
		}
	}
	return "", fmt.Errorf("unsupported Kubernetes version %q: want one of %s, %s", s, KubeVersion136, KubeVersion137)
}

// GateSpec is one feature gate as a kube-controller-manager release has it.
type GateSpec struct {
	Default bool
	// Locked gates (GA) refuse a value other than their default.
	Locked bool
	// Stage is "Alpha", "Beta" or "GA", for messages and docs.
	Stage string
}

// The kube-controller-manager feature gates the decisions read.
const (
	GateConfigurableTolerance = "HPAConfigurableTolerance"
	GateScaleToZero           = "HPAScaleToZero"
	GatePodLevelResources     = "PodLevelResources"
	GateGeneration            = "HPAGeneration"
)

// GateSpecs are the gates this version knows that the decisions read,
// as its pkg/features has them. A gate absent from the map does not exist
// in that version.
func (v KubeVersion) GateSpecs() map[string]GateSpec {
	switch v {
	case KubeVersion136:
		return map[string]GateSpec{
			GateConfigurableTolerance: {Default: true, Stage: "Beta"},
			GateScaleToZero:           {Default: false, Stage: "Alpha"},
			GatePodLevelResources:     {Default: true, Stage: "Beta"},
		}
	default:
		return map[string]GateSpec{
			GateConfigurableTolerance: {Default: true, Locked: true, Stage: "GA"},
			GateScaleToZero:           {Default: true, Stage: "Beta"},
			GatePodLevelResources:     {Default: true, Stage: "Beta"},
			GateGeneration:            {Default: true, Stage: "Beta"},
		}
	}
}

// DefaultGates are the version's gate defaults.
func (v KubeVersion) DefaultGates() Gates {
	g := Gates{}
	for name, spec := range v.GateSpecs() {
		_ = g.set(name, spec.Default)
	}
	return g
}

// SetGate sets one gate as `--feature-gates name=value` would on this
// version: an unknown gate and a locked one set against its default fail.
func (v KubeVersion) SetGate(g *Gates, name string, value bool) error {
	spec, ok := v.GateSpecs()[name]
	if !ok {
		return fmt.Errorf("%s is not a gate of kube-controller-manager v%s that the HPA reads", name, v)
	}
	if spec.Locked && value != spec.Default {
		return fmt.Errorf("cannot set to %t: %s is GA and locked to %t in v%s", value, name, spec.Default, v)
	}
	return g.set(name, value)
}

func (g *Gates) set(name string, value bool) error {
	switch name {
	case GateConfigurableTolerance:
		g.ConfigurableTolerance = value
	case GateScaleToZero:
		g.ScaleToZero = value
	case GatePodLevelResources:
		g.PodLevelResources = value
	case GateGeneration:
		g.Generation = value
	default:
		return fmt.Errorf("unknown feature gate %s", name)
	}
	return nil
}
