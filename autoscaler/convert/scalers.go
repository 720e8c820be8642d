package convert

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// meta reads one trigger's metadata and remembers what it read, so that
// keys convert does not know are reported.
type meta struct {
	c     *soConverter
	field string // spec.triggers[i]
	m     map[string]string
	read  map[string]bool
}

func (d *meta) has(k string) bool {
	_, ok := d.m[k]
	return ok
}

func (d *meta) get(k string) string {
	d.read[k] = true
	return strings.TrimSpace(d.m[k])
}

// ignore marks keys that need no conversion.
func (d *meta) ignore(keys ...string) {
	for _, k := range keys {
		d.read[k] = true
	}
}

// value reads k from the metadata or, through k+"FromEnv", from the values
// the user gave for the workload's environment (KEDAOptions.Env). ok is
// false when neither gives it; env is the variable's name when one was
// named.
func (d *meta) value(k string) (v, env string, ok bool) {
	if v := d.get(k); v != "" {
		return v, "", true
	}
	env = d.get(k + "FromEnv")
	if env == "" {
		return "", "", false
	}
	v, ok = d.c.opts.Env[env]
	return v, env, ok
}

// required reads k as value does; when it is missing the trigger does not
// convert and a Fatal issue says why.
func (d *meta) required(k string) (string, bool) {
	v, env, ok := d.value(k)
	switch {
	case ok && v != "":
		return v, true
	case env != "":
		d.c.issue(true, d.field+".metadata."+k+"FromEnv", "%s is an environment variable of the workload's container, which convert cannot read: give its value with --env %s=VALUE", env, env)
	case d.c.hasAuth(d.field):
		d.c.issue(true, d.field+".metadata."+k, "missing: it may come from the trigger's TriggerAuthentication, which convert does not read; set it in the metadata")
	default:
		d.c.issue(true, d.field+".metadata."+k, "required")
	}
	return "", false
}

func (d *meta) flag(k string) (bool, bool) {
	v := d.get(k)
	if v == "" {
		return false, true
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		d.c.issue(true, d.field+".metadata."+k, "%q is not true or false", v)
		return false, false
	}
	return b, true
}

// quantity reads k as a positive number (def when missing, "" for none).
func (d *meta) quantity(k, def string) (*resource.Quantity, bool) {
	v := d.get(k)
	if v == "" {
		v = def
	}
	if v == "" {
		d.c.issue(true, d.field+".metadata."+k, "required")
		return nil, false
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		d.c.issue(true, d.field+".metadata."+k, "%q is not a number", v)
		return nil, false
	}
	if q.Sign() <= 0 {
		d.c.issue(true, d.field+".metadata."+k, "%q: the target must be above 0", v)
		return nil, false
	}
	return &q, true
}

// activation reads an activation threshold (KEDA's default: 0, activate
// above zero); nil when it is 0 or missing.
func (d *meta) activation(k string) (*resource.Quantity, bool) {
	v := d.get(k)
	if v == "" {
		return nil, true
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		d.c.issue(true, d.field+".metadata."+k, "%q is not a number", v)
		return nil, false
	}
	if q.IsZero() {
		return nil, true
	}
	return &q, true
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
		d.c.issue(false, d.field+".metadata."+k, "not read by convert: it has no effect on the MetricAutoscaler")
	}
}

func (c *soConverter) hasAuth(field string) bool {
	i, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(field, "spec.triggers["), "]"))
	return err == nil && c.so.Spec.Triggers[i].AuthenticationRef != nil
}

// external is a converted queue or query trigger: its External metric, and
// the adapter entry that serves it (added once the object converted).
type external struct {
	typ     string
	conn    map[string]any
	entry   func(p *builtProvider, name string) any
	target  *resource.Quantity
	activ   *resource.Quantity
	authRef bool // credentials come from a TriggerAuthentication
}

