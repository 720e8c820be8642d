// Package scenario is the replay format of `autoscaler simulate`
// (docs/scenarios.md): a recorded history of what one autoscaler
// saw, replayed through the decision core with a virtual clock.
package scenario

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/decision"
	"github.com/metricscale/metricscale/autoscaler/defaults"
	"github.com/metricscale/metricscale/autoscaler/validation"
)

// Duration is a Go duration written as a string ("30s", "5m").
type Duration time.Duration

// Scenario is one replay.
type Scenario struct {
	// KubeVersion is the kube-controller-manager minor the replay decides
	// as ("1.36" or "1.37"; 1.37 when empty): its feature-gate defaults
	// and the API server's validation and generation of that release.
	KubeVersion  string                                `json:"kubeVersion"`
	Start        metav1.Time                           `json:"start"`
	Controller   Controller                            `json:"controller"`
	FeatureGates map[string]bool                       `json:"featureGates"`
	Autoscaler   autoscalingv2.HorizontalPodAutoscaler `json:"autoscaler"`
	Steps        []Step                                `json:"steps"`

	// MetricAutoscaler is set when the scenario's autoscaler is one;
	// Autoscaler is then its HPA view.
	MetricAutoscaler *v1alpha1.MetricAutoscaler `json:"-"`

	// UpstreamArithmetic replays kube-controller-manager's overflows
	// exactly (`simulate --upstream-arithmetic`); it is not part of the
	// format.
	UpstreamArithmetic bool `json:"-"`
}

// Controller holds kube-controller-manager's HPA flags.
type Controller struct {
	Tolerance                    *float64  `json:"tolerance"`
	CPUInitializationPeriod      *Duration `json:"cpuInitializationPeriod"`
	InitialReadinessDelay        *Duration `json:"initialReadinessDelay"`
	DownscaleStabilizationWindow *Duration `json:"downscaleStabilizationWindow"`
}

// Step is what one reconcile sees. A nil list is carried over from the
// step before; an empty one replaces it.
type Step struct {
	At              Duration          `json:"at"`
	Scale           *Scale            `json:"scale"`
	Pods            *[]corev1.Pod     `json:"pods"`
	PodMetrics      *[]PodMetrics     `json:"podMetrics"`
	CustomMetrics   *[]CustomMetric   `json:"customMetrics"`
	ExternalMetrics *[]ExternalMetric `json:"externalMetrics"`
	Failures        *[]Failure        `json:"failures"`
	Autoscaler      *Edit             `json:"autoscaler"`

	// Status is the status a recorded MetricAutoscaler's reconcile read at
	// this step, when it is not the one the step before wrote (a write
	// that failed, a recording that resumes after a gap): the replay takes
	// it, its history and fallback state included, instead of its own.
	Status *v1alpha1.MetricAutoscalerStatus `json:"-"`
}

// Scale is the target's /scale at a step.
type Scale struct {
	Replicas       *int32 `json:"replicas"`
	StatusReplicas *int32 `json:"statusReplicas"`
	Selector       string `json:"selector"`
}

// Edit is a user's change of the spec; its metadata and status are ignored.
type Edit struct {
	APIVersion string                                       `json:"apiVersion"`
	Kind       string                                       `json:"kind"`
	Metadata   *metav1.ObjectMeta                           `json:"metadata"`
	Spec       autoscalingv2.HorizontalPodAutoscalerSpec    `json:"spec"`
	Status     *autoscalingv2.HorizontalPodAutoscalerStatus `json:"status"`

	// MetricAutoscalerSpec is the whole edited spec when the scenario's
	// autoscaler is a MetricAutoscaler; Spec is then its HPA part.
	MetricAutoscalerSpec *v1alpha1.MetricAutoscalerSpec `json:"-"`
}

// PodMetrics is what metrics.k8s.io answers for one pod.
type PodMetrics struct {
	Pod        string                         `json:"pod"`
	Timestamp  *metav1.Time                   `json:"timestamp"`
	Window     *Duration                      `json:"window"`
	Containers map[string]corev1.ResourceList `json:"containers"`
}

// ObjectRef names the object a custom metric describes.
type ObjectRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
}

// CustomMetric is one series of custom.metrics.k8s.io.
type CustomMetric struct {
	Object    ObjectRef         `json:"object"`
	Metric    string            `json:"metric"`
	Labels    map[string]string `json:"labels"`
	Value     resource.Quantity `json:"value"`
	Timestamp *metav1.Time      `json:"timestamp"`
	Window    *Duration         `json:"window"`
}

// ExternalMetric is one series of external.metrics.k8s.io.
type ExternalMetric struct {
	Metric    string            `json:"metric"`
	Labels    map[string]string `json:"labels"`
	Value     resource.Quantity `json:"value"`
	Timestamp *metav1.Time      `json:"timestamp"`
}

