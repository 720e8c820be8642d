package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"k8s.io/klog/v2"
)

// kadmAdmin is the admin seam over franz-go's admin client.
type kadmAdmin struct{ cl *kadm.Client }

func (a kadmAdmin) Topics(ctx context.Context) ([]string, error) {
	details, err := a.cl.ListTopics(ctx) // internal topics left out
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(details))
	for _, d := range details.Sorted() {
		if d.Err != nil {
			// typically no Describe permission: the topic is not ours to read
			klog.V(2).InfoS("Kafka topic left out of a regex match", "topic", d.Topic, "err", d.Err)
			continue
		}
		out = append(out, d.Topic)
	}
	return out, nil
}

func (a kadmAdmin) StartOffsets(ctx context.Context, topics []string) (offsets, error) {
	l, err := a.cl.ListStartOffsets(ctx, topics...)
	return listed(l, err)
}

func (a kadmAdmin) EndOffsets(ctx context.Context, topics []string) (offsets, error) {
	l, err := a.cl.ListEndOffsets(ctx, topics...)
	return listed(l, err)
}

// listed keeps only complete answers: a partition the brokers could not
// list fails the whole reading, since a lag summed without it is wrong.
func listed(l kadm.ListedOffsets, err error) (offsets, error) {
	if err != nil {
		return nil, err
	}
	out := make(offsets, len(l))
	for t, ps := range l {
		out[t] = make(map[int32]int64, len(ps))
		for p, o := range ps {
			switch {
			case errors.Is(o.Err, kerr.UnknownTopicOrPartition) && p < 0:
				return nil, fmt.Errorf("topic %q does not exist", t)
			case o.Err != nil:
				return nil, fmt.Errorf("topic %q partition %d: %w", t, p, o.Err)
			}
			out[t][p] = o.Offset
		}
	}
	return out, nil
}

func (a kadmAdmin) Committed(ctx context.Context, group string) (offsets, error) {
	rs, err := a.cl.FetchOffsets(ctx, group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return offsets{}, nil // a group that never committed
	}
	if err != nil {
		return nil, err
	}
	out := make(offsets, len(rs))
	for t, ps := range rs {
		out[t] = make(map[int32]int64, len(ps))
		for p, o := range ps {
			if o.Err != nil {
				return nil, fmt.Errorf("topic %q partition %d: %w", t, p, o.Err)
			}
			out[t][p] = o.At
		}
	}
	return out, nil
}

// klogger sends franz-go's logs to klog: a broker that is down makes the
// client warn on every dial, which the 503 already says, so warnings are
// verbose.
type klogger struct{ provider string }

func (klogger) Level() kgo.LogLevel {
	switch {
	case klog.V(6).Enabled():
		return kgo.LogLevelDebug
	case klog.V(4).Enabled():
		return kgo.LogLevelInfo
	case klog.V(2).Enabled():
		return kgo.LogLevelWarn
	}
	return kgo.LogLevelError
}

func (l klogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	v := klog.Level(1)
	switch level {
	case kgo.LogLevelWarn:
		v = 2
	case kgo.LogLevelInfo:
		v = 4
	case kgo.LogLevelDebug:
		v = 6
	}
	klog.V(v).InfoS("kafka client: "+msg, append([]any{"provider", l.provider}, keyvals...)...)
}
