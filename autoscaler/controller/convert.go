package controller

import (
	"fmt"

	"github.com/metricscale/metricscale/autoscaler/api/v1alpha1"
	"github.com/metricscale/metricscale/autoscaler/decision"
	"github.com/metricscale/metricscale/autoscaler/metrictarget"
)

// maStatus is a MetricAutoscaler's status after a reconcile.
func maStatus(ma *v1alpha1.MetricAutoscaler, res decision.Result, hist *v1alpha1.History) v1alpha1.MetricAutoscalerStatus {
	gen := ma.Generation
	s := v1alpha1.MetricAutoscalerStatus{
		ObservedGeneration: &gen,
		LastScaleTime:      res.Status.LastScaleTime,
		CurrentReplicas:    res.Status.CurrentReplicas,
		DesiredReplicas:    res.Status.DesiredReplicas,
		CurrentMetrics:     res.Status.CurrentMetrics,
		Conditions:         res.Status.Conditions,
		Reference:          fmt.Sprintf("%s/%s", ma.Spec.ScaleTargetRef.Kind, ma.Spec.ScaleTargetRef.Name),
		Targets:            metrictarget.Targets(ma.Spec.Metrics, res.Status.CurrentMetrics),
		History:            hist,
		Fallback:           res.Fallback,
		ScaleToZero:        res.ScaleToZero,
	}
	if res.Metrics != nil {
		s.MetricProposals = make([]int32, len(res.Metrics))
		for i, m := range res.Metrics {
			s.MetricProposals[i] = m.Proposal
		}
	}
	return s
}
