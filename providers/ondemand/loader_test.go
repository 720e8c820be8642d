package ondemand

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// TestLoaderPut: a value put serves Gets for its TTL in place of the cached
// one, and a load in progress when it was put does not replace it.
func TestLoaderPut(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(feedT0)
	l := NewLoader[int](time.Minute, 0, clk)
	ctx := context.Background()
	load := func(v int) func(context.Context) (int, error) {
		return func(context.Context) (int, error) { return v, nil }
	}
	if v, _ := l.Get(ctx, "k", load(1)); v != 1 {
		t.Fatalf("first Get %d, want 1", v)
	}
	l.Put("k", 2, time.Minute)
	if v, _ := l.Get(ctx, "k", load(3)); v != 2 {
		t.Errorf("Get after Put %d, want the put 2", v)
	}
	// a load in progress, then a Put: the Put wins
	release, started := make(chan struct{}), make(chan struct{})
	clk.Step(2 * time.Minute)
	done := make(chan int)
	go func() {
		v, _ := l.Get(ctx, "k", func(context.Context) (int, error) { close(started); <-release; return 4, nil })
		done <- v
	}()
	<-started
	l.Put("k", 5, time.Minute)
	close(release)
	if v := <-done; v != 4 {
		t.Errorf("the load's own caller got %d, want its 4", v)
	}
	if v, _ := l.Get(ctx, "k", load(6)); v != 5 {
		t.Errorf("Get after the load ended %d, want the put 5", v)
	}
	l.Put("k", 7, 0)
	if v, _ := l.Get(ctx, "k", load(8)); v != 8 {
		t.Errorf("Get after Put with TTL 0 got %d, want a load (8)", v)
	}
}
