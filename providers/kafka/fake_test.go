package kafka

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
)

// fakeAdmin serves fixed offsets at the admin seam and counts calls.
type fakeAdmin struct {
	mu        sync.Mutex
	topics    []string
	start     offsets
	end       offsets
	committed map[string]offsets // by group
	err       error              // every call fails with it when set

	// hang, when set, makes every call block until it is closed or ctx ends.
	hang  chan struct{}
	hung  atomic.Bool
	calls atomic.Int64
}

func (f *fakeAdmin) enter(ctx context.Context) error {
	f.calls.Add(1)
	if f.hung.Load() {
		select {
		case <-f.hang:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

func (f *fakeAdmin) Topics(ctx context.Context) ([]string, error) {
	if err := f.enter(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := append([]string(nil), f.topics...)
	sort.Strings(out)
	return out, nil
}

func (f *fakeAdmin) list(ctx context.Context, from offsets, topics []string) (offsets, error) {
	if err := f.enter(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := offsets{}
	for _, t := range topics {
		ps, ok := from[t]
		if !ok {
			return nil, fmt.Errorf("topic %q does not exist", t)
		}
		out[t] = map[int32]int64{}
		for p, o := range ps {
			out[t][p] = o
		}
	}
	return out, nil
}

func (f *fakeAdmin) StartOffsets(ctx context.Context, topics []string) (offsets, error) {
	return f.list(ctx, f.start, topics)
}

func (f *fakeAdmin) EndOffsets(ctx context.Context, topics []string) (offsets, error) {
	return f.list(ctx, f.end, topics)
}

func (f *fakeAdmin) Committed(ctx context.Context, group string) (offsets, error) {
	if err := f.enter(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := offsets{}
	for t, ps := range f.committed[group] {
		out[t] = map[int32]int64{}
		for p, o := range ps {
			out[t][p] = o
		}
	}
	return out, nil
}