// The APIs a failure can name.
const (
	APIResourceMetrics = "metrics.k8s.io"
	APICustomMetrics   = "custom.metrics.k8s.io"
	APIExternalMetrics = "external.metrics.k8s.io"
	APIScale           = "scale"
)

// Failure makes the queries of one API (optionally for one metric) fail.
type Failure struct {
	API    string `json:"api"`
	Metric string `json:"metric"`
}

// Parse reads a scenario from YAML or JSON and checks it. Errors name the
// offending field.
func Parse(data []byte) (*Scenario, error) {
	return ParseAs(data, "")
}

// ParseAs is Parse deciding as kube-controller-manager version (`simulate
// --kube-version`), whatever the scenario's kubeVersion says; an empty
// version keeps the scenario's.
func ParseAs(data []byte, version decision.KubeVersion) (*Scenario, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("not YAML or JSON: %w", err)
	}
	generic, err := parseGeneric(js)
	if err != nil {
		return nil, fmt.Errorf("not YAML or JSON: %w", err)
	}
	if generic == nil {
		return nil, errors.New("empty scenario")
	}
	ma, edits, statuses, err := takeMetricAutoscaler(generic)
	if err != nil {
		return nil, err
	}
	var s Scenario
	if err := decodeValue("", generic, reflect.ValueOf(&s).Elem()); err != nil {
		return nil, err
	}
	if version != "" {
		s.KubeVersion = string(version)
	}
	if ma != nil {
		s.MetricAutoscaler = ma
		s.Autoscaler = *ma.HPA()
		for i, spec := range edits {
			if i < len(s.Steps) {
				s.Steps[i].Autoscaler = &Edit{Spec: spec.HPASpec(), MetricAutoscalerSpec: spec}
			}
		}
		for i, status := range statuses {
			if i < len(s.Steps) {
				s.Steps[i].Status = status
			}
		}
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

func (s *Scenario) validate() error {
	v, err := decision.ParseKubeVersion(s.kubeVersion())
	if err != nil {
		return fieldErr("kubeVersion", "%v", err)
	}
	s.KubeVersion = string(v)
	var gates decision.Gates
	for _, name := range slices.Sorted(maps.Keys(s.FeatureGates)) {
		if _, known := v.GateSpecs()[name]; !known {
			continue // a gate the HPA does not read
		}
		if err := v.SetGate(&gates, name, s.FeatureGates[name]); err != nil {
			return fieldErr("featureGates."+name, "%v", err)
		}
	}
	if s.Start.IsZero() {
		return fieldErr("start", "required (an RFC 3339 time)")
	}
	c := s.Controller
	if c.Tolerance != nil && *c.Tolerance < 0 {
		return fieldErr("controller.tolerance", "must not be negative, got %v", *c.Tolerance)
	}
	for name, d := range map[string]*Duration{
		"controller.cpuInitializationPeriod":      c.CPUInitializationPeriod,
		"controller.initialReadinessDelay":        c.InitialReadinessDelay,
		"controller.downscaleStabilizationWindow": c.DownscaleStabilizationWindow,
	} {
		if d != nil && *d < 0 {
			return fieldErr(name, "must not be negative, got %s", time.Duration(*d))
		}
	}
	a := &s.Autoscaler
	if a.Kind != "" && a.Kind != "HorizontalPodAutoscaler" {
		return fieldErr("autoscaler.kind", "must be HorizontalPodAutoscaler, got %q", a.Kind)
	}
	if a.APIVersion != "" && a.APIVersion != "autoscaling/v2" {
		return fieldErr("autoscaler.apiVersion", "must be autoscaling/v2, got %q", a.APIVersion)
	}
	if a.Name == "" {
		return fieldErr("autoscaler.metadata.name", "required")
	}
	if a.Namespace == "" {
		a.Namespace = metav1.NamespaceDefault
	}
	if s.MetricAutoscaler != nil {
		s.MetricAutoscaler.Namespace = a.Namespace
	}
	opts := validation.Options{ScaleToZero: s.Settings().Gates.ScaleToZero}
	if err := validateSpec(&a.Spec, field.NewPath("autoscaler", "spec"), opts); err != nil {
		return err
	}
	if len(s.Steps) == 0 {
		return fieldErr("steps", "at least one step is required")
	}
	for i := range s.Steps {
		st := &s.Steps[i]
		path := fmt.Sprintf("steps[%d]", i)
		if st.At < 0 {
			return fieldErr(path+".at", "must not be negative, got %s", time.Duration(st.At))
		}
		if i > 0 && st.At <= s.Steps[i-1].At {
			return fieldErr(path+".at", "must be later than the step before (%s), got %s", time.Duration(s.Steps[i-1].At), time.Duration(st.At))
		}
		if i == 0 && st.Scale == nil {
			return fieldErr(path+".scale", "required at the first step")
		}
		if i == 0 && st.Pods == nil {
			return fieldErr(path+".pods", "required at the first step")
		}
		if st.Scale != nil {
			if st.Scale.Replicas == nil {
				return fieldErr(path+".scale.replicas", "required")
			}
			if *st.Scale.Replicas < 0 {
				return fieldErr(path+".scale.replicas", "must not be negative, got %d", *st.Scale.Replicas)
			}
			if st.Scale.StatusReplicas != nil && *st.Scale.StatusReplicas < 0 {
				return fieldErr(path+".scale.statusReplicas", "must not be negative, got %d", *st.Scale.StatusReplicas)
			}
		}
		if st.Autoscaler != nil {
			if err := validateSpec(&st.Autoscaler.Spec, field.NewPath("steps").Index(i).Child("autoscaler", "spec"), opts); err != nil {
				return err
			}
		}
		if err := validateLists(path, st); err != nil {
			return err
		}
	}
	return nil
}

// validateSpec refuses a spec the API server would refuse, after the
// defaulting it applies first.
func validateSpec(spec *autoscalingv2.HorizontalPodAutoscalerSpec, path *field.Path, opts validation.Options) error {
	defaulted := spec.DeepCopy()
	defaults.Spec(defaulted)
	errs := validation.Spec(defaulted, path, opts)
	if len(errs) == 0 {
		return nil
	}
	e := errs[0]
	return &FieldError{Path: e.Field, Err: errors.New(strings.TrimPrefix(validation.Describe(e), e.Field+": "))}
}

func validateLists(path string, st *Step) error {
	if st.Pods != nil {
		for j, p := range *st.Pods {
			if p.Name == "" {
				return fieldErr(fmt.Sprintf("%s.pods[%d].metadata.name", path, j), "required")
			}
		}
	}
	if st.PodMetrics != nil {
		for j, m := range *st.PodMetrics {
			p := fmt.Sprintf("%s.podMetrics[%d]", path, j)
			if m.Pod == "" {
				return fieldErr(p+".pod", "required")
			}
			if m.Window != nil && *m.Window < 0 {
				return fieldErr(p+".window", "must not be negative")
			}
		}
	}
	if st.CustomMetrics != nil {
		for j, m := range *st.CustomMetrics {
			p := fmt.Sprintf("%s.customMetrics[%d]", path, j)
			switch {
			case m.Object.Kind == "":
				return fieldErr(p+".object.kind", "required")
			case m.Object.Name == "":
				return fieldErr(p+".object.name", "required")
			case m.Metric == "":
				return fieldErr(p+".metric", "required")
			case m.Window != nil && *m.Window < 0:
				return fieldErr(p+".window", "must not be negative")
			}
		}
	}
	if st.ExternalMetrics != nil {
		for j, m := range *st.ExternalMetrics {
			if m.Metric == "" {
				return fieldErr(fmt.Sprintf("%s.externalMetrics[%d].metric", path, j), "required")
			}
		}
	}
	if st.Failures != nil {
		for j, f := range *st.Failures {
			switch f.API {
			case APIResourceMetrics, APICustomMetrics, APIExternalMetrics, APIScale:
			default:
				return fieldErr(fmt.Sprintf("%s.failures[%d].api", path, j), "must be one of %s, %s, %s, %s; got %q",
					APIResourceMetrics, APICustomMetrics, APIExternalMetrics, APIScale, f.API)
			}
		}
	}
	return nil
}

// Version is the kube-controller-manager minor the scenario decides as.
func (s *Scenario) Version() decision.KubeVersion {
	v, err := decision.ParseKubeVersion(s.kubeVersion())
	if err != nil {
		return decision.DefaultKubeVersion // validate refused it
	}
	return v
}

func (s *Scenario) kubeVersion() string {
	if s.KubeVersion == "" {
		return string(decision.DefaultKubeVersion)
	}
	return s.KubeVersion
}

// Settings are the controller settings the scenario asks for, over
// kube-controller-manager's defaults and the gate defaults of its version.
func (s *Scenario) Settings() decision.Settings {
	set := decision.DefaultSettings()
	v := s.Version()
	set.Gates = v.DefaultGates()
	c := s.Controller
	if c.Tolerance != nil {
		set.Tolerance = *c.Tolerance
	}
	if c.CPUInitializationPeriod != nil {
		set.CPUInitializationPeriod = time.Duration(*c.CPUInitializationPeriod)
	}
	if c.InitialReadinessDelay != nil {
		set.InitialReadinessDelay = time.Duration(*c.InitialReadinessDelay)
	}
	if c.DownscaleStabilizationWindow != nil {
		set.DownscaleStabilizationWindow = time.Duration(*c.DownscaleStabilizationWindow)
	}
	for name, on := range s.FeatureGates {
		if _, known := v.GateSpecs()[name]; known {
			_ = v.SetGate(&set.Gates, name, on) // validate refused what fails
		}
	}
	if s.MetricAutoscaler != nil {
		// As the controller: scale to zero is always on for MetricAutoscalers.
		set.Gates.ScaleToZero = true
	}
	set.UpstreamArithmetic = s.UpstreamArithmetic
	return set
}
