// Package convert turns other autoscalers into MetricAutoscalers:
//
//   - HorizontalPodAutoscalers (autoscaling/v1, v2, v2beta2 and v2beta1),
//     whose spec a MetricAutoscaler's is field for field. Handover takes a
//     live HPA's place without a replica jump: the MetricAutoscaler is
//     created paused with the HPA's status and a history seeded from it
//     (SeedHistory), the HPA is deleted, then the MetricAutoscaler is
//     unpaused.
//   - KEDA ScaledObjects (keda.sh/v1alpha1) whose triggers this project's
//     providers can read (prometheus, rabbitmq, redis, redis-streams, kafka,
//     postgresql, nats-jetstream, cpu, memory), and cron triggers, which
//     become windows of spec.schedules: a MetricAutoscaler on External
//     metrics plus the adapter configuration (providers and routes) that
//     serves them, and an Issue for everything that did not convert
//     exactly. The TriggerAuthentications, Secrets (key names only) and
//     workloads' env of the input are read for the triggers (auth.go). Each
//     trigger type is one trigger_<name>.go file, listed in triggertable.go,
//     that declares the metadata it reads as a struct with `keda` tags
//     (metadata.go decodes it strictly, issues naming the trigger and key).
//
// Reading files, reading the cluster and writing YAML are here too;
// cmd/autoscaler only parses flags.
package convert
