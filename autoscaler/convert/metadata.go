package convert

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// A trigger file declares the metadata keys it reads as a struct, one field
// per key, tagged
//
//	`keda:"KEY[,required][,env][,threshold][,default=VALUE][,hint=TEXT]"`
//
// and meta.decode fills it, reporting each problem as a Fatal issue at
// spec.triggers[i].metadata.KEY, which names the trigger and the key:
//
//   - required: a missing key is an issue;
//   - env: the value may come through KEYFromEnv, a variable of the
//     workload's environment that KEDAOptions.Env must give (hint, which
//     must come last, is added to the issue when it does not);
//   - default: the value when the key is missing.
//
// By the field's type:
//
//   - string: the value, trimmed;
//   - bool: true or false, false when missing;
//   - int: a whole number of at least 0, 0 when missing;
//   - *resource.Quantity: with threshold a target, a number above 0 that is
//     required unless it has a default; else an activation threshold, nil
//     when missing or 0 (KEDA activates above it);
//   - secretRef: a credential, which is never copied: whether KEY is
//     written, and the variable KEYFromEnv names.
//
// Keys that no decoded struct names, nor ignore, are reported as not read
// (not Fatal: a newer KEDA's key does not stop a conversion).

// meta reads one trigger's metadata and remembers what it read, so that
// keys convert does not know are reported.
type meta struct {
	c     *soConverter
	field string // spec.triggers[i]
	auth  bool   // the trigger has an authenticationRef
	// ta is the TriggerAuthentication, when the input has it; its
	// parameters are read where the metadata lacks a key.
	ta *triggerAuth
	// authSecret and authEnv are ta's parameters: a Secret's key, or an
	// environment variable of the workload (in a container, "" for
	// KEDA's).
	authSecret map[string]secretKey
	authEnv    map[string][2]string
	authRead   map[string]bool
	m          map[string]string
	read       map[string]bool
}

func newMeta(c *soConverter, i int, t *KEDATrigger) *meta {
	d := &meta{c: c, field: fmt.Sprintf("spec.triggers[%d]", i), auth: t.AuthenticationRef != nil, m: t.Metadata, read: map[string]bool{},
		authSecret: map[string]secretKey{}, authEnv: map[string][2]string{}, authRead: map[string]bool{}}
	if t.AuthenticationRef != nil && c.x != nil {
		d.ta = c.x.auth(c.so.Namespace, t.AuthenticationRef)
	}
	if d.ta != nil {
		for _, s := range d.ta.Spec.SecretTargetRef {
			d.authSecret[s.Parameter] = secretKey{Name: s.Name, Key: s.Key, cluster: d.ta.Kind == "ClusterTriggerAuthentication"}
		}
		for _, e := range d.ta.Spec.Env {
			d.authEnv[e.Parameter] = [2]string{e.Name, e.ContainerName}
		}
	}
	return d
}

// secretRef is a credential the metadata or the TriggerAuthentication
// names.
type secretRef struct {
	present bool   // KEY or KEYFromEnv is there, even empty
	inline  bool   // KEY holds the credential itself
	env     string // the workload's variable KEYFromEnv names
	// secret is the Secret's key it comes from: a TriggerAuthentication's
	// secretTargetRef, or the workload's variable read from a Secret.
	secret *secretKey
	// from names where it was found, for messages.
	from string
	// viaEnv: secret is what the workload's KEYFromEnv variable reads.
	viaEnv bool
}

// metaTag is a parsed `keda:"..."` tag.
type metaTag struct {
	key                      string
	required, env, threshold bool
	def                      *string
	hint                     string
}

func parseMetaTag(tag string) (metaTag, error) {
	key, rest, _ := strings.Cut(tag, ",")
	t := metaTag{key: key}
	if key == "" {
		return t, fmt.Errorf("no key")
	}
	for rest != "" {
		var opt string
		if strings.HasPrefix(rest, "hint=") {
			opt, rest = rest, ""
		} else {
			opt, rest, _ = strings.Cut(rest, ",")
		}
		name, value, hasValue := strings.Cut(opt, "=")
		switch {
		case name == "required" && !hasValue:
			t.required = true
		case name == "env" && !hasValue:
			t.env = true
		case name == "threshold" && !hasValue:
			t.threshold = true
		case name == "default" && hasValue:
			t.def = &value
		case name == "hint" && hasValue:
			t.hint = value
		default:
			return t, fmt.Errorf("option %q", opt)
		}
	}
	return t, nil
}

var (
	secretRefType = reflect.TypeOf(secretRef{})
	quantityType  = reflect.TypeOf((*resource.Quantity)(nil))
)

// decode fills the struct into points to (see the tags above) and reports
// every problem it finds; false when there was one.
func (d *meta) decode(into any) bool {
	v := reflect.ValueOf(into).Elem()
	ok := true
	for i := range v.NumField() {
		f := v.Type().Field(i)
		tag, found := f.Tag.Lookup("keda")
		if !found {
			continue
		}
		t, err := parseMetaTag(tag)
		if err != nil {
			panic(fmt.Sprintf("convert: %s.%s: keda tag %q: %v", v.Type(), f.Name, tag, err))
		}
		if !d.decodeField(t, v.Field(i)) {
			ok = false
		}
	}
	return ok
}

