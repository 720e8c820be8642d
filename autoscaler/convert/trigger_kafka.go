package convert

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// kafkaMeta is what a kafka trigger's metadata says.
type kafkaMeta struct {
	BootstrapServers       string             `keda:"bootstrapServers,required,env"`
	ConsumerGroup          string             `keda:"consumerGroup,required,env"`
	Topic                  string             `keda:"topic,env"`
	OffsetResetPolicy      string             `keda:"offsetResetPolicy"`
	LagThreshold           *resource.Quantity `keda:"lagThreshold,threshold,default=10"`
	ActivationLagThreshold *resource.Quantity `keda:"activationLagThreshold"`
	AllowIdleConsumers     bool               `keda:"allowIdleConsumers"`
	// what KEDA leaves out of the lag, which the provider does not
	ExcludePersistentLag               bool   `keda:"excludePersistentLag"`
	LimitToPartitionsWithLag           bool   `keda:"limitToPartitionsWithLag"`
	EnsureEvenDistributionOfPartitions bool   `keda:"ensureEvenDistributionOfPartitions"`
	PartitionLimitation                string `keda:"partitionLimitation"`
	ScaleToZeroOnInvalidOffset         bool   `keda:"scaleToZeroOnInvalidOffset"`
	SASL                               string `keda:"sasl"`
	TLS                                string `keda:"tls"`
}

// kafka: a consumer group's lag on its topic (every topic when none is
// named), one kafka provider per cluster and credentials.
func (c *soConverter) kafka(d *meta, t *KEDATrigger) *external {
	var m kafkaMeta
	if !d.decode(&m) {
		return nil
	}
	d.ignore("version", "unsafeSsl")
	conn := map[string]any{"brokers": commaList(m.BootstrapServers)}
	fields := map[string]any{"group": m.ConsumerGroup}
	if m.Topic != "" {
		fields["topics"] = commaList(m.Topic)
	} else {
		fields["topicRegex"] = ".*"
		d.warn("topic", "none: the lag is read on every topic (topicRegex .*), where KEDA reads the topics the group committed offsets to")
	}
	switch p := m.OffsetResetPolicy; p {
	case "", "latest":
	case "earliest":
		fields["offsetResetPolicy"] = "earliest"
	default:
		d.fail("offsetResetPolicy", "%q: want latest or earliest", p)
		return nil
	}
	if !m.AllowIdleConsumers {
		d.warn("allowIdleConsumers", "false: KEDA caps the lag at partitions × lagThreshold so that replicas never exceed partitions; the provider reports the real lag: set maxReplicas to the topic's partition count")
	}
	for _, o := range []struct {
		key string
		on  bool
	}{
		{"excludePersistentLag", m.ExcludePersistentLag},
		{"limitToPartitionsWithLag", m.LimitToPartitionsWithLag},
		{"ensureEvenDistributionOfPartitions", m.EnsureEvenDistributionOfPartitions},
		{"partitionLimitation", m.PartitionLimitation != ""},
	} {
		if o.on {
			d.warn(o.key, "not offered by the kafka provider: the lag of every partition counts")
		}
	}
	if !m.ScaleToZeroOnInvalidOffset && c.minReplicas == 0 && fields["offsetResetPolicy"] == nil {
		d.warn("scaleToZeroOnInvalidOffset", "false: KEDA reports a lag of 1 for a partition without a committed offset (to start one consumer); the provider reports 0")
	}
	authRef := false
	sasl := secretOption{path: []string{"sasl", "password"}}
	switch s := strings.ToLower(m.SASL); s {
	case "", "none":
	case "plaintext", "scram_sha256", "scram_sha512":
		mech := map[string]string{"plaintext": "PLAIN", "scram_sha256": "SCRAM-SHA-256", "scram_sha512": "SCRAM-SHA-512"}[s]
		conn["sasl"] = map[string]any{"mechanism": mech, "username": "REPLACE-WITH-USERNAME", "password": nil}
		sasl.value = c.placeholder(d.field+".metadata.sasl", "sasl password", "the SASL credentials (from the TriggerAuthentication) are not copied: set providers[].options.sasl.username")
		d.markAuthRead("username", "password") // said here once
		authRef = true
	default:
		d.fail("sasl", "%q: the kafka provider supports PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512", s)
		return nil
	}
	switch tl := m.TLS; tl {
	case "", "disable":
	case "enable":
		conn["tls"] = map[string]any{}
		if t.AuthenticationRef != nil {
			d.warn("tls", "the CA and client certificate (from the TriggerAuthentication) are not copied: set providers[].options.tls.caFile, certFile and keyFile")
			d.markAuthRead("ca", "cert", "key", "keyPassword") // said here once
		}
		authRef = true
	default:
		d.fail("tls", "%q: want enable or disable", tl)
		return nil
	}
	if t.AuthenticationRef != nil && d.ta == nil && !authRef {
		c.issue(false, d.field+".authenticationRef", "TriggerAuthentication %q is not read: the provider connects without SASL or TLS", t.AuthenticationRef.Name)
		authRef = true
	}
	return &external{provider: "kafka", conn: conn, target: m.LagThreshold, activ: m.ActivationLagThreshold, authRef: authRef,
		entry: c.metricEntry(fields), secrets: []secretOption{sasl}}
}