// trigger converts spec.triggers[i]; nil when it did not (a Fatal issue
// says why).
func (c *soConverter) trigger(i int, t *KEDATrigger, minReplicas int32) *triggerOut {
	d := &meta{c: c, field: fmt.Sprintf("spec.triggers[%d]", i), m: t.Metadata, read: map[string]bool{}}
	before := len(c.issues)
	failed := func() bool {
		for _, is := range c.issues[before:] {
			if is.Fatal {
				return true
			}
		}
		return false
	}
	name := metricName(c.so.Namespace, c.so.Name, i, t.Type)
	var ext *external
	switch t.Type {
	case "cpu", "memory":
		out := c.resourceTrigger(d, t)
		if failed() {
			return nil
		}
		d.leftovers()
		return out
	case "prometheus":
		ext = c.prometheus(d, t)
	case "rabbitmq":
		ext = c.rabbitmq(d, t)
	case "redis":
		ext = c.redis(d, t)
	case "kafka":
		ext = c.kafka(d, t, minReplicas)
	case "postgresql":
		ext = c.postgresql(d, t)
	case "nats-jetstream":
		ext = c.natsJetStream(d, t)
	default:
		c.issue(true, d.field+".type", "%q: no metricscale provider reads it (convertible: prometheus, rabbitmq, redis, kafka, postgresql, nats-jetstream, cpu, memory)", t.Type)
		return nil
	}
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
	if t.AuthenticationRef != nil && !ext.authRef {
		c.issue(false, d.field+".authenticationRef", "TriggerAuthentication %q is not read: the converted metric reads without what it provides", t.AuthenticationRef.Name)
	}
	d.leftovers()
	c.pending = append(c.pending, func() {
		p := c.b.provider(ext.typ, ext.conn)
		c.b.add(p, name, ext.entry(p, name))
	})
	return &triggerOut{
		name:       name,
		metric:     autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: name}, Target: target}},
		activation: ext.activ,
	}
}

// metricEntry is an ondemand provider's metric entry: the name, scoped to
// the ScaledObject's namespace, plus the type's own fields.
func (c *soConverter) metricEntry(name string, fields map[string]any) map[string]any {
	e := map[string]any{"name": name}
	if c.so.Namespace != "" {
		e["namespace"] = c.so.Namespace
	}
	for k, v := range fields {
		e[k] = v
	}
	return e
}

// secret is where a provider reads a credential KEDA had: from the
// adapter's environment when KEDA read the workload's (the same variable
// must be set on the adapter), else a file to mount a Secret at. The
// credential itself is never copied; each way is an issue saying what to
// do.
func (c *soConverter) secret(d *meta, key, what string) func(p *builtProvider) any {
	if env := d.get(key + "FromEnv"); env != "" {
		c.issue(false, d.field+".metadata."+key+"FromEnv", "the adapter reads the %s from its own environment variable %s: set it on the adapter's container (from the same Secret as the workload's)", what, env)
		return func(*builtProvider) any { return map[string]any{"env": env} }
	}
	if d.get(key) != "" {
		return c.placeholder(d.field+".metadata."+key, what, "the "+what+" written in the trigger is not copied")
	}
	return c.placeholder(d.field+".metadata", what, "the "+what+" is not in the trigger")
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

// resourceTrigger converts a cpu or memory trigger to a Resource (or
// ContainerResource) metric.
func (c *soConverter) resourceTrigger(d *meta, t *KEDATrigger) *triggerOut {
	typ := t.MetricType
	if old := d.get("type"); old != "" {
		if typ != "" {
			c.issue(true, d.field+".metadata.type", "set metadata.type or metricType, not both")
			return nil
		}
		typ = autoscalingv2.MetricTargetType(old)
	}
	value := d.get("value")
	if value == "" {
		c.issue(true, d.field+".metadata.value", "required")
		return nil
	}
	var target autoscalingv2.MetricTarget
	switch typ {
	case autoscalingv2.UtilizationMetricType:
		n, err := strconv.ParseInt(value, 10, 32)
		if err != nil || n <= 0 {
			c.issue(true, d.field+".metadata.value", "%q: a Utilization target is a whole percentage above 0", value)
			return nil
		}
		u := int32(n)
		target = autoscalingv2.MetricTarget{Type: typ, AverageUtilization: &u}
	case autoscalingv2.AverageValueMetricType:
		q, err := resource.ParseQuantity(value)
		if err != nil || q.Sign() <= 0 {
			c.issue(true, d.field+".metadata.value", "%q is not a quantity above 0", value)
			return nil
		}
		target = autoscalingv2.MetricTarget{Type: typ, AverageValue: &q}
	case "":
		c.issue(true, d.field+".metricType", "required for a %s trigger: Utilization or AverageValue", t.Type)
		return nil
	default:
		c.issue(true, d.field+".metricType", "%q: a %s trigger takes Utilization or AverageValue", typ, t.Type)
		return nil
	}
	if a, _ := d.activation("activationValue"); a != nil {
		c.issue(false, d.field+".metadata.activationValue", "not converted: cpu and memory never activate a target from zero")
	}
	res := corev1.ResourceName(t.Type)
	out := &triggerOut{name: t.Type}
	if cn := d.get("containerName"); cn != "" {
		out.metric = autoscalingv2.MetricSpec{Type: autoscalingv2.ContainerResourceMetricSourceType, ContainerResource: &autoscalingv2.ContainerResourceMetricSource{Name: res, Container: cn, Target: target}}
	} else {
		out.metric = autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: res, Target: target}}
	}
	return out
}

