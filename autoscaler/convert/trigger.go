package convert

import (
	"fmt"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
)

// triggerType is a KEDA trigger type convert reads (one trigger_*.go file
// each, listed in triggerTypes): either to an External metric the adapter
// serves, to a Resource metric, or to a window of spec.schedules.
type triggerType struct {
	name     string
	external func(c *soConverter, d *meta, t *KEDATrigger) *external
	resource func(c *soConverter, d *meta, t *KEDATrigger) *triggerOut
	schedule func(c *soConverter, d *meta, t *KEDATrigger, i int) *v1alpha1.Schedule
}

// external is a converted queue or query trigger: its External metric, and
// the adapter entry that serves it (added once the object converted).
type external struct {
	provider string         // the adapter's provider type
	conn     map[string]any // its options: triggers with equal ones share a provider
	listKey  string         // the option holding the entries ("metrics" when empty)
	entry    func(name string) any
	// secrets are set on the provider when its entry is added, unless set
	// already (by another trigger of the same provider).
	secrets []secretOption
	target  *resource.Quantity
	activ   *resource.Quantity
	authRef bool // credentials come from a TriggerAuthentication
}

// secretOption is a provider option (at path) holding a credential.
type secretOption struct {
	path  []string
	value func(p *builtProvider) any
	// id is where the credential comes from when known before the provider
	// ("file:/path", "env:NAME"); "" for a placeholder file of the provider.
	id string
}

// set puts the credential into opts unless it is there already.
func (s secretOption) set(p *builtProvider) {
	if s.value == nil {
		return
	}
	opts := p.Options
	for _, k := range s.path[:len(s.path)-1] {
		next, ok := opts[k].(map[string]any)
		if !ok {
			return
		}
		opts = next
	}
	last := s.path[len(s.path)-1]
	if opts[last] == nil {
		opts[last] = s.value(p)
	}
}

// trigger converts spec.triggers[i]; nil when it did not (a Fatal issue
// says why).
func (c *soConverter) trigger(i int, t *KEDATrigger) *triggerOut {
	d := newMeta(c, i, t)
	before := len(c.issues)
	failed := func() bool {
		for _, is := range c.issues[before:] {
			if is.Fatal {
				return true
			}
		}
		return false
	}
	if ta := d.ta; ta != nil {
		if pi := ta.Spec.PodIdentity; pi != nil && pi.Provider != "" && pi.Provider != "none" {
			c.issue(true, d.field+".authenticationRef", "%s uses podIdentity (provider %s): no metricscale provider authenticates with a cloud workload identity", ta.describe(), pi.Provider)
			return nil
		}
		if other := ta.otherSources(); len(other) > 0 {
			c.issue(true, d.field+".authenticationRef", "%s reads parameters from %s, which convert does not read (only secretTargetRef and env)", ta.describe(), strings.Join(other, ", "))
			return nil
		}
	}
	typ, ok := lookupTrigger(t.Type)
	if !ok {
		c.issue(true, d.field+".type", "%q: no metricscale provider reads it (convertible: %s)", t.Type, strings.Join(triggerNames(), ", "))
		return nil
	}
	if typ.schedule != nil {
		// A window, not a metric: kept for spec.schedules.
		if s := typ.schedule(c, d, t, i); s != nil && !failed() {
			d.leftovers()
			c.schedules = append(c.schedules, *s)
		}
		return nil
	}
	if typ.resource != nil {
		out := typ.resource(c, d, t)
		if failed() {
			return nil
		}
		d.leftovers()
		return out
	}
	ext := typ.external(c, d, t)
	if ext == nil || failed() {
		return nil
	}
	var target autoscalingv2.MetricTarget
	switch t.MetricType {
	case "", autoscalingv2.AverageValueMetricType:
		target = autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ext.target}
	case autoscalingv2.ValueMetricType:
		target = autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: ext.target}
	default:
		c.issue(true, d.field+".metricType", "%q: a %s trigger takes AverageValue or Value", t.MetricType, t.Type)
		return nil
	}
	if t.AuthenticationRef != nil && d.ta == nil && !ext.authRef {
		c.issue(false, d.field+".authenticationRef", "TriggerAuthentication %q is not read: the converted metric reads without what it provides", t.AuthenticationRef.Name)
	}
	d.leftovers()
	name := metricName(c.so.Namespace, c.so.Name, i, t.Type)
	c.pending = append(c.pending, func() {
		var ids []string
		for _, s := range ext.secrets {
			ids = append(ids, s.id)
		}
		p := c.b.provider(ext.provider, ext.listKey, ext.conn, strings.Join(ids, "\x00"))
		for _, s := range ext.secrets {
			s.set(p)
		}
		c.b.add(p, name, ext.entry(name))
	})
	return &triggerOut{
		name:       name,
		metric:     autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: name}, Target: target}},
		activation: ext.activ,
	}
}

func lookupTrigger(name string) (triggerType, bool) {
	for _, t := range triggerTypes {
		if t.name == name {
			return t, true
		}
	}
	return triggerType{}, false
}

