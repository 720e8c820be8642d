// Package autoscaler holds the autoscaler: its decision core and the
// programs around it.
//
//   - defaults: the autoscaling/v2 API defaulting the API server applies.
//   - metricsource: the seam through which the core reads the metrics APIs.
//   - replicas: one metric's replica proposal (pod grouping, tolerance).
//   - behavior: stabilization windows, scaling policies and their history.
//   - decision: one reconcile, as a pure function of its inputs.
//   - scenario: the replay format and the simulator built on decision.
package autoscaler
