package convert

import (
	"k8s.io/apimachinery/pkg/api/resource"
)

// redisStreamsMeta is what a redis-streams trigger's metadata says
// besides the server (redisServer). KEDA reads one of three counts: with a
// consumerGroup, its lag when lagCount is set, else its pending entries;
// without one, the stream's length.
type redisStreamsMeta struct {
	Stream        string `keda:"stream,required,env"`
	ConsumerGroup string `keda:"consumerGroup,env"`
}

type redisStreamsPending struct {
	PendingEntriesCount *resource.Quantity `keda:"pendingEntriesCount,threshold,default=5"`
	// activation: KEDA is active above 0 pending entries
}

type redisStreamsLag struct {
	LagCount           *resource.Quantity `keda:"lagCount,threshold,default=5"`
	ActivationLagCount *resource.Quantity `keda:"activationLagCount"`
}

type redisStreamsLength struct {
	StreamLength           *resource.Quantity `keda:"streamLength,threshold,default=5"`
	ActivationStreamLength *resource.Quantity `keda:"activationStreamLength"`
}

// redisStreams: the redis provider's streamPending, streamLag or
// streamLength of the stream (and group), the count KEDA reads; one redis
// provider per server, user and database, shared with redis triggers.
func (c *soConverter) redisStreams(d *meta, t *KEDATrigger) *external {
	var m redisStreamsMeta
	if !d.decode(&m) {
		return nil
	}
	conn, password, ok := c.redisConn(d, t)
	if !ok {
		return nil
	}
	fields := map[string]any{"key": m.Stream}
	var target, activ *resource.Quantity
	_, hasLag := d.m["lagCount"]
	switch {
	case m.ConsumerGroup != "" && hasLag:
		var l redisStreamsLag
		if !d.decode(&l) {
			return nil
		}
		fields["type"], fields["group"] = "streamLag", m.ConsumerGroup
		target, activ = l.LagCount, l.ActivationLagCount
		d.ignore("pendingEntriesCount", "streamLength")
	case m.ConsumerGroup != "":
		var p redisStreamsPending
		if !d.decode(&p) {
			return nil
		}
		fields["type"], fields["group"] = "streamPending", m.ConsumerGroup
		target = p.PendingEntriesCount
		d.ignore("streamLength", "activationLagCount")
	default:
		var l redisStreamsLength
		if !d.decode(&l) {
			return nil
		}
		fields["type"] = "streamLength"
		target, activ = l.StreamLength, l.ActivationStreamLength
		d.ignore("pendingEntriesCount")
	}
	return &external{provider: "redis", conn: conn, target: target, activ: activ, authRef: true,
		entry:   c.metricEntry(fields),
		secrets: []secretOption{password}}
}
