package convert

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// rabbitmqMeta is what a rabbitmq trigger's metadata says.
type rabbitmqMeta struct {
	Host      string    `keda:"host,required,env"`
	Protocol  string    `keda:"protocol"`
	VHostName string    `keda:"vhostName"`
	Username  string    `keda:"username,env"`
	Password  secretRef `keda:"password"`
	UnsafeSSL bool      `keda:"unsafeSsl"`
	Mode      string    `keda:"mode"`
	// the target is rabbitmqTarget's
	ActivationValue *resource.Quantity `keda:"activationValue"`
	QueueName       string             `keda:"queueName,required,env"`
	UseRegex        bool               `keda:"useRegex"`
}

// rabbitmqQueueLength is what mode QueueLength reads too.
type rabbitmqQueueLength struct {
	// ExcludeUnacknowledged counts ready messages only, over HTTP.
	ExcludeUnacknowledged bool `keda:"excludeUnacknowledged"`
}

// rabbitmqRegex is what useRegex reads too.
type rabbitmqRegex struct {
	Operation string `keda:"operation"`
}

// rabbitmqTarget is the target: value, or queueLength without a mode (the
// form before mode).
type rabbitmqTarget struct {
	Value *resource.Quantity `keda:"value,threshold"`
}
type rabbitmqLegacyTarget struct {
	QueueLength *resource.Quantity `keda:"queueLength,threshold"`
}

// rabbitmq: one rabbitmq provider per broker and user. QueueLength counts
// what KEDA counts: ready + unacknowledged over HTTP (ready only with
// excludeUnacknowledged), ready over AMQP.
func (c *soConverter) rabbitmq(d *meta, t *KEDATrigger) *external {
	var m rabbitmqMeta
	ok := d.decode(&m)
	var target *resource.Quantity
	if _, legacy := d.m["queueLength"]; legacy && m.Mode == "" {
		var tm rabbitmqLegacyTarget
		ok = d.decode(&tm) && ok
		m.Mode, target = "QueueLength", tm.QueueLength
	} else {
		var tm rabbitmqTarget
		ok = d.decode(&tm) && ok
		target = tm.Value
	}
	d.ignore("pageSize", "timeout")
	if !ok {
		return nil
	}
	u, err := url.Parse(m.Host)
	if err != nil || u.Host == "" {
		d.fail("host", "not a URL (amqp://, amqps://, http:// or https://)")
		return nil
	}
	switch p := m.Protocol; {
	case p == "" || p == "auto":
	case p == "amqp" && (u.Scheme == "amqp" || u.Scheme == "amqps"), p == "http" && (u.Scheme == "http" || u.Scheme == "https"):
	default:
		d.fail("protocol", "%q does not match the host's scheme %q", p, u.Scheme)
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
		d.fail("host", "scheme %q: want amqp, amqps, http or https", u.Scheme)
		return nil
	}
	if m.VHostName != "" {
		vhost = m.VHostName
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
	case m.Username != "":
		user = m.Username
	case t.AuthenticationRef != nil && d.ta == nil:
		user = "REPLACE-WITH-USERNAME"
		password = c.placeholder(d.field+".authenticationRef", "password", fmt.Sprintf("TriggerAuthentication %q is not read: set providers[].options.username", t.AuthenticationRef.Name))
	default:
		user = "guest"
		password = c.placeholder(d.field+".metadata.host", "password", "no user in the URL: RabbitMQ's default user guest is assumed, as KEDA does")
	}
	passwordID := ""
	if m.Password.present || password == nil {
		password = c.secret(d, "password", "password", m.Password)
		passwordID = c.secretID(m.Password)
	}
	conn["username"] = user
	if m.UnsafeSSL && (u.Scheme == "https" || u.Scheme == "amqps") {
		conn["tls"] = map[string]any{"insecureSkipVerify": true}
	}

	measure := ""
	switch m.Mode {
	case "QueueLength":
		var ql rabbitmqQueueLength
		switch {
		case !d.decode(&ql):
			return nil
		case amqp:
			measure = "ready" // a passive declare reports ready messages
		case ql.ExcludeUnacknowledged:
			measure = "ready"
		default:
			measure = "total"
		}
	case "MessageRate":
		measure = "publishRate"
	case "DeliverGetRate":
		measure = "deliverRate"
	case "":
		d.fail("mode", "required: QueueLength or MessageRate")
		return nil
	default:
		d.fail("mode", "%q: no equivalent measure in the rabbitmq provider (convertible: QueueLength, MessageRate, DeliverGetRate)", m.Mode)
		return nil
	}
	if amqp && measure != "ready" {
		d.fail("mode", "%s needs the management API (an http host)", m.Mode)
		return nil
	}
	fields := map[string]any{"vhost": vhost, "measure": measure}
	if m.UseRegex {
		if amqp {
			d.fail("useRegex", "needs the management API (an http host)")
			return nil
		}
		// KEDA's regex is unanchored; the provider anchors its own
		fields["queueRegex"] = ".*(?:" + m.QueueName + ").*"
		if _, err := regexp.Compile(m.QueueName); err != nil {
			d.fail("queueName", "not a regular expression: %v", err)
			return nil
		}
		var re rabbitmqRegex
		if !d.decode(&re) {
			return nil
		}
		switch op := re.Operation; op {
		case "", "sum":
		default:
			d.fail("operation", "%q: the matching queues' values are summed (one series each), not %s", op, op)
			return nil
		}
	} else {
		fields["queue"] = m.QueueName
	}
	if amqp {
		fields["source"] = "amqp"
	}
	return &external{provider: "rabbitmq", conn: conn, target: target, activ: m.ActivationValue, authRef: true,
		entry:   c.metricEntry(fields),
		secrets: []secretOption{{path: []string{"password"}, value: password, id: passwordID}}}
}
