package replicas

import (
	"context"
	"math"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestArithmeticDeviations covers each place where upstream's integer
// arithmetic overflows or misreads a negative: the default mode saturates
// and keeps negatives, UpstreamArithmetic reproduces upstream (whose
// out-of-range int32(float) is MinInt32 on amd64).
func TestArithmeticDeviations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	three := []*corev1.Pod{pod("a", 1000), pod("b", 1000), pod("c", 1000)}
	type result struct {
		proposal int32
		usage    int64
	}
	cases := []struct {
		name           string
		run            func(c *Calculator) (int32, int64, error)
		pods           []*corev1.Pod
		src            *fakeSource
		want, upstream result
	}{
		{
			// 1e12 per pod against 100: ratio 1e10 × 3 pods wraps to a
			// negative proposal upstream, which scales down.
			name: "pods metric proposal over 2^31", pods: three,
			src: &fakeSource{pods: samples(map[string]int64{"a": 1e15, "b": 1e15, "c": 1e15})},
			run: func(c *Calculator) (int32, int64, error) {
				return c.PodsAverageValue(ctx, 3, 100000, "rps", tol10, labels.Everything())
			},
			want: result{math.MaxInt32, 1e15}, upstream: result{math.MinInt32, 1e15},
		},
		{
			// Three pods at 1e17 each: the int64 sum wraps upstream.
			name: "pods metric sum over 2^63", pods: three,
			src: &fakeSource{pods: samples(map[string]int64{"a": 4e18, "b": 4e18, "c": 4e18})},
			run: func(c *Calculator) (int32, int64, error) {
				return c.PodsAverageValue(ctx, 3, 1000, "rps", tol10, labels.Everything())
			},
			want: result{math.MaxInt32, 4e18}, upstream: result{math.MinInt32, -2148914691236517205},
		},
		{
			// 3,000,000 messages against 1m from zero replicas: ratio 3e9.
			name: "external value from zero over 2^31",
			src:  &fakeSource{external: []int64{3e9}},
			run: func(c *Calculator) (int32, int64, error) {
				return c.ExternalValue(ctx, 0, 1, "q", tol10, nil)
			},
			want: result{math.MaxInt32, 3e9}, upstream: result{math.MinInt32, 3e9},
		},
		{
			// A negative sum is a negative sum, not an overflow.
			name: "negative external sum", pods: three,
			src: &fakeSource{external: []int64{-5000}},
			run: func(c *Calculator) (int32, int64, error) {
				return c.ExternalAverageValue(ctx, 4, 30000, "q", tol10, nil)
			},
			want: result{0, -1250}, upstream: result{math.MaxInt32, math.MaxInt64},
		},
		{
			name: "external sum turning negative", pods: three,
			src: &fakeSource{external: []int64{10000, -10001}},
			run: func(c *Calculator) (int32, int64, error) {
				return c.ExternalAverageValue(ctx, 4, 30000, "q", tol10, nil)
			},
			want: result{0, 0}, upstream: result{math.MaxInt32, math.MaxInt64},
		},
		{
			// Series summing below MinInt64 wrap to a positive upstream.
			name: "external value sum under -2^63", pods: three,
			src: &fakeSource{external: []int64{math.MinInt64 + 1, -2}},
			run: func(c *Calculator) (int32, int64, error) {
				return c.ExternalValue(ctx, 3, 1000, "q", tol10, nil)
			},
			want: result{math.MinInt32, math.MinInt64}, upstream: result{math.MaxInt32, math.MaxInt64},
		},
		{
			// Usage 1e5 cores against 1m of request: 1e10 percent.
			name: "utilization over 2^31 percent", pods: []*corev1.Pod{pod("a", 1)},
			src: &fakeSource{pods: samples(map[string]int64{"a": 1e8})},
			run: func(c *Calculator) (int32, int64, error) {
				p, _, raw, err := c.ResourceUtilization(ctx, 1, 80, corev1.ResourceCPU, tol10, "")
				return p, raw, err
			},
			want: result{26843546, 1e8}, upstream: result{17625818, 1e8}, // 1e10 wraps to 1410065408 percent,
		},
		{
			// Object AverageValue near MaxInt64: the average rounds to 2^63.
			name: "object average at 2^63", pods: three,
			src: &fakeSource{object: math.MaxInt64},
			run: func(c *Calculator) (int32, int64, error) {
				return c.ObjectAverageValue(ctx, 1, 1, "rps", tol10, nil, labels.Everything())
			},
			want: result{math.MaxInt32, math.MaxInt64}, upstream: result{math.MinInt32, math.MinInt64},
		},
	}
	for _, tc := range cases {
		for _, upstream := range []bool{false, true} {
			want := tc.want
			if upstream {
				if runtime.GOARCH != "amd64" {
					continue // out-of-range float conversions are platform-defined
				}
				want = tc.upstream
			}
			t.Run(tc.name+map[bool]string{false: "", true: "/upstream"}[upstream], func(t *testing.T) {
				t.Parallel()
				c := calculator(tc.src, tc.pods...)
				c.UpstreamArithmetic = upstream
				p, usage, err := tc.run(c)
				if err != nil {
					t.Fatal(err)
				}
				if got := (result{p, usage}); got != want {
					t.Errorf("proposal, usage = %d, %d; want %d, %d", got.proposal, got.usage, want.proposal, want.usage)
				}
			})
		}
	}
}

func TestSum(t *testing.T) {
	t.Parallel()
	cases := []struct {
		values    []int64
		want      int64
		wantDiv2  int64
		wrapped   int64
		subtracts []int64
	}{
		{values: []int64{1, 2, 3}, want: 6, wantDiv2: 3, wrapped: 6},
		{values: []int64{math.MaxInt64, 1}, want: math.MaxInt64, wantDiv2: 1 << 62, wrapped: math.MinInt64},
		{values: []int64{math.MinInt64, -1}, want: math.MinInt64, wantDiv2: -(1 << 62), wrapped: math.MaxInt64},
		{values: []int64{math.MaxInt64, math.MaxInt64}, subtracts: []int64{math.MaxInt64}, want: math.MaxInt64, wantDiv2: math.MaxInt64 / 2, wrapped: math.MaxInt64},
		{values: []int64{-5}, want: -5, wantDiv2: -2, wrapped: -5},
	}
	for _, tc := range cases {
		var s sum
		for _, v := range tc.values {
			s.add(v)
		}
		for _, v := range tc.subtracts {
			s.sub(v)
		}
		if got := s.value(false); got != tc.want {
			t.Errorf("%v - %v = %d, want %d", tc.values, tc.subtracts, got, tc.want)
		}
		if got := s.value(true); got != tc.wrapped {
			t.Errorf("%v - %v wrapped = %d, want %d", tc.values, tc.subtracts, got, tc.wrapped)
		}
		if got := s.div(2, false); got != tc.wantDiv2 {
			t.Errorf("(%v - %v)/2 = %d, want %d", tc.values, tc.subtracts, got, tc.wantDiv2)
		}
	}
}
