package validationtest

// InvalidFallback is a spec.fallback that the MetricAutoscaler CRD and the
// simulator's validation both reject, at Field.
type InvalidFallback struct {
	Name     string
	Fallback map[string]any
	Field    string
}

// InvalidFallbacks are the invalid spec.fallback values both must reject.
func InvalidFallbacks() []InvalidFallback {
	return []InvalidFallback{
		{"zero failureThreshold", map[string]any{"failureThreshold": 0, "replicas": 3}, "spec.fallback.failureThreshold"},
		{"missing failureThreshold", map[string]any{"replicas": 3}, "spec.fallback.failureThreshold"},
		{"negative replicas", map[string]any{"failureThreshold": 3, "replicas": -1}, "spec.fallback.replicas"},
		{"unknown behavior", map[string]any{"failureThreshold": 3, "replicas": 3, "behavior": "max"}, "spec.fallback.behavior"},
	}
}