func (d *meta) decodeField(t metaTag, v reflect.Value) bool {
	if v.Type() == secretRefType {
		_, inline := d.m[t.key]
		_, fromEnv := d.m[t.key+"FromEnv"]
		ref := secretRef{present: inline || fromEnv, inline: d.get(t.key) != "", env: d.get(t.key + "FromEnv")}
		container := ""
		if !ref.present {
			if s, ok := d.authSecret[t.key]; ok {
				d.authRead[t.key] = true
				ref.present, ref.secret, ref.from = true, &s, d.ta.describe()
			} else if e, ok := d.authEnv[t.key]; ok {
				d.authRead[t.key] = true
				ref.present, ref.env, container, ref.from = true, e[0], e[1], d.ta.describe()
			}
		}
		if ref.env != "" {
			// a variable the workload reads from a Secret: the same key
			if ev, ok := d.c.workloadEnv(ref.env, container); ok && ev.secret != nil {
				if ref.from == "" {
					ref.from, ref.viaEnv = "the workload's variable "+ref.env, true
				} else {
					ref.from += ", the workload's variable " + ref.env
				}
				ref.secret, ref.env = ev.secret, ""
			}
		}
		v.Set(reflect.ValueOf(ref))
		return true
	}
	s, ok := d.text(t)
	if !ok || s == "" {
		return ok
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return d.fail(t.key, "%q is not true or false", s)
		}
		v.SetBool(b)
	case reflect.Int:
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return d.fail(t.key, "%q is not a whole number of at least 0", s)
		}
		v.SetInt(int64(n))
	default:
		if v.Type() != quantityType {
			panic(fmt.Sprintf("convert: metadata %s: a field of type %s cannot be decoded", t.key, v.Type()))
		}
		q, err := resource.ParseQuantity(s)
		switch {
		case err != nil:
			return d.fail(t.key, "%q is not a number", s)
		case t.threshold && q.Sign() <= 0:
			return d.fail(t.key, "%q: the target must be above 0", s)
		case !t.threshold && q.IsZero():
			return true
		}
		v.Set(reflect.ValueOf(&q))
	}
	return true
}

// text is a key's value as written, through KEYFromEnv or the default;
// false when the key is required and none of them gives it.
func (d *meta) text(t metaTag) (string, bool) {
	v := d.get(t.key)
	envKey, name, container := t.key+"FromEnv", "", ""
	if v == "" && t.env {
		name = d.get(envKey)
	}
	if v == "" && name == "" {
		// the TriggerAuthentication's parameter, where the metadata has none
		if s, ok := d.authSecret[t.key]; ok {
			d.authRead[t.key] = true
			return "", d.fail(t.key, "from key %q of Secret %q (%s): convert never copies a Secret's values; write %s in the trigger's metadata", s.Key, s.Name, d.ta.describe(), t.key)
		}
		if e, ok := d.authEnv[t.key]; ok {
			d.authRead[t.key] = true
			name, container, envKey = e[0], e[1], t.key
		}
	}
	if v == "" && name != "" {
		val, ok := d.c.opts.Env[name]
		if !ok || val == "" {
			ev, found := d.c.workloadEnv(name, container)
			switch {
			case found && ev.secret != nil:
				return "", d.fail(envKey, "%s is read from key %q of Secret %q by the workload: convert never copies a Secret's values; give it with --env %s=VALUE", name, ev.secret.Key, ev.secret.Name, name)
			case found && ev.value != nil && *ev.value != "":
				val, ok = *ev.value, true
			}
		}
		if !ok || val == "" {
			reason := fmt.Sprintf("%s is an environment variable of the workload's container, which convert cannot read: give its value with --env %s=VALUE", name, name)
			if t.hint != "" {
				reason += " " + t.hint
			}
			return "", d.fail(envKey, "%s", reason)
		}
		v = val
	}
	if v == "" && t.def != nil {
		v = *t.def
	}
	switch {
	case v != "" || !(t.required || t.threshold):
		return v, true
	case t.env && d.auth && d.ta == nil:
		return "", d.fail(t.key, "missing: it may come from the trigger's TriggerAuthentication, which is not in the input; set it in the metadata, or give the TriggerAuthentication with -f")
	default:
		return "", d.fail(t.key, "required")
	}
}

// fail raises a Fatal issue at the metadata key; always false.
func (d *meta) fail(key, format string, args ...any) bool {
	d.c.issue(true, d.field+".metadata."+key, format, args...)
	return false
}

// warn raises an issue (not Fatal) at the metadata key.
func (d *meta) warn(key, format string, args ...any) {
	d.c.issue(false, d.field+".metadata."+key, format, args...)
}

func (d *meta) get(k string) string {
	d.read[k] = true
	return strings.TrimSpace(d.m[k])
}

// markAuthRead marks TriggerAuthentication parameters a trigger reported
// itself.
func (d *meta) markAuthRead(params ...string) {
	for _, p := range params {
		d.authRead[p] = true
	}
}

// ignore marks keys that need no conversion.
func (d *meta) ignore(keys ...string) {
	for _, k := range keys {
		d.read[k] = true
	}
}

// leftovers reports the keys nobody read.
func (d *meta) leftovers() {
	var keys []string
	for k := range d.m {
		if !d.read[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		d.warn(k, "not read by convert: it has no effect on the MetricAutoscaler")
	}
	if d.ta == nil {
		return
	}
	var params []string
	for p := range d.authSecret {
		params = append(params, p)
	}
	for p := range d.authEnv {
		if _, dup := d.authSecret[p]; !dup {
			params = append(params, p)
		}
	}
	slices.Sort(params)
	for _, p := range params {
		if !d.authRead[p] && !d.read[p] {
			d.c.issue(false, d.field+".authenticationRef", "%s parameter %q: not read by convert: the converted metric reads without it", d.ta.describe(), p)
		}
	}
}
