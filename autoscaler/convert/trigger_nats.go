package convert

import (
	"net"

	"k8s.io/apimachinery/pkg/api/resource"
)

// natsJetStreamMeta is what a nats-jetstream trigger's metadata says.
type natsJetStreamMeta struct {
	MonitoringEndpoint     string             `keda:"natsServerMonitoringEndpoint,required,env"`
	Account                string             `keda:"account"`
	Stream                 string             `keda:"stream,required,env"`
	Consumer               string             `keda:"consumer,required,env"`
	LagThreshold           *resource.Quantity `keda:"lagThreshold,threshold,default=10"`
	ActivationLagThreshold *resource.Quantity `keda:"activationLagThreshold"`
}

// natsJetStream: a consumer's pending + ack-pending (the provider's
// backlog, KEDA's lag), read through the client port of the server whose
// monitoring endpoint KEDA reads.
func (c *soConverter) natsJetStream(d *meta, t *KEDATrigger) *external {
	var m natsJetStreamMeta
	if !d.decode(&m) {
		return nil
	}
	d.ignore("accountID", "useHttps")
	host, _, err := net.SplitHostPort(m.MonitoringEndpoint)
	if err != nil {
		host = m.MonitoringEndpoint
	}
	server := "nats://" + net.JoinHostPort(host, "4222")
	d.warn("natsServerMonitoringEndpoint", "the provider reads the JetStream API through the client port, not the monitoring endpoint: %s is assumed (NATS' default port); correct providers[].options.servers if it differs", server)
	if acc := m.Account; acc != "" && acc != "$G" {
		d.warn("account", "%q: the account is the one of the provider's credentials (user, token or creds file), which convert cannot set", acc)
	}
	if t.AuthenticationRef != nil && d.ta == nil {
		c.issue(false, d.field+".authenticationRef", "TriggerAuthentication %q is not read: set the provider's user/password, token or credsFile", t.AuthenticationRef.Name)
	}
	return &external{provider: "nats", conn: map[string]any{"servers": []any{server}}, target: m.LagThreshold, activ: m.ActivationLagThreshold, authRef: true,
		entry: c.metricEntry(map[string]any{"stream": m.Stream, "consumer": m.Consumer, "value": "backlog"})}
}
