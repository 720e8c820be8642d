package kafka

import (
	"context"
	"errors"
	"math"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/metricscale/metricscale/providers/ondemand"
)

func TestPartitionLag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		p        partition
		latest   int64
		earliest int64
	}{
		{"committed in the middle", partition{Start: 0, End: 100, Committed: 40}, 60, 60},
		{"committed, start moved by retention", partition{Start: 30, End: 100, Committed: 40}, 60, 60},
		{"committed at the end", partition{Start: 10, End: 100, Committed: 100}, 0, 0},
		{"committed at the start", partition{Start: 10, End: 100, Committed: 10}, 90, 90},
		// keda#2612: never the raw end offset when start > 0
		{"no commit", partition{Start: 0, End: 100, Committed: -1}, 0, 100},
		{"no commit, start > 0", partition{Start: 70, End: 100, Committed: -1}, 0, 30},
		// keda#7936: deleted messages are not lag
		{"committed below the start", partition{Start: 70, End: 100, Committed: 5}, 30, 30},
		{"committed beyond the end (re-created topic)", partition{Start: 0, End: 10, Committed: 50}, 0, 10},
		{"empty topic, no commit", partition{Start: 0, End: 0, Committed: -1}, 0, 0},
		{"empty topic, committed", partition{Start: 0, End: 0, Committed: 0}, 0, 0},
		{"emptied by retention, no commit", partition{Start: 42, End: 42, Committed: -1}, 0, 0},
		{"emptied by retention, old commit", partition{Start: 42, End: 42, Committed: 3}, 0, 0},
		{"end below start (never from a broker)", partition{Start: 50, End: 40, Committed: 45}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.p.lag(ResetLatest); got != tc.latest {
				t.Errorf("%+v latest: lag %d, want %d", tc.p, got, tc.latest)
			}
			if got := tc.p.lag(ResetEarliest); got != tc.earliest {
				t.Errorf("%+v earliest: lag %d, want %d", tc.p, got, tc.earliest)
			}
		})
	}
}

// TestReaderSeries checks the sums, the labels and the failures of one
// reading through a fake admin.
func TestReaderSeries(t *testing.T) {
	t.Parallel()
	newFake := func() *fakeAdmin {
		return &fakeAdmin{
			topics: []string{"team-a.orders", "team-b.orders", "other"},
			start:  offsets{"team-a.orders": {0: 0, 1: 50}, "team-b.orders": {0: 0}, "other": {0: 0}},
			end:    offsets{"team-a.orders": {0: 10, 1: 100}, "team-b.orders": {0: 7}, "other": {0: 5}},
			committed: map[string]offsets{"g": {
				"team-a.orders": {0: 4, 1: 20}, // p1 below start: 100-50
				"other":         {0: 5},
				// team-b.orders: no commit
			}},
		}
	}
	series := func(kv ...any) ondemand.Series {
		s := ondemand.Series{Labels: map[string]string{}}
		for i := 0; i+1 < len(kv)-1; i += 2 {
			s.Labels[kv[i].(string)] = kv[i+1].(string)
		}
		s.Value = kv[len(kv)-1].(float64)
		return s
	}
	re := regexp.MustCompile(`^(?:(?P<team>[a-z-]+)\.orders)$`)
	for _, tc := range []struct {
		name    string
		r       reader
		want    []ondemand.Series
		wantErr string
	}{
		{
			name: "per topic, latest",
			r:    reader{group: "g", topics: []string{"team-b.orders", "team-a.orders"}, policy: ResetLatest},
			want: []ondemand.Series{
				series("topic", "team-a.orders", "group", "g", 56.0),
				series("topic", "team-b.orders", "group", "g", 0.0),
			},
		},
		{
			name: "per topic, earliest",
			r:    reader{group: "g", topics: []string{"team-b.orders"}, policy: ResetEarliest},
			want: []ondemand.Series{series("topic", "team-b.orders", "group", "g", 7.0)},
		},
		{
			name: "per partition",
			r:    reader{group: "g", topics: []string{"team-a.orders"}, policy: ResetLatest, perPartition: true},
			want: []ondemand.Series{
				series("topic", "team-a.orders", "group", "g", "partition", "0", 6.0),
				series("topic", "team-a.orders", "group", "g", "partition", "1", 50.0),
			},
		},
		{
			name: "regex with a capture group",
			r:    reader{group: "g", re: re, policy: ResetEarliest},
			want: []ondemand.Series{
				series("topic", "team-a.orders", "group", "g", "team", "team-a", 56.0),
				series("topic", "team-b.orders", "group", "g", "team", "team-b", 7.0),
			},
		},
		{
			name: "unknown group: every partition uncommitted",
			r:    reader{group: "nobody", topics: []string{"team-a.orders"}, policy: ResetEarliest},
			want: []ondemand.Series{series("topic", "team-a.orders", "group", "nobody", 60.0)},
		},
		{
			name: "regex matching nothing",
			r:    reader{group: "g", re: regexp.MustCompile(`^nope$`)},
		},
		{
			name:    "missing topic",
			r:       reader{group: "g", topics: []string{"gone"}},
			wantErr: `listing end offsets: topic "gone" does not exist`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake()
			tc.r.admin = f
			got, err := tc.r.read(context.Background())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v\nwant %v", got, tc.want)
			}
		})
	}
}

// TestLagSumSaturates: two partitions near MaxInt64 (offsets set by hand,
// a broker bug) sum to the largest lag, never wrap to a negative one (-4).
func TestLagSumSaturates(t *testing.T) {
	t.Parallel()
	const big = math.MaxInt64 - 1
	f := &fakeAdmin{
		start:     offsets{"t": {0: 0, 1: 0}},
		end:       offsets{"t": {0: big, 1: big}},
		committed: map[string]offsets{},
	}
	got, err := (&reader{admin: f, group: "g", topics: []string{"t"}, policy: ResetEarliest}).read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Value != float64(math.MaxInt64) {
		t.Fatalf("series %v, want one at MaxInt64", got)
	}
	for _, tc := range []struct{ a, b, want int64 }{
		{1, 2, 3}, {math.MaxInt64, 0, math.MaxInt64}, {math.MaxInt64 - 1, 1, math.MaxInt64}, {math.MaxInt64 - 1, 2, math.MaxInt64}, {big, big, math.MaxInt64},
	} {
		if s := addSaturating(tc.a, tc.b); s != tc.want {
			t.Errorf("addSaturating(%d, %d) = %d, want %d", tc.a, tc.b, s, tc.want)
		}
	}
}

// TestReaderIncomplete: a partition the brokers did not list fails the
// reading instead of giving a smaller sum.
func TestReaderIncomplete(t *testing.T) {
	t.Parallel()
	f := &fakeAdmin{
		start:     offsets{"t": {0: 0}},
		end:       offsets{"t": {0: 10, 1: 10}},
		committed: map[string]offsets{},
	}
	r := reader{admin: f, group: "g", topics: []string{"t"}}
	if _, err := r.read(context.Background()); err == nil || !strings.Contains(err.Error(), `topic "t" partition 1: no start offset`) {
		t.Errorf("error %v, want one naming partition 1", err)
	}
	f.err = errors.New("broker said no")
	if _, err := r.read(context.Background()); err == nil || !strings.Contains(err.Error(), "broker said no") {
		t.Errorf("error %v, want the admin's", err)
	}
}
