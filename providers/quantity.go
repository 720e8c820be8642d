package providers

import (
	"math"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Quantity converts a sample value to a resource.Quantity, exactly to the
// milli-unit, which is the precision the HPA works in. A value whose
// milli-value does not fit an int64 (a sum of several series of one object;
// single values beyond the range are refused at push) saturates at
// ±math.MaxInt64 milli-units instead of wrapping in Quantity.MilliValue().
func Quantity(v float64) resource.Quantity {
	m := math.Round(v * 1000)
	switch {
	case math.IsNaN(m):
		// unreachable: the store refuses NaN and sums of finite values
		// saturate, never +Inf + -Inf
		return *resource.NewMilliQuantity(0, resource.DecimalSI)
	case m >= maxMilli:
		return *resource.NewMilliQuantity(math.MaxInt64, resource.DecimalSI)
	case m <= -maxMilli:
		return *resource.NewMilliQuantity(-math.MaxInt64, resource.DecimalSI)
	}
	return *resource.NewMilliQuantity(int64(m), resource.DecimalSI)
}

// maxMilli is 2^63, the first milli-value an int64 cannot hold.
const maxMilli = float64(1 << 63)
