package convert

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"strings"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/defaults"
	"github.com/metricscale/metricscale/autoscaler/formula"
	"github.com/metricscale/metricscale/autoscaler/validation"
)

// KEDA's defaults (keda.sh/v1alpha1 ScaledObject).
const (
	kedaDefaultMin             = 0
	kedaDefaultMax             = 100
	kedaDefaultPollingInterval = 30
	kedaDefaultCooldown        = 300
	// hpaSyncPeriod is kube-controller-manager's default HPA sync period,
	// at which KEDA's HPA scales between 1 and N replicas (ours is the same).
	hpaSyncPeriod = defaults.SyncPeriod

	annotationKEDAPaused         = "autoscaling.keda.sh/paused"
	annotationKEDAPausedReplicas = "autoscaling.keda.sh/paused-replicas"
)

// ScaledObject is the part of a KEDA keda.sh/v1alpha1 ScaledObject that
// convert reads.
type ScaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ScaledObjectSpec `json:"spec"`
	// Status is not read.
	Status json.RawMessage `json:"status,omitempty"`
}

// ScaledObjectSpec is a ScaledObject's spec.
type ScaledObjectSpec struct {
	ScaleTargetRef        *KEDAScaleTarget `json:"scaleTargetRef"`
	PollingInterval       *int32           `json:"pollingInterval,omitempty"`
	InitialCooldownPeriod *int32           `json:"initialCooldownPeriod,omitempty"`
	CooldownPeriod        *int32           `json:"cooldownPeriod,omitempty"`
	IdleReplicaCount      *int32           `json:"idleReplicaCount,omitempty"`
	MinReplicaCount       *int32           `json:"minReplicaCount,omitempty"`
	MaxReplicaCount       *int32           `json:"maxReplicaCount,omitempty"`
	Advanced              *KEDAAdvanced    `json:"advanced,omitempty"`
	Triggers              []KEDATrigger    `json:"triggers"`
	Fallback              *KEDAFallback    `json:"fallback,omitempty"`
}

// KEDAScaleTarget is spec.scaleTargetRef.
type KEDAScaleTarget struct {
	Name                   string `json:"name"`
	APIVersion             string `json:"apiVersion,omitempty"`
	Kind                   string `json:"kind,omitempty"`
	EnvSourceContainerName string `json:"envSourceContainerName,omitempty"`
}

// KEDAAdvanced is spec.advanced.
type KEDAAdvanced struct {
	HorizontalPodAutoscalerConfig *struct {
		Name     string                                         `json:"name,omitempty"`
		Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
	} `json:"horizontalPodAutoscalerConfig,omitempty"`
	RestoreToOriginalReplicaCount bool            `json:"restoreToOriginalReplicaCount,omitempty"`
	ScalingModifiers              json.RawMessage `json:"scalingModifiers,omitempty"`
}

// KEDATrigger is one spec.triggers[] entry.
type KEDATrigger struct {
	Type              string                         `json:"type"`
	Name              string                         `json:"name,omitempty"`
	UseCachedMetrics  bool                           `json:"useCachedMetrics,omitempty"`
	Metadata          map[string]string              `json:"metadata"`
	AuthenticationRef *KEDAAuthRef                   `json:"authenticationRef,omitempty"`
	MetricType        autoscalingv2.MetricTargetType `json:"metricType,omitempty"`
}

// KEDAAuthRef names a TriggerAuthentication.
type KEDAAuthRef struct {
	Name string `json:"name"`
	Kind string `json:"kind,omitempty"`
}

// KEDAFallback is spec.fallback.
type KEDAFallback struct {
	FailureThreshold int32  `json:"failureThreshold"`
	Replicas         int32  `json:"replicas"`
	Behavior         string `json:"behavior,omitempty"`
}

// KEDAOptions configure a KEDA conversion.
type KEDAOptions struct {
	// Env gives values to the names a trigger's *FromEnv fields read from
	// the workload's containers, which convert cannot see.
	Env map[string]string
	// CredentialsDir is where placeholder credential files point
	// (DefaultCredentialsDir when empty).
	CredentialsDir string
	// Paused writes the MetricAutoscalers paused, for a handover: apply
	// them, delete the ScaledObjects (the workload keeps its size), unpause.
	Paused bool
}

