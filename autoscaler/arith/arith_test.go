package arith

import (
	"math"
	"testing"
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
