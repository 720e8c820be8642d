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
//     advanced.scalingModifiers (modifiers.go) becomes each trigger's
//     metric on the formula's target when the formula is one trigger or
//     max(...) of every External trigger, else spec.formula
//     "composite-metric" with the expr-lang formula translated to CEL
//     (formula_expr.go; a formula outside the translated subset is not
//     converted, naming the construct). As KEDA 2.21 reads every External
//     trigger into its composite and keeps cpu and memory triggers in its
//     HPA, every External trigger is an input, those the formula does not
//     name too (one failing fails the formula, as in KEDA), and cpu and
//     memory triggers stay metrics of their own; a cron trigger outside
//     the formula has no effect in KEDA and is dropped with an issue.
//     activationTarget has no equivalent (a MetricAutoscaler activates per
//     metric): an issue says so when the target scales to zero.
//
// Reading files, reading the cluster and writing YAML are here too;
// cmd/autoscaler only parses flags.
package convert