// KEDAResult is a KEDA conversion's output.
type KEDAResult struct {
	MetricAutoscalers []*v1alpha1.MetricAutoscaler
	// Adapter serves the converted triggers' metrics; nil when none needs
	// the adapter (cpu and memory only).
	Adapter *AdapterConfig
	Issues  []Issue
	// Notes name the objects of the input that were skipped (not
	// ScaledObjects, nor read by one): nothing of them was lost.
	Notes []string
}

// FromKEDA converts the ScaledObjects of objs. A ScaledObject is
// converted whole or not at all: one with a trigger that cannot be read the
// same way would scale on fewer metrics than KEDA does, so it gets a Fatal
// Issue instead of a MetricAutoscaler. What converts with a difference gets
// an Issue too. The TriggerAuthentications, ClusterTriggerAuthentications,
// Secrets (their key names only, never their values) and Deployments and
// StatefulSets (their containers' environment) of objs are read for the
// triggers that refer to them; every other object is skipped with a Note.
// An object that is not a ScaledObject as KEDA's API would accept it is an
// error naming the field.
func FromKEDA(objs []Object, opts KEDAOptions) (KEDAResult, error) {
	var res KEDAResult
	b := newAdapterBuilder(opts.CredentialsDir)
	x := newInputIndex()
	var scaledObjects []Object
	for _, o := range objs {
		switch o.Kind {
		case "ScaledObject":
			if o.APIVersion != "keda.sh/v1alpha1" {
				return res, fmt.Errorf("%s: %s: apiVersion %q: want keda.sh/v1alpha1", o.Where, o.Describe(), o.APIVersion)
			}
			scaledObjects = append(scaledObjects, o)
			continue
		case "ScaledJob":
			res.Issues = append(res.Issues, Issue{Object: o.Describe(), Fatal: true,
				Reason: "a ScaledJob starts Jobs per event; a MetricAutoscaler scales a workload's replicas"})
			continue
		}
		read, err := x.add(o)
		if err != nil {
			return res, err
		}
		if !read {
			res.Notes = append(res.Notes, fmt.Sprintf("%s: %s: skipped: not a ScaledObject%s", o.Where, o.Describe(), skipNote(o.Kind)))
		}
	}
	targets := map[string]string{} // "namespace Kind name" -> the first ScaledObject on it
	for _, o := range scaledObjects {
		var so ScaledObject
		strict, err := kjson.UnmarshalStrict(o.JSON, &so)
		if err != nil {
			return res, fmt.Errorf("%s: %s: %w", o.Where, o.Describe(), err)
		}
		c := &soConverter{so: &so, opts: opts, b: b, x: x, who: o.Describe()}
		for _, e := range strict {
			c.issue(false, "", "%v: not read by convert (a field of a newer KEDA?)", e)
		}
		ma, err := c.convert()
		if err != nil {
			return res, fmt.Errorf("%s: %s: %w", o.Where, o.Describe(), err)
		}
		if ref := so.Spec.ScaleTargetRef; ref != nil {
			kind := ref.Kind
			if kind == "" {
				kind = "Deployment"
			}
			key := so.Namespace + " " + kind + " " + ref.Name
			if first, dup := targets[key]; dup {
				c.issue(false, "spec.scaleTargetRef", "%s %s is the target of ScaledObject %s too: KEDA refuses a second ScaledObject on one workload, and two MetricAutoscalers on it would undo each other's scaling: apply only one", kind, ref.Name, first)
			} else {
				targets[key] = so.Name
			}
		}
		if ma != nil {
			res.MetricAutoscalers = append(res.MetricAutoscalers, ma)
			c.commit() // may add issues: the credential files it names
		}
		res.Issues = append(res.Issues, c.issues...)
	}
	for _, key := range x.order {
		if !x.auths[key].used {
			res.Notes = append(res.Notes, fmt.Sprintf("%s: skipped: no trigger of the input refers to it", x.where[key]))
		}
	}
	res.Adapter = b.config()
	return res, nil
}

// skipNote says why a kind the input may hold is not converted.
func skipNote(kind string) string {
	switch kind {
	case "Secret":
		return " (its key names are read for the triggers' credentials, never its values)"
	case "Deployment", "StatefulSet":
		return " (its containers' environment is read for the triggers that name it)"
	case "HorizontalPodAutoscaler":
		return " (convert hpa converts it)"
	}
	return ""
}

