package convert

// triggerTypes are the KEDA trigger types convert reads, in the order an
// unconvertible trigger's issue lists them. A new one is a trigger_NAME.go
// file and a line here.
var triggerTypes = []triggerType{
	{name: "prometheus", external: (*soConverter).prometheus},
	{name: "rabbitmq", external: (*soConverter).rabbitmq},
	{name: "redis", external: (*soConverter).redis},
	{name: "redis-streams", external: (*soConverter).redisStreams},
	{name: "kafka", external: (*soConverter).kafka},
	{name: "postgresql", external: (*soConverter).postgresql},
	{name: "nats-jetstream", external: (*soConverter).natsJetStream},
	{name: "cpu", resource: (*soConverter).resourceTrigger},
	{name: "memory", resource: (*soConverter).resourceTrigger},
	{name: "cron", schedule: (*soConverter).cronTrigger},
}
