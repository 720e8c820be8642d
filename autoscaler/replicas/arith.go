package replicas

import (
	"math"
	"math/big"
	"math/bits"

	"github.com/metricscale/metricscale/autoscaler/arith"
)

// The arithmetic where this package deviates from upstream (see the
// agreement rule of docs/scenarios.md): kube-controller-manager converts
// float proposals with int32(…) and sums int64 values without checks, so a
// large value wraps (int32 of an out-of-range float is MinInt32 on amd64);
// the default mode saturates instead and keeps negatives as they are.
// Calculator.UpstreamArithmetic selects upstream's expressions, which give
// identical results whenever nothing overflows.

// count converts a whole-valued float proposal to int32.
func (c *Calculator) count(f float64) int32 { return arith.ToInt32(f, c.UpstreamArithmetic) }

// ceil64 converts a float average to int64, rounding up.
func (c *Calculator) ceil64(f float64) int64 {
	f = math.Ceil(f)
	if !c.UpstreamArithmetic {
		switch {
		case f >= math.MaxInt64: // float64(MaxInt64) is 2^63
			return math.MaxInt64
		case f <= math.MinInt64:
			return math.MinInt64
		}
	}
	return int64(f)
}

// sum is an exact 128-bit two's complement accumulator of int64 values:
// its low 64 bits are upstream's wrapping int64 sum.
type sum struct{ hi, lo uint64 }

func (s *sum) add(v int64) {
	var carry uint64
	s.lo, carry = bits.Add64(s.lo, uint64(v), 0)
	s.hi += uint64(v>>63) + carry
}

func (s *sum) sub(v int64) {
	var borrow uint64
	s.lo, borrow = bits.Sub64(s.lo, uint64(v), 0)
	s.hi -= uint64(v>>63) + borrow
}

// value is the sum wrapped to int64 (upstream) or saturated.
func (s sum) value(upstream bool) int64 {
	switch {
	case upstream:
		return int64(s.lo)
	case int64(s.hi) == int64(s.lo)>>63: // fits: hi is lo's sign extension
		return int64(s.lo)
	case int64(s.hi) < 0:
		return math.MinInt64
	}
	return math.MaxInt64
}

// mulDiv is a*b/c (c > 0) truncated toward zero as Go's int64 division,
// wrapping the product (upstream) or exact and saturated.
func (c *Calculator) mulDiv(a, b, d int64) int64 {
	if c.UpstreamArithmetic {
		return a * b / d
	}
	if b == 0 {
		return 0
	}
	if p := a * b; p/b == a && !(a == math.MinInt64 && b == -1) && !(b == math.MinInt64 && a == -1) {
		return p / d // the product fits
	}
	q := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
	q.Quo(q, big.NewInt(d))
	switch {
	case q.IsInt64():
		return q.Int64()
	case q.Sign() < 0:
		return math.MinInt64
	}
	return math.MaxInt64
}

// utilization is a percentage of request as int32.
func (c *Calculator) utilization(usage, requested int64) int32 {
	u := c.mulDiv(usage, 100, requested)
	if c.UpstreamArithmetic {
		return int32(u)
	}
	return int32(max(math.MinInt32, min(math.MaxInt32, u)))
}

// div is the sum divided by n (n > 0), truncated toward zero: the wrapped
// sum's quotient (upstream) or the exact one, saturated.
func (s sum) div(n int64, upstream bool) int64 {
	if upstream || int64(s.hi) == int64(s.lo)>>63 {
		return int64(s.lo) / n
	}
	v := new(big.Int).SetUint64(s.hi)
	v.Lsh(v, 64).Or(v, new(big.Int).SetUint64(s.lo))
	if int64(s.hi) < 0 { // two's complement: subtract 2^128
		v.Sub(v, new(big.Int).Lsh(big.NewInt(1), 128))
	}
	v.Quo(v, big.NewInt(n))
	switch {
	case v.IsInt64():
		return v.Int64()
	case v.Sign() < 0:
		return math.MinInt64
	}
	return math.MaxInt64
}
