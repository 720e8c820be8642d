package providers

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestCheckValue(t *testing.T) {
	t.Parallel()
	huge := 1e308
	tests := []struct {
		name   string
		v      float64
		policy ValuePolicy
		refuse string // part of the message; "" when served
		milli  int64  // the served milli-value
	}{
		{name: "count", v: 12.5, milli: 12500},
		{name: "zero", v: 0, milli: 0},
		{name: "negative count", v: -5, refuse: "it is negative"},
		{name: "negative, allowed", v: -5, policy: ValuePolicy{AllowNegative: true}, milli: -5000},
		{name: "NaN", v: math.NaN(), refuse: "not finite"},
		{name: "NaN, negatives allowed", v: math.NaN(), policy: ValuePolicy{AllowNegative: true}, refuse: "not finite"},
		{name: "sum that overflowed float64", v: huge + huge, refuse: "answered +Inf"},
		{name: "-Inf", v: math.Inf(-1), policy: ValuePolicy{AllowNegative: true}, refuse: "not finite"},
		// finite beyond the milli range: saturated, as a very large load
		{name: "beyond the milli range", v: 1e19, milli: math.MaxInt64},
		{name: "below the milli range, allowed", v: -1e19, policy: ValuePolicy{AllowNegative: true}, milli: -math.MaxInt64},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q, err := ServedQuantity("rabbit", "depth", `queue="jobs"`, tc.v, tc.policy)
			if tc.refuse == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if got := q.MilliValue(); got != tc.milli {
					t.Errorf("milli-value %d, want %d", got, tc.milli)
				}
				return
			}
			if err == nil {
				t.Fatalf("served %s, want refused", q.String())
			}
			var pe *Error
			if !errors.As(err, &pe) || pe.Code() != 503 || pe.Reason != ReasonBadValue || ReasonOf(err) != ReasonBadValue {
				t.Fatalf("error %#v, want a 503 with reason %s", err, ReasonBadValue)
			}
			if ToAPIError("rabbit", err) != pe {
				t.Error("ToAPIError does not pass the error through")
			}
			for _, want := range []string{`"rabbit"`, "depth", `queue="jobs"`, tc.refuse} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%q does not name %q", err, want)
				}
			}
		})
	}
}
