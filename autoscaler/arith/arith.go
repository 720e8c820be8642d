// Package arith holds the integer conversions in which the autoscaler
// deliberately differs from kube-controller-manager (docs/scenarios.md,
// "Deviations from upstream"): upstream's int32(…) of an out-of-range float
// wraps (to MinInt32 on amd64), and so does Quantity.MilliValue() beyond
// ±9.2e15; the default mode saturates.
package arith

import (
	"math"
	"math/big"

	"k8s.io/apimachinery/pkg/api/resource"
)

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

// MilliValue is q in milli-units, rounded away from zero as
// Quantity.MilliValue():
// saturating at the int64 bounds, or with upstream set, as upstream's
// q.MilliValue(), which beyond them (and near them: -9223372036854775807m
// reads as 1) wraps or gives 0 depending on how the Quantity is held (an
// External value of 9.3e15 has read as -9146744073709551616m: a load taken
// for less than none).
func MilliValue(q resource.Quantity, upstream bool) int64 {
	if upstream || (q.Cmp(safeMax) < 0 && q.Cmp(safeMin) > 0) {
		// well within the range MilliValue is exact
		return q.MilliValue()
	}
	d := q.AsDec()
	// q = unscaled × 10^-scale; milli = unscaled × 10^(3-scale), rounded away from zero
	m := new(big.Int).Set(d.UnscaledBig())
	if e := 3 - int64(d.Scale()); e >= 0 {
		m.Mul(m, new(big.Int).Exp(big.NewInt(10), big.NewInt(e), nil))
	} else {
		div := new(big.Int).Exp(big.NewInt(10), big.NewInt(-e), nil)
		var r big.Int
		m.QuoRem(m, div, &r) // truncated toward zero, then away as MilliValue
		if r.Sign() != 0 {
			m.Add(m, big.NewInt(int64(r.Sign())))
		}
	}
	switch {
	case m.IsInt64():
		return m.Int64()
	case m.Sign() > 0:
		return math.MaxInt64
	}
	return math.MinInt64
}

// Within ±2^62 milli-units Quantity.MilliValue() neither wraps nor
// overflows inside.
var (
	safeMax = *resource.NewMilliQuantity(1<<62, resource.DecimalSI)
	safeMin = *resource.NewMilliQuantity(-1<<62, resource.DecimalSI)
)