func triggerNames() []string {
	names := make([]string, len(triggerTypes))
	for i, t := range triggerTypes {
		names[i] = t.name
	}
	return names
}

// metricEntry is an ondemand provider's metric entry for the metric it is
// given: the name, scoped to the ScaledObject's namespace, plus fields.
func (c *soConverter) metricEntry(fields map[string]any) func(name string) any {
	return func(name string) any {
		e := map[string]any{"name": name}
		if c.so.Namespace != "" {
			e["namespace"] = c.so.Namespace
		}
		for k, v := range fields {
			e[k] = v
		}
		return e
	}
}

// password is where a provider reads the trigger's password: where the
// metadata says (secret), else, when the trigger has a
// TriggerAuthentication, a file to mount it at (authNote is added to the
// issue saying so); nil when the trigger has no password.
func (c *soConverter) password(d *meta, t *KEDATrigger, s secretRef, authNote string) secretOption {
	opt := secretOption{path: []string{"password"}}
	switch {
	case s.present:
		opt.value = c.secret(d, "password", "password", s)
		opt.id = c.secretID(s)
	case t.AuthenticationRef != nil && d.ta == nil:
		opt.value = c.placeholder(d.field+".authenticationRef", "password", fmt.Sprintf("TriggerAuthentication %q is not read%s", t.AuthenticationRef.Name, authNote))
	}
	return opt
}

// workloadEnv is the scale target's variable name as the input's
// Deployment or StatefulSet sets it (in container, else the one KEDA
// reads); false when the input does not say.
func (c *soConverter) workloadEnv(name, container string) (envVar, bool) {
	if c.x == nil || c.so.Spec.ScaleTargetRef == nil {
		return envVar{}, false
	}
	ct := c.x.container(c.so.Namespace, c.so.Spec.ScaleTargetRef, container)
	if ct == nil {
		return envVar{}, false
	}
	ev, ok := ct.env[name]
	return ev, ok
}

// secret is where a provider reads a credential KEDA had: from the
// adapter's environment when KEDA read the workload's (the same variable
// must be set on the adapter), else a file to mount a Secret at. The
// credential itself is never copied; each way is an issue saying what to
// do.
func (c *soConverter) secret(d *meta, key, what string, s secretRef) func(p *builtProvider) any {
	if s.secret != nil {
		file := c.b.credDir + "/" + s.secret.Name + "/" + s.secret.Key
		field := d.field + ".authenticationRef"
		if s.viaEnv {
			field = d.field + ".metadata." + key + "FromEnv"
		}
		if has, known := c.x.hasSecretKey(c.so.Namespace, *s.secret); known && !has {
			c.issue(false, field, "the %s (%s) is key %q of Secret %q, which has no such key in the input", what, s.from, s.secret.Key, s.secret.Name)
		}
		where := "the ScaledObject's namespace"
		if s.secret.cluster {
			where = "KEDA's namespace"
		}
		c.issue(false, field, "the adapter reads the %s (%s) from %s: mount Secret %q (key %q, of %s) at %s/%s in the adapter's pod (the Secret copied to the adapter's namespace)", what, s.from, file, s.secret.Name, s.secret.Key, where, c.b.credDir, s.secret.Name)
		return func(*builtProvider) any { return map[string]any{"file": file} }
	}
	if s.env != "" && s.from != "" {
		c.issue(false, d.field+".authenticationRef", "the adapter reads the %s (%s) from its own environment variable %s: set it on the adapter's container (from the same Secret as the workload's)", what, s.from, s.env)
		return func(*builtProvider) any { return map[string]any{"env": s.env} }
	}
	if s.env != "" {
		d.warn(key+"FromEnv", "the adapter reads the %s from its own environment variable %s: set it on the adapter's container (from the same Secret as the workload's)", what, s.env)
		return func(*builtProvider) any { return map[string]any{"env": s.env} }
	}
	if s.inline {
		return c.placeholder(d.field+".metadata."+key, what, "the "+what+" written in the trigger is not copied")
	}
	return c.placeholder(d.field+".metadata", what, "the "+what+" is not in the trigger")
}

// secretID is where a credential c.secret reads comes from, when that
// is known now.
func (c *soConverter) secretID(s secretRef) string {
	switch {
	case s.secret != nil:
		return "file:" + c.b.credDir + "/" + s.secret.Name + "/" + s.secret.Key
	case s.env != "":
		return "env:" + s.env
	}
	return ""
}

// placeholder is a credential file the adapter config names: the issue,
// raised when the provider is written, says which file to mount.
func (c *soConverter) placeholder(field, what, why string) func(p *builtProvider) any {
	return func(p *builtProvider) any {
		file := c.b.credential(p, strings.ReplaceAll(what, " ", "-"))
		c.issue(false, field, "%s: mount the %s (a Secret) at %s, where provider %s reads it", why, what, file, p.Name)
		return map[string]any{"file": file}
	}
}

// commaList is a comma-separated list without its empty elements.
func commaList(s string) []any {
	var out []any
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}
