package kafka

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"sync"

	"github.com/metricscale/metricscale/providers/ondemand"
)

// offsets are per topic, per partition.
type offsets map[string]map[int32]int64

// admin is the seam between the provider and the brokers: the three
// offset lookups a reading needs, and the topic list for a regex. The
// real one is kadm's client (kadm.go); tests use fakes.
type admin interface {
	// Topics lists the cluster's topics, internal ones left out.
	Topics(ctx context.Context) ([]string, error)
	// StartOffsets and EndOffsets list the log start offset and the high
	// watermark of every partition of topics; a topic that does not exist
	// is an error naming it.
	StartOffsets(ctx context.Context, topics []string) (offsets, error)
	EndOffsets(ctx context.Context, topics []string) (offsets, error)
	// Committed lists group's committed offsets; a partition without a
	// commit is absent (or -1). An unknown group has none.
	Committed(ctx context.Context, group string) (offsets, error)
}

// partition is what the lag of one partition is computed from.
type partition struct {
	Start, End int64
	// Committed is the group's committed offset; -1 when it has none.
	Committed int64
}

// lag is the partition's lag for a group whose consumers reset with policy:
//   - a commit within [start, end]: end − committed;
//   - no commit: what the consumer will read when it starts: nothing new
//     for latest (0), everything still on the log for earliest (end −
//     start, not the raw end offset: keda#2612);
//   - a commit below the start offset (retention deleted the messages it
//     had not read, keda#7936): end − start, the deleted ones are not lag;
//   - a commit beyond the end (the topic was re-created or truncated): the
//     consumer will get OFFSET_OUT_OF_RANGE and reset, so as no commit.
//
// It is never negative.
func (p partition) lag(policy ResetPolicy) int64 {
	start, end := p.Start, p.End
	if start < 0 {
		start = 0
	}
	if end < start {
		end = start
	}
	switch {
	case p.Committed < 0 || p.Committed > end:
		if policy == ResetEarliest {
			return end - start
		}
		return 0
	case p.Committed < start:
		return end - start
	default:
		return end - p.Committed
	}
}

// reader reads one metric through an admin.
type reader struct {
	admin  admin
	group  string
	topics []string       // explicit topics, or
	re     *regexp.Regexp // matched against the cluster's topics
	policy ResetPolicy
	// perPartition gives one series per partition.
	perPartition bool
}

// read does one set of admin calls: the topic list (regex only), then the
// start offsets, end offsets and the group's commits at once.
func (r *reader) read(ctx context.Context) ([]ondemand.Series, error) {
	topics := r.topics
	if r.re != nil {
		all, err := r.admin.Topics(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing topics: %w", err)
		}
		topics = nil
		for _, t := range all {
			if r.re.MatchString(t) {
				topics = append(topics, t)
			}
		}
		if len(topics) == 0 {
			return nil, nil // no topic matches: a 404 naming the metric
		}
	}
	var (
		wg                     sync.WaitGroup
		start, end, committed  offsets
		startErr, endErr, cErr error
	)
	wg.Add(3)
	go func() { defer wg.Done(); start, startErr = r.admin.StartOffsets(ctx, topics) }()
	go func() { defer wg.Done(); end, endErr = r.admin.EndOffsets(ctx, topics) }()
	go func() { defer wg.Done(); committed, cErr = r.admin.Committed(ctx, r.group) }()
	wg.Wait()
	switch {
	case endErr != nil:
		return nil, fmt.Errorf("listing end offsets: %w", endErr)
	case startErr != nil:
		return nil, fmt.Errorf("listing start offsets: %w", startErr)
	case cErr != nil:
		return nil, fmt.Errorf("fetching the offsets of group %q: %w", r.group, cErr)
	}
	return r.series(topics, start, end, committed)
}

// series computes the lag of every partition of topics and sums it per
// topic unless perPartition. Partitions come from the end offsets; a
// partition missing from the start offsets (added between the two calls)
// fails the reading rather than giving a wrong number.
func (r *reader) series(topics []string, start, end, committed offsets) ([]ondemand.Series, error) {
	sort.Strings(topics)
	var out []ondemand.Series
	for _, t := range topics {
		parts := end[t]
		if len(parts) == 0 {
			return nil, fmt.Errorf("topic %q: no partitions listed", t)
		}
		ids := make([]int32, 0, len(parts))
		for p := range parts {
			ids = append(ids, p)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		var total int64
		for _, id := range ids {
			s, ok := start[t][id]
			if !ok {
				return nil, fmt.Errorf("topic %q partition %d: no start offset listed", t, id)
			}
			c, ok := committed[t][id]
			if !ok {
				c = -1
			}
			l := partition{Start: s, End: parts[id], Committed: c}.lag(r.policy)
			if r.perPartition {
				lbls := r.labels(t)
				lbls[LabelPartition] = strconv.Itoa(int(id))
				out = append(out, ondemand.Series{Labels: lbls, Value: float64(l)})
			}
			total = addSaturating(total, l)
		}
		if !r.perPartition {
			out = append(out, ondemand.Series{Labels: r.labels(t), Value: float64(total)})
		}
	}
	return out, nil
}

func (r *reader) labels(topic string) map[string]string {
	l := map[string]string{LabelTopic: topic, LabelGroup: r.group}
	if r.re != nil {
		m := r.re.FindStringSubmatch(topic)
		for i, name := range r.re.SubexpNames() {
			if i > 0 && name != "" && i < len(m) {
				l[name] = m[i]
			}
		}
	}
	return l
}

// addSaturating is a + b for lags (never negative), at most math.MaxInt64:
// two partitions near the limit (a topic whose offsets were set by hand, a
// broker bug) must read as a very large lag, not wrap to a negative one.
func addSaturating(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