// prometheus: an external rule whose query is the trigger's, served by a
// prometheus provider per server. The rule is discovered through the `up`
// series, which every scraping Prometheus has, so that the metric exists
// whether or not the query's own series do; with ignoreNullValues (KEDA's
// default) an empty answer is 0, as KEDA reads it.
func (c *soConverter) prometheus(d *meta, t *KEDATrigger) *external {
	server, ok1 := d.required("serverAddress")
	query, ok2 := d.required("query")
	target, ok3 := d.quantity("threshold", "")
	activ, ok4 := d.activation("activationThreshold")
	if !(ok1 && ok2 && ok3 && ok4) {
		return nil
	}
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		c.issue(true, d.field+".metadata.serverAddress", "%q is not an http or https URL", server)
		return nil
	}
	if u.User != nil {
		c.issue(true, d.field+".metadata.serverAddress", "credentials in the URL are not copied: give them through the provider's options")
		return nil
	}
	if strings.Contains(query, "<<") || strings.Contains(query, ">>") {
		c.issue(true, d.field+".metadata.query", "contains << or >>, the delimiters of the adapter's query templates")
		return nil
	}
	if ns := d.get("namespace"); ns != "" {
		c.issue(true, d.field+".metadata.namespace", "the namespace query parameter (Thanos, Cortex tenancy) has no equivalent in the prometheus provider")
	}
	if d.get("queryParameters") != "" {
		c.issue(true, d.field+".metadata.queryParameters", "no equivalent in the prometheus provider")
	}
	if d.get("awsRegion") != "" {
		c.issue(true, d.field+".metadata.awsRegion", "Amazon Managed Prometheus (SigV4) is not supported by the prometheus provider")
	}
	conn := map[string]any{"url": strings.TrimRight(server, "/")}
	headers := map[string]any{}
	if h := d.get("customHeaders"); h != "" {
		for _, kv := range strings.Split(h, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || strings.TrimSpace(k) == "" {
				c.issue(true, d.field+".metadata.customHeaders", "%q: want key=value,key=value", h)
				return nil
			}
			headers[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	if org := d.get("cortexOrgID"); org != "" {
		headers["X-Scope-OrgID"] = org
	}
	if len(headers) > 0 {
		conn["headers"] = headers
	}
	if unsafe, ok := d.flag("unsafeSsl"); !ok {
		return nil
	} else if unsafe && u.Scheme == "https" {
		conn["insecureSkipTLSVerify"] = true
	}
	authRef := false
	// one folder per server: the credentials are part of what makes a provider
	dir := c.b.credDir + "/prometheus-" + strings.Trim(nonName.ReplaceAllString(strings.ToLower(u.Host), "-"), "-")
	if modes := d.get("authModes"); modes != "" {
		for _, m := range strings.Split(modes, ",") {
			switch m = strings.TrimSpace(m); m {
			case "bearer":
				conn["bearerTokenFile"] = dir + "/token"
				c.issue(false, d.field+".metadata.authModes", "bearer: the token is not copied: mount it at %s (providers[].options.bearerTokenFile)", conn["bearerTokenFile"])
			case "basic":
				conn["username"] = "REPLACE-WITH-USERNAME"
				conn["passwordFile"] = dir + "/password"
				c.issue(false, d.field+".metadata.authModes", "basic: the credentials are not copied: set providers[].options.username and mount the password at %s", conn["passwordFile"])
			case "tls":
				conn["certFile"] = dir + "/tls.crt"
				conn["keyFile"] = dir + "/tls.key"
				c.issue(false, d.field+".metadata.authModes", "tls: the client certificate is not copied: mount it at %s and %s (and a CA at caFile if needed)", conn["certFile"], conn["keyFile"])
			default:
				c.issue(true, d.field+".metadata.authModes", "%q: no equivalent in the prometheus provider", m)
				return nil
			}
		}
		authRef = true
	}
	ignoreNull := true
	if d.has("ignoreNullValues") {
		var ok bool
		if ignoreNull, ok = d.flag("ignoreNullValues"); !ok {
			return nil
		}
	}
	d.ignore("timeout")
	metricsQuery := query
	if ignoreNull {
		metricsQuery = "(" + query + ") or vector(0)"
	}
	return &external{typ: "prometheus", conn: conn, target: target, activ: activ, authRef: authRef,
		entry: func(_ *builtProvider, name string) any {
			return map[string]any{
				"seriesQuery":  "up",
				"resources":    map[string]any{"namespaced": false},
				"name":         map[string]any{"matches": "^up$", "as": name},
				"metricsQuery": metricsQuery,
			}
		}}
}

// rabbitmq: one rabbitmq provider per broker and user. QueueLength counts
// what KEDA counts: ready + unacknowledged over HTTP (ready only with
// excludeUnacknowledged), ready over AMQP.
func (c *soConverter) rabbitmq(d *meta, t *KEDATrigger) *external {
	host, ok := d.required("host")
	if !ok {
		return nil
	}
	u, err := url.Parse(host)
	if err != nil || u.Host == "" {
		c.issue(true, d.field+".metadata.host", "not a URL (amqp://, amqps://, http:// or https://)")
		return nil
	}
	protocol := d.get("protocol")
	switch {
	case protocol == "" || protocol == "auto":
	case protocol == "amqp" && (u.Scheme == "amqp" || u.Scheme == "amqps"), protocol == "http" && (u.Scheme == "http" || u.Scheme == "https"):
	default:
		c.issue(true, d.field+".metadata.protocol", "%q does not match the host's scheme %q", protocol, u.Scheme)
		return nil
	}
	conn := map[string]any{}
	amqp := u.Scheme == "amqp" || u.Scheme == "amqps"
	vhost := ""
	base := url.URL{Scheme: u.Scheme, Host: u.Host}
	switch u.Scheme {
	case "amqp", "amqps":
		vhost = strings.TrimPrefix(u.Path, "/")
		conn["amqpURL"] = base.String()
	case "http", "https":
		// http://host:15672/[prefix/]vhost: the last segment is the vhost
		p := strings.TrimPrefix(u.EscapedPath(), "/")
		prefix := ""
		if i := strings.LastIndex(p, "/"); i >= 0 {
			prefix, p = p[:i], p[i+1:]
		}
		vhost, _ = url.PathUnescape(p)
		if prefix != "" {
			base.Path = "/" + prefix
		}
		conn["managementURL"] = base.String()
	default:
		c.issue(true, d.field+".metadata.host", "scheme %q: want amqp, amqps, http or https", u.Scheme)
		return nil
	}
	if v := d.get("vhostName"); v != "" {
		vhost = v
	}
	if vhost == "" {
		vhost = "/"
	}
	user := ""
	if u.User != nil {
		user = u.User.Username()
	}
	var password func(*builtProvider) any
	switch {
	case u.User != nil:
		why := "the user's password is not in the trigger"
		if _, has := u.User.Password(); has {
			why = "the password in the URL is not copied"
		}
		password = c.placeholder(d.field+".metadata.host", "password", why)
	case d.has("usernameFromEnv") || d.has("username"):
		v, env, ok := d.value("username")
		if !ok || v == "" {
			c.issue(true, d.field+".metadata.usernameFromEnv", "%s is an environment variable of the workload's container: give its value with --env %s=VALUE", env, env)
			return nil
		}
		user = v
	case t.AuthenticationRef != nil:
		user = "REPLACE-WITH-USERNAME"
		password = c.placeholder(d.field+".authenticationRef", "password", fmt.Sprintf("TriggerAuthentication %q is not read: set providers[].options.username", t.AuthenticationRef.Name))
	default:
		user = "guest"
		password = c.placeholder(d.field+".metadata.host", "password", "no user in the URL: RabbitMQ's default user guest is assumed, as KEDA does")
	}
	if d.has("password") || d.has("passwordFromEnv") || password == nil {
		password = c.secret(d, "password", "password")
	}
	conn["username"] = user
	if unsafe, ok := d.flag("unsafeSsl"); !ok {
		return nil
	} else if unsafe && (u.Scheme == "https" || u.Scheme == "amqps") {
		conn["tls"] = map[string]any{"insecureSkipVerify": true}
	}

	mode := d.get("mode")
	valueKey := "value"
	if mode == "" && d.has("queueLength") {
		mode, valueKey = "QueueLength", "queueLength"
	}
	measure := ""
	switch mode {
	case "QueueLength":
		switch excl, ok := d.flag("excludeUnacknowledged"); {
		case !ok:
			return nil
		case amqp:
			measure = "ready" // a passive declare reports ready messages
		case excl:
			measure = "ready"
		default:
			measure = "total"
		}
	case "MessageRate":
		measure = "publishRate"
	case "DeliverGetRate":
		measure = "deliverRate"
	case "":
		c.issue(true, d.field+".metadata.mode", "required: QueueLength or MessageRate")
		return nil
	default:
		c.issue(true, d.field+".metadata.mode", "%q: no equivalent measure in the rabbitmq provider (convertible: QueueLength, MessageRate, DeliverGetRate)", mode)
		return nil
	}
	if amqp && measure != "ready" {
		c.issue(true, d.field+".metadata.mode", "%s needs the management API (an http host)", mode)
		return nil
	}
	target, ok := d.quantity(valueKey, "")
	if !ok {
		return nil
	}
	activ, ok := d.activation("activationValue")
	if !ok {
		return nil
	}
	queue, ok := d.required("queueName")
	if !ok {
		return nil
	}
	fields := map[string]any{"vhost": vhost, "measure": measure}
	regex, ok := d.flag("useRegex")
	if !ok {
		return nil
	}
	if regex {
		if amqp {
			c.issue(true, d.field+".metadata.useRegex", "needs the management API (an http host)")
			return nil
		}
		// KEDA's regex is unanchored; the provider anchors its own
		fields["queueRegex"] = ".*(?:" + queue + ").*"
		if _, err := regexp.Compile(queue); err != nil {
			c.issue(true, d.field+".metadata.queueName", "not a regular expression: %v", err)
			return nil
		}
		switch op := d.get("operation"); op {
		case "", "sum":
		default:
			c.issue(true, d.field+".metadata.operation", "%q: the matching queues' values are summed (one series each), not %s", op, op)
			return nil
		}
	} else {
		fields["queue"] = queue
	}
	if amqp {
		fields["source"] = "amqp"
	}
	d.ignore("pageSize", "timeout", "protocol")
	return &external{typ: "rabbitmq", conn: conn, target: target, activ: activ, authRef: true,
		entry: func(p *builtProvider, name string) any {
			if _, set := p.Options["password"]; !set {
				p.Options["password"] = password(p)
			}
			return c.metricEntry(name, fields)
		}}
}

// redis: the length of a list (LLEN), one redis provider per server, user
// and database.
func (c *soConverter) redis(d *meta, t *KEDATrigger) *external {
	addr := ""
	if a, env, ok := d.value("address"); ok && a != "" {
		addr = a
	} else if a, env2, ok := d.value("addresses"); ok && a != "" {
		addr = a
	} else if env != "" || env2 != "" {
		name := env + env2
		c.issue(true, d.field+".metadata.addressFromEnv", "%s is an environment variable of the workload's container: give its value with --env %s=VALUE", name, name)
		return nil
	} else {
		host, ok1 := d.required("host")
		port, ok2 := d.required("port")
		if !ok1 || !ok2 {
			return nil
		}
		addr = net.JoinHostPort(host, port)
	}
	if strings.Contains(addr, ",") {
		c.issue(true, d.field+".metadata.address", "several addresses (a cluster): the redis provider reads one standalone server")
		return nil
	}
	conn := map[string]any{"address": addr}
	if db := d.get("databaseIndex"); db != "" {
		n, err := strconv.Atoi(db)
		if err != nil || n < 0 {
			c.issue(true, d.field+".metadata.databaseIndex", "%q is not a database number", db)
			return nil
		}
		if n != 0 {
			conn["db"] = n
		}
	}
	tlsOn, ok := d.flag("enableTLS")
	if !ok {
		return nil
	}
	unsafe, ok := d.flag("unsafeSsl")
	if !ok {
		return nil
	}
	if tlsOn {
		tls := map[string]any{}
		if unsafe {
			tls["insecureSkipVerify"] = true
		}
		conn["tls"] = tls
	}
	if d.has("username") || d.has("usernameFromEnv") {
		v, env, ok := d.value("username")
		if !ok || v == "" {
			c.issue(true, d.field+".metadata.usernameFromEnv", "%s is an environment variable of the workload's container: give its value with --env %s=VALUE", env, env)
			return nil
		}
		conn["username"] = v
	}
	var password func(*builtProvider) any
	switch {
	case d.has("password") || d.has("passwordFromEnv"):
		password = c.secret(d, "password", "password")
	case t.AuthenticationRef != nil:
		password = c.placeholder(d.field+".authenticationRef", "password", fmt.Sprintf("TriggerAuthentication %q is not read (set username too if it has one)", t.AuthenticationRef.Name))
	}
	list, ok := d.required("listName")
	if !ok {
		return nil
	}
	target, ok := d.quantity("listLength", "5")
	if !ok {
		return nil
	}
	activ, ok := d.activation("activationListLength")
	if !ok {
		return nil
	}
	return &external{typ: "redis", conn: conn, target: target, activ: activ, authRef: true,
		entry: func(p *builtProvider, name string) any {
			if _, set := p.Options["password"]; !set && password != nil {
				p.Options["password"] = password(p)
			}
			return c.metricEntry(name, map[string]any{"type": "listLength", "key": list})
		}}
}

// kafka: a consumer group's lag on its topic (every topic when none is
// named), one kafka provider per cluster and credentials.
func (c *soConverter) kafka(d *meta, t *KEDATrigger, minReplicas int32) *external {
	servers, ok1 := d.required("bootstrapServers")
	group, ok2 := d.required("consumerGroup")
	if !ok1 || !ok2 {
		return nil
	}
	var brokers []any
	for _, s := range strings.Split(servers, ",") {
		if s = strings.TrimSpace(s); s != "" {
			brokers = append(brokers, s)
		}
	}
	conn := map[string]any{"brokers": brokers}
	fields := map[string]any{"group": group}
	topic, env, _ := d.value("topic")
	switch {
	case topic != "":
		var topics []any
		for _, s := range strings.Split(topic, ",") {
			if s = strings.TrimSpace(s); s != "" {
				topics = append(topics, s)
			}
		}
		fields["topics"] = topics
	case env != "":
		c.issue(true, d.field+".metadata.topicFromEnv", "%s is an environment variable of the workload's container: give its value with --env %s=VALUE", env, env)
		return nil
	default:
		fields["topicRegex"] = ".*"
		c.issue(false, d.field+".metadata.topic", "none: the lag is read on every topic (topicRegex .*), where KEDA reads the topics the group committed offsets to")
	}
	switch p := d.get("offsetResetPolicy"); p {
	case "", "latest":
	case "earliest":
		fields["offsetResetPolicy"] = "earliest"
	default:
		c.issue(true, d.field+".metadata.offsetResetPolicy", "%q: want latest or earliest", p)
		return nil
	}
	target, ok := d.quantity("lagThreshold", "10")
	if !ok {
		return nil
	}
	activ, ok := d.activation("activationLagThreshold")
	if !ok {
		return nil
	}
	if idle, ok := d.flag("allowIdleConsumers"); !ok {
		return nil
	} else if !idle {
		c.issue(false, d.field+".metadata.allowIdleConsumers", "false: KEDA caps the lag at partitions × lagThreshold so that replicas never exceed partitions; the provider reports the real lag: set maxReplicas to the topic's partition count")
	}
	for _, k := range []string{"excludePersistentLag", "limitToPartitionsWithLag", "ensureEvenDistributionOfPartitions"} {
		if on, ok := d.flag(k); !ok {
			return nil
		} else if on {
			c.issue(false, d.field+".metadata."+k, "not offered by the kafka provider: the lag of every partition counts")
		}
	}
	if d.get("partitionLimitation") != "" {
		c.issue(false, d.field+".metadata.partitionLimitation", "not offered by the kafka provider: the lag of every partition counts")
	}
	if zero, ok := d.flag("scaleToZeroOnInvalidOffset"); !ok {
		return nil
	} else if !zero && minReplicas == 0 && fields["offsetResetPolicy"] == nil {
		c.issue(false, d.field+".metadata.scaleToZeroOnInvalidOffset", "false: KEDA reports a lag of 1 for a partition without a committed offset (to start one consumer); the provider reports 0")
	}
	authRef := false
	var saslPassword func(*builtProvider) any
	switch s := strings.ToLower(d.get("sasl")); s {
	case "", "none":
	case "plaintext", "scram_sha256", "scram_sha512":
		mech := map[string]string{"plaintext": "PLAIN", "scram_sha256": "SCRAM-SHA-256", "scram_sha512": "SCRAM-SHA-512"}[s]
		conn["sasl"] = map[string]any{"mechanism": mech, "username": "REPLACE-WITH-USERNAME", "password": nil}
		saslPassword = c.placeholder(d.field+".metadata.sasl", "sasl password", "the SASL credentials (from the TriggerAuthentication) are not copied: set providers[].options.sasl.username")
		authRef = true
	default:
		c.issue(true, d.field+".metadata.sasl", "%q: the kafka provider supports PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512", s)
		return nil
	}
	switch tl := d.get("tls"); tl {
	case "", "disable":
	case "enable":
		conn["tls"] = map[string]any{}
		if t.AuthenticationRef != nil {
			c.issue(false, d.field+".metadata.tls", "the CA and client certificate (from the TriggerAuthentication) are not copied: set providers[].options.tls.caFile, certFile and keyFile")
		}
		authRef = true
	default:
		c.issue(true, d.field+".metadata.tls", "%q: want enable or disable", tl)
		return nil
	}
	if t.AuthenticationRef != nil && !authRef {
		c.issue(false, d.field+".authenticationRef", "TriggerAuthentication %q is not read: the provider connects without SASL or TLS", t.AuthenticationRef.Name)
		authRef = true
	}
	d.ignore("version", "unsafeSsl")
	return &external{typ: "kafka", conn: conn, target: target, activ: activ, authRef: authRef,
		entry: func(p *builtProvider, name string) any {
			if s, ok := p.Options["sasl"].(map[string]any); ok && s["password"] == nil {
				s["password"] = saslPassword(p)
			}
			return c.metricEntry(name, fields)
		}}
}

// postgresql: the trigger's query, its first column of its first row as
// KEDA reads it, named value.
func (c *soConverter) postgresql(d *meta, t *KEDATrigger) *external {
	conn := map[string]any{}
	if cs, env, ok := d.value("connection"); ok && cs != "" {
		parsed, err := parsePostgresConnection(cs)
		if err != nil {
			c.issue(true, d.field+".metadata.connectionFromEnv", "%v", err)
			return nil
		}
		conn = parsed
	} else if env != "" {
		c.issue(true, d.field+".metadata.connectionFromEnv", "%s is an environment variable of the workload's container: give its value (without the password) with --env %s=VALUE, or set host, port, userName and dbName", env, env)
		return nil
	} else {
		host, ok1 := d.required("host")
		user, ok2 := d.required("userName")
		db, ok3 := d.required("dbName")
		if !(ok1 && ok2 && ok3) {
			return nil
		}
		conn["host"], conn["user"], conn["database"] = host, user, db
		if p := d.get("port"); p != "" {
			n, err := strconv.Atoi(p)
			if err != nil {
				c.issue(true, d.field+".metadata.port", "%q is not a port", p)
				return nil
			}
			conn["port"] = n
		}
		if m := d.get("sslmode"); m != "" {
			conn["sslMode"] = m
		}
	}
	switch m, _ := conn["sslMode"].(string); m {
	case "", "disable", "prefer", "require", "verify-ca", "verify-full":
	case "allow":
		conn["sslMode"] = "prefer"
		c.issue(false, d.field+".metadata.sslmode", "allow (plain first) becomes prefer (TLS first): the provider has no allow")
	default:
		c.issue(true, d.field+".metadata.sslmode", "%q: want disable, allow, prefer, require, verify-ca or verify-full", m)
		return nil
	}
	var password func(*builtProvider) any
	switch {
	case d.has("password") || d.has("passwordFromEnv"):
		password = c.secret(d, "password", "password")
	case t.AuthenticationRef != nil:
		password = c.placeholder(d.field+".authenticationRef", "password", fmt.Sprintf("TriggerAuthentication %q is not read", t.AuthenticationRef.Name))
	}
	query, ok := d.required("query")
	if !ok {
		return nil
	}
	target, ok := d.quantity("targetQueryValue", "")
	if !ok {
		return nil
	}
	activ, ok := d.activation("activationTargetQueryValue")
	if !ok {
		return nil
	}
	q := strings.TrimSpace(query)
	q = strings.TrimSpace(strings.TrimSuffix(q, ";"))
	wrapped := "SELECT value FROM (" + q + ") AS keda_query(value) LIMIT 1"
	return &external{typ: "postgresql", conn: conn, target: target, activ: activ, authRef: true,
		entry: func(p *builtProvider, name string) any {
			if _, set := p.Options["password"]; !set && password != nil {
				p.Options["password"] = password(p)
			}
			return c.metricEntry(name, map[string]any{"query": wrapped})
		}}
}

// parsePostgresConnection reads host, port, user, database and sslmode
// from a libpq connection string (key=value or a postgres:// URL); a
// password in it is left out.
func parsePostgresConnection(s string) (map[string]any, error) {
	out := map[string]any{}
	set := func(k, v string) error {
		switch k {
		case "host":
			out["host"] = v
		case "port":
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("port %q is not a number", v)
			}
			out["port"] = n
		case "user":
			out["user"] = v
		case "dbname":
			out["database"] = v
		case "sslmode":
			out["sslMode"] = v
		}
		return nil
	}
	if strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://") {
		u, err := url.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("the connection URL does not parse")
		}
		if err := set("host", u.Hostname()); err != nil {
			return nil, err
		}
		if p := u.Port(); p != "" {
			if err := set("port", p); err != nil {
				return nil, err
			}
		}
		if u.User != nil {
			out["user"] = u.User.Username()
		}
		out["database"] = strings.TrimPrefix(u.Path, "/")
		if m := u.Query().Get("sslmode"); m != "" {
			out["sslMode"] = m
		}
	} else {
		for _, kv := range strings.Fields(s) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return nil, fmt.Errorf("%q is not key=value", kv)
			}
			if err := set(k, strings.Trim(v, "'")); err != nil {
				return nil, err
			}
		}
	}
	for _, k := range []string{"host", "user", "database"} {
		if out[k] == nil || out[k] == "" {
			return nil, fmt.Errorf("the connection string has no %s", k)
		}
	}
	return out, nil
}

