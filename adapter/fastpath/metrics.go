package fastpath

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// requests counts external metric list requests by who answered them:
// "fast" (the fast path) or "chain" (handed to the generic handler chain).
var requests = metrics.NewCounterVec(&metrics.CounterOpts{
	Namespace: "metricscale", Subsystem: "adapter", Name: "fast_path_requests_total",
	Help:           "GET requests for external metric lists, by who served them: fast (the fast path) or chain (the generic API server handler chain).",
	StabilityLevel: metrics.ALPHA,
}, []string{"served_by"})

var registerOnce sync.Once

func registerMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(requests) })
}