// soConverter converts one ScaledObject; its adapter entries are held back
// until the whole object converted.
type soConverter struct {
	so      *ScaledObject
	opts    KEDAOptions
	b       *adapterBuilder
	x       *inputIndex
	who     string
	issues  []Issue
	pending []func()
	// minReplicas and maxReplicas are the MetricAutoscaler's, as the
	// triggers convert.
	minReplicas, maxReplicas int32
	// modifier is the formula of advanced.scalingModifiers, when one the
	// MetricAutoscaler expresses.
	modifier *modifier
	// schedules are the cron triggers, converted.
	schedules []v1alpha1.Schedule
}

func (c *soConverter) issue(fatal bool, field, format string, args ...any) {
	c.issues = append(c.issues, Issue{Object: c.who, Field: field, Reason: fmt.Sprintf(format, args...), Fatal: fatal})
}

func (c *soConverter) fatal() bool {
	for _, i := range c.issues {
		if i.Fatal {
			return true
		}
	}
	return false
}

func (c *soConverter) commit() {
	for _, f := range c.pending {
		f()
	}
}

// convert returns the MetricAutoscaler, or nil with a Fatal issue.
func (c *soConverter) convert() (*v1alpha1.MetricAutoscaler, error) {
	so, spec := c.so, &c.so.Spec
	if so.Name == "" {
		return nil, fmt.Errorf("metadata.name: required")
	}
	if spec.ScaleTargetRef == nil || spec.ScaleTargetRef.Name == "" {
		return nil, fmt.Errorf("spec.scaleTargetRef.name: required")
	}
	if len(spec.Triggers) == 0 {
		return nil, fmt.Errorf("spec.triggers: at least one trigger is required")
	}
	ref := autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: spec.ScaleTargetRef.Name}
	if spec.ScaleTargetRef.APIVersion != "" {
		ref.APIVersion = spec.ScaleTargetRef.APIVersion
	}
	if spec.ScaleTargetRef.Kind != "" {
		ref.Kind = spec.ScaleTargetRef.Kind
	}
	minR, maxR := int32(kedaDefaultMin), int32(kedaDefaultMax)
	if spec.MinReplicaCount != nil {
		minR = *spec.MinReplicaCount
	}
	if spec.MaxReplicaCount != nil {
		maxR = *spec.MaxReplicaCount
	}
	if spec.IdleReplicaCount != nil {
		idle := *spec.IdleReplicaCount
		switch {
		case idle >= minR:
			return nil, fmt.Errorf("spec.idleReplicaCount: %d must be less than minReplicaCount (%d)", idle, minR)
		case idle == 0:
			c.issue(false, "spec.idleReplicaCount", "0 with minReplicaCount %d: minReplicas is 0 and the target scales to zero when inactive, but while active it may go down to 1, not only to %d (a MetricAutoscaler has one lower bound)", minR, minR)
			minR = 0
		default:
			c.issue(false, "spec.idleReplicaCount", "%d: no equivalent (a MetricAutoscaler scales to zero or not at all): minReplicas is minReplicaCount (%d), the target never goes down to %d", idle, minR, idle)
		}
	}

	ma := &v1alpha1.MetricAutoscaler{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "MetricAutoscaler"},
		ObjectMeta: metav1.ObjectMeta{
			Name: so.Name, Namespace: so.Namespace, Labels: maps.Clone(so.Labels),
			Annotations: map[string]string{AnnotationFrom: "ScaledObject/" + so.Name},
		},
		Spec: v1alpha1.MetricAutoscalerSpec{
			ScaleTargetRef: ref,
			MinReplicas:    &minR,
			MaxReplicas:    maxR,
			Paused:         c.opts.Paused,
		},
	}
	for k, v := range so.Annotations {
		switch {
		case k == annotationKEDAPaused:
			if v == "true" {
				ma.Spec.Paused = true
			}
		case k == annotationKEDAPausedReplicas:
			c.issue(false, "metadata.annotations["+k+"]", "no equivalent: a paused MetricAutoscaler (spec.paused) keeps the current size instead of going to %s", v)
		case strings.HasPrefix(k, "autoscaling.keda.sh/"), strings.HasPrefix(k, "scaledobject.keda.sh/"), strings.HasPrefix(k, "validations.keda.sh/"), k == annotationLastApplied:
		default:
			ma.Annotations[k] = v
		}
	}

	// syncPeriod: KEDA checks activation every pollingInterval and its HPA
	// scales between 1 and N every HPA sync (15s): the shorter of the two
	// keeps both as fast as they were.
	polling := int32(kedaDefaultPollingInterval)
	if spec.PollingInterval != nil {
		polling = *spec.PollingInterval
	}
	sync := min(time.Duration(max(polling, 1))*time.Second, hpaSyncPeriod)
	ma.Spec.SyncPeriod = &metav1.Duration{Duration: sync}

	if a := spec.Advanced; a != nil {
		if hasScalingModifiers(a) {
			m, reason, err := parseModifier(a.ScalingModifiers, spec.Triggers)
			if err != nil {
				return nil, err
			}
			if m == nil {
				c.issue(true, "spec.advanced.scalingModifiers", "%s", reason)
			}
			c.modifier = m
		}
		if a.RestoreToOriginalReplicaCount {
			c.issue(false, "spec.advanced.restoreToOriginalReplicaCount", "no equivalent: deleting the MetricAutoscaler leaves the target at its current size")
		}
		if h := a.HorizontalPodAutoscalerConfig; h != nil && h.Behavior != nil {
			ma.Spec.Behavior = h.Behavior.DeepCopy()
		}
	}
	if p := spec.InitialCooldownPeriod; p != nil && *p != 0 {
		c.issue(false, "spec.initialCooldownPeriod", "no equivalent: the cooldown to zero counts from the last activity only")
	}
	if f := spec.Fallback; f != nil {
		fb := &v1alpha1.Fallback{FailureThreshold: f.FailureThreshold, Replicas: f.Replicas, Behavior: v1alpha1.FallbackStatic}
		if f.Behavior != "" {
			fb.Behavior = v1alpha1.FallbackBehavior(f.Behavior)
		}
		if f.FailureThreshold == 0 {
			// KEDA takes 0 (it falls back once failures exceed the threshold)
			c.issue(false, "spec.fallback.failureThreshold", "0: KEDA falls back at the first failed read; a MetricAutoscaler's least threshold is 1, written here")
			fb.FailureThreshold = 1
		}
		if f.Behavior == kedaFallbackScalingModifiers {
			// KEDA 2.20: per trigger, inside the formula (its ?? operator)
			if !hasScalingModifiers(spec.Advanced) {
				return nil, fmt.Errorf("spec.fallback.behavior: scalingModifiers needs spec.advanced.scalingModifiers.formula")
			}
			c.issue(true, "spec.fallback.behavior", "scalingModifiers: a failed trigger passed to the formula as nil has no equivalent: a MetricAutoscaler's fallback (static, currentReplicas, currentReplicasIfHigher, currentReplicasIfLower) applies to the whole object")
			fb.Behavior = v1alpha1.FallbackStatic
		}
		if errs := validation.Fallback(fb, field.NewPath("spec", "fallback")); len(errs) > 0 {
			return nil, fmt.Errorf("%s", describeErrs(errs))
		}
		ma.Spec.Fallback = fb
	}
	if minR == 0 && onlyResourceTriggers(spec.Triggers) {
		// KEDA's admission webhook refuses it: the HPA cannot scale to zero on cpu or memory
		return nil, fmt.Errorf("spec.minReplicaCount: 0 needs a trigger other than cpu and memory (KEDA refuses it; set minReplicaCount to 1 or more)")
	}

	var activations []v1alpha1.MetricActivation
	c.minReplicas, c.maxReplicas = minR, maxR
	for i := range spec.Triggers {
		t := &spec.Triggers[i]
		if typ, ok := lookupTrigger(t.Type); ok && typ.schedule != nil && c.modifier != nil {
			// parseModifier refused the cron triggers the formula reads
			c.issue(false, fmt.Sprintf("spec.triggers[%d]", i), "cron trigger not converted: not in the formula, it has no effect in KEDA, whose HPA scales on the formula (and cpu and memory triggers) only")
			continue
		}
		out := c.trigger(i, t)
		if out == nil {
			continue
		}
		ma.Spec.Metrics = append(ma.Spec.Metrics, out.metric)
		if m := c.modifier; m != nil && out.metric.External != nil {
			m.bind(t, i, len(ma.Spec.Metrics)-1)
			// the formula's activation replaces the triggers' own
			out.activation = nil
			if m.perMetric {
				out.activation = m.activation
			}
		}
		if out.activation != nil && minR == 0 {
			activations = append(activations, v1alpha1.MetricActivation{Metric: out.name, Value: *out.activation})
		}
	}
	if m := c.modifier; m != nil && !c.fatal() {
		m.apply(&ma.Spec)
		if f := ma.Spec.Formula; f != nil {
			if _, errs := formula.Compile(f, ma.Spec.Metrics, field.NewPath("spec")); len(errs) > 0 {
				c.issue(true, "spec.advanced.scalingModifiers", "formula %q, in CEL %q: %s", m.formula, f.Expression, describeErrs(errs))
			} else if minR == 0 {
				fieldName := "spec.advanced.scalingModifiers.formula"
				if m.activation != nil {
					fieldName = "spec.advanced.scalingModifiers.activationTarget"
				}
				c.issue(false, fieldName, "%s", m.activationNote(ma.Spec.Formula))
			}
		}
	}
	ma.Spec.Schedules = c.schedules
	if len(ma.Spec.Schedules) > 0 && len(ma.Spec.Metrics) == 0 && !c.fatal() {
		// Without metrics a MetricAutoscaler scales on cpu at 80%, as an
		// HPA; KEDA's HPA on cron triggers alone goes to minReplicaCount
		// outside the windows.
		c.issue(true, "spec.triggers", "cron triggers only: a MetricAutoscaler needs a metric besides its schedules (with none it scales on cpu at 80%%, as an HPA does); add a trigger, such as a cpu one")
	}

	if minR == 0 {
		cooldown := int32(kedaDefaultCooldown)
		if spec.CooldownPeriod != nil {
			cooldown = *spec.CooldownPeriod
		}
		ma.Spec.ScaleToZero = &v1alpha1.ScaleToZero{
			CooldownPeriod: &metav1.Duration{Duration: time.Duration(cooldown) * time.Second},
			Activation:     activations,
		}
	}
	if c.fatal() {
		return nil, nil
	}
	checked := ma.Spec.HPASpec()
	checked = *checked.DeepCopy()
	defaults.Spec(&checked)
	errs := validation.Spec(&checked, field.NewPath("spec"), validation.Options{ScaleToZero: true})
	errs = append(errs, validation.Schedules(&ma.Spec, field.NewPath("spec"))...)
	errs = append(errs, validation.Formula(&ma.Spec, field.NewPath("spec"))...)
	if len(errs) > 0 {
		return nil, fmt.Errorf("the converted MetricAutoscaler would be invalid: %s", describeErrs(errs))
	}
	return ma, nil
}