// natsJetStream: a consumer's pending + ack-pending (the provider's
// backlog, KEDA's lag), read through the client port of the server whose
// monitoring endpoint KEDA reads.
func (c *soConverter) natsJetStream(d *meta, t *KEDATrigger) *external {
	endpoint, ok := d.required("natsServerMonitoringEndpoint")
	if !ok {
		return nil
	}
	host, _, err := net.SplitHostPort(endpoint)
	if err != nil {
		host = endpoint
	}
	server := "nats://" + net.JoinHostPort(host, "4222")
	c.issue(false, d.field+".metadata.natsServerMonitoringEndpoint", "the provider reads the JetStream API through the client port, not the monitoring endpoint: %s is assumed (NATS' default port); correct providers[].options.servers if it differs", server)
	if acc := d.get("account"); acc != "" && acc != "$G" {
		c.issue(false, d.field+".metadata.account", "%q: the account is the one of the provider's credentials (user, token or creds file), which convert cannot set", acc)
	}
	d.ignore("accountID", "useHttps")
	stream, ok1 := d.required("stream")
	consumer, ok2 := d.required("consumer")
	if !ok1 || !ok2 {
		return nil
	}
	target, ok := d.quantity("lagThreshold", "10")
	if !ok {
		return nil
	}
	activ, ok := d.activation("activationLagThreshold")
	if !ok {
		return nil
	}
	if t.AuthenticationRef != nil {
		c.issue(false, d.field+".authenticationRef", "TriggerAuthentication %q is not read: set the provider's user/password, token or credsFile", t.AuthenticationRef.Name)
	}
	return &external{typ: "nats", conn: map[string]any{"servers": []any{server}}, target: target, activ: activ, authRef: true,
		entry: func(_ *builtProvider, name string) any {
			return c.metricEntry(name, map[string]any{"stream": stream, "consumer": consumer, "value": "backlog"})
		}}
}
