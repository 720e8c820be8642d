// Package arith holds the integer conversions in which the autoscaler
// deliberately differs from kube-controller-manager (docs/scenarios.md,
// "Deviations from upstream"): upstream's int32(…) of an out-of-range float
// wraps (to MinInt32 on amd64); the default mode saturates.
package arith

import "math"

// ToInt32 converts a whole-valued float: saturating, or with upstream set,
// as upstream's int32(…).
func ToInt32(f float64, upstream bool) int32 {
	if !upstream {
		switch {
		case f >= math.MaxInt32:
			return math.MaxInt32
		case f <= math.MinInt32:
			return math.MinInt32
		}
	}
	return int32(f)
}