// kedaFallbackScalingModifiers is KEDA 2.20's per-trigger fallback.
const kedaFallbackScalingModifiers = "scalingModifiers"

func hasScalingModifiers(a *KEDAAdvanced) bool {
	return a != nil && len(a.ScalingModifiers) > 0 && string(a.ScalingModifiers) != "null" && string(a.ScalingModifiers) != "{}"
}

// onlyResourceTriggers: every trigger is cpu or memory.
func onlyResourceTriggers(ts []KEDATrigger) bool {
	for _, t := range ts {
		if t.Type != "cpu" && t.Type != "memory" {
			return false
		}
	}
	return true
}

// triggerOut is one converted trigger.
type triggerOut struct {
	name       string // the metric's name in spec.metrics
	metric     autoscalingv2.MetricSpec
	activation *resource.Quantity
}

var nonName = regexp.MustCompile(`[^a-z0-9.-]+`)

// metricName is the External metric a trigger becomes:
// keda-<namespace>-<scaledobject>-s<index>-<type>, a valid metric name of
// every provider, unique in the adapter.
func metricName(ns, so string, i int, typ string) string {
	n := fmt.Sprintf("keda-%s-%s-s%d-%s", ns, so, i, typ)
	return strings.Trim(nonName.ReplaceAllString(strings.ToLower(n), "-"), "-.")
}
