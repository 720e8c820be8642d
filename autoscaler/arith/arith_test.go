package arith

import (
	"math"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

func TestToInt32(t *testing.T) {
	t.Parallel()
	tests := []struct {
		f    float64
		want int32
	}{
		{3, 3}, {-3, -3}, {1e12, math.MaxInt32}, {-1e12, math.MinInt32}, {math.MaxInt32, math.MaxInt32},
	}
	for _, tc := range tests {
		if got := ToInt32(tc.f, false); got != tc.want {
			t.Errorf("ToInt32(%g) = %d, want %d", tc.f, got, tc.want)
		}
		if tc.f == math.Trunc(tc.f) && math.Abs(tc.f) < math.MaxInt32 && ToInt32(tc.f, true) != tc.want {
			t.Errorf("upstream ToInt32(%g) differs in range", tc.f)
		}
	}
}

func TestMilliValue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		q    string
		want int64
		// beyond: out of the milli range, where upstream's MilliValue
		// gives something else (a wrapped or a zero value)
		beyond bool
	}{
		{"1", 1000, false},
		{"-4", -4000, false},
		{"1.5m", 2, false}, // rounded away from zero, as MilliValue
		{"-1.5m", -2, false},
		{"4611686018427387.9041", 4611686018427387905, false}, // the exact path
		{"-4611686018427387.9041", -4611686018427387905, false},
		{"9223372036854775807m", math.MaxInt64, false},
		{"-9223372036854775807m", -math.MaxInt64, false},
		{"-9223372036854775808m", math.MinInt64, false},
		{"9.3e15", math.MaxInt64, true},
		{"9300000000000000", math.MaxInt64, true},
		{"9223372036854775808m", math.MaxInt64, true},
		{"-9.3e15", math.MinInt64, true},
		{"1e30", math.MaxInt64, true},
	}
	for _, tc := range tests {
		q := resource.MustParse(tc.q)
		if got := MilliValue(q, false); got != tc.want {
			t.Errorf("MilliValue(%s) = %d, want %d", tc.q, got, tc.want)
		}
		up := q.MilliValue()
		if !tc.beyond && math.Abs(float64(tc.want)) < 1<<62 && up != tc.want {
			t.Errorf("Quantity.MilliValue(%s) = %d, want %d: in range both agree", tc.q, up, tc.want)
		}
		if got := MilliValue(q, true); got != up {
			t.Errorf("upstream MilliValue(%s) = %d, want Quantity.MilliValue() %d", tc.q, got, up)
		}
		if tc.beyond && up == tc.want {
			t.Errorf("Quantity.MilliValue(%s) = %d saturates: the case shows nothing", tc.q, up)
		}
	}
}
