package providers

import (
	"fmt"
	"math"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Quantity converts a sample value to a resource.Quantity, exactly to the
// milli-unit, which is the precision the HPA works in. A value whose
// milli-value does not fit an int64 (a sum of several series of one object;
// single values beyond the range are refused at push) saturates at
// ±math.MaxInt64 milli-units instead of wrapping in Quantity.MilliValue().
// A value a provider serves goes through CheckValue first (ServedQuantity
// does both): Quantity itself never refuses.
func Quantity(v float64) resource.Quantity {
	m := math.Round(v * 1000)
	switch {
	case math.IsNaN(m):
		// unreachable through ServedQuantity, which refuses NaN
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

// ValuePolicy is what a metric's readings may be, beyond finite.
type ValuePolicy struct {
	// AllowNegative serves negative values: for metrics that are
	// legitimately signed (a Prometheus expression, an SQL query). Without
	// it a negative value is refused: a count, a lag or a length below zero
	// is a backend bug or a wrapped sum, and served it would read as "no
	// load" and scale the workload down.
	AllowNegative bool
}

// ReasonBadValue: 503, the backend answered a value no metric may have
// (not finite, or negative where the metric is a count).
const ReasonBadValue Reason = "bad_value"

// CheckValue is the check every provider's value conversion goes through:
// NaN, ±Inf (a sum that overflowed float64: 1e308+1e308) and, unless
// policy allows them, negative values are refused with a 503 naming the
// provider, the metric and the series. Finite values beyond the milli range
// pass: Quantity saturates them, and a saturated reading still says "very
// large", which a wrapped one does not.
func CheckValue(providerName, metric, series string, v float64, policy ValuePolicy) error {
	var why string
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		why = "it is not finite"
	case v < 0 && !policy.AllowNegative:
		why = "it is negative, which this metric cannot be (set allowNegative on a metric that is legitimately signed, where the provider offers it)"
	default:
		return nil
	}
	msg := fmt.Sprintf("metrics provider %q answered %v for metric %s series %s: refused, %s", providerName, v, metric, series, why)
	return newError(ReasonBadValue, apierrors.NewServiceUnavailable(msg), nil)
}

// ServedQuantity is CheckValue then Quantity: the conversion of a value a
// provider serves.
func ServedQuantity(providerName, metric, series string, v float64, policy ValuePolicy) (resource.Quantity, error) {
	if err := CheckValue(providerName, metric, series, v, policy); err != nil {
		return resource.Quantity{}, err
	}
	return Quantity(v), nil
}
