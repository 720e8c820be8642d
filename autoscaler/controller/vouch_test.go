package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/metricscale/metricscale/autoscaler/metricsource"
	"github.com/metricscale/metricscale/providers/changefeed"
)

// countingSource answers External reads with value (or err), counting
// them, as the adapter replica servedBy; during runs inside a read.
type countingSource struct {
	metricsource.Source
	reads    int
	value    int64
	err      error
	servedBy string
	during   func()
}

func (s *countingSource) ExternalMetric(ctx context.Context, _, _ string, _ labels.Selector) ([]int64, time.Time, error) {
	s.reads++
	if s.during != nil {
		s.during()
	}
	metricsource.RecordServedBy(ctx, s.servedBy)
	if s.err != nil {
		return nil, time.Time{}, s.err
	}
	return []int64{s.value}, t0, nil
}

// vouchingFeed is a controller whose change feed vouches for the values
// src reads (7 by default).
func vouchingFeed(t *testing.T, live func() bool, replica func() string) (*Controller, *clocktesting.FakeClock, *countingSource, *ChangeFeed) {
	t.Helper()
	c, clk := feedController(t)
	src := &countingSource{value: 7000}
	c.clients.Metrics = src
	f := newChangeFeed(c, 0)
	f.VouchFor(live, replica)
	return c, clk, src, f
}

func TestVouchedValues(t *testing.T) {
	t.Parallel()
	live := true
	c, clk, src, f := vouchingFeed(t, func() bool { return live }, func() string { return "r1" })
	src.servedBy = "r2" // another replica than the feed's
	f.index(kindMA, ma("shop", "a", external("depth", match("queue", "a"))))
	f.index(kindMA, ma("shop", "b", external("depth", match("queue", "b"))))
	keyA, keyB := kindMA+"/shop/a", kindMA+"/shop/b"
	selA, selB := labels.SelectorFromSet(labels.Set{"queue": "a"}), labels.SelectorFromSet(labels.Set{"queue": "b"})
	cover := func() {
		f.Covered(&changefeed.Event{Type: changefeed.TypeCovered, Kind: changefeed.KindExternal, Name: "depth", LeaseSeconds: 120, MaxAgeMillis: 1500})
	}
	change := func(queue string) {
		f.Changed(&changefeed.Event{Type: changefeed.TypeChange, Kind: changefeed.KindExternal, Name: "depth", Namespace: "shop",
			Labels: map[string]string{"queue": queue, "namespace": "shop"}})
	}
	// read reads depth for key and reports whether the source was asked.
	read := func(key string, sel labels.Selector) bool {
		t.Helper()
		before := src.reads
		values, _, err := c.metricSource(key).ExternalMetric(context.Background(), "depth", "shop", sel)
		if src.err == nil && (err != nil || len(values) != 1 || values[0] != src.value) {
			t.Fatalf("read %s: %v, %v; want [%d]", key, values, err, src.value)
		}
		return src.reads > before
	}
	steps := []struct {
		name       string
		before     func()
		key        string
		wantSource bool
	}{
		{"not covered", nil, keyA, true},
		{"not covered, again", nil, keyA, true},
		{"covered just now: another replica may serve an older reading", cover, keyA, true},
		{"covered 2s ago: kept", func() { clk.Step(2 * time.Second) }, keyA, true},
		{"reused", nil, keyA, false},
		{"the other object's first read", nil, keyB, true},
		{"a change of the other object's series", func() { change("b") }, keyA, false},
		{"the changed object reads again", nil, keyB, true},
		{"within maxAge of its change: not kept", nil, keyB, true},
		{"kept 2s after its change", func() { clk.Step(2 * time.Second) }, keyB, true},
		{"reused after its change", nil, keyB, false},
		{"still reused before half the lease", func() { clk.Step(57 * time.Second) }, keyA, false},
		{"the other object reads after a change", func() { change("b") }, keyB, true},
		{"its read renewed the metric's lease: a value older than half of it reused", func() { clk.Step(3 * time.Second) }, keyA, false},
		{"read again half a lease after the metric's last read", func() { clk.Step(57 * time.Second) }, keyA, true},
		{"the renewed value is reused", nil, keyA, false},
		{"the feed is not live", func() { live = false }, keyA, true},
		{"still not live", nil, keyA, true},
		{"live again: what was read meanwhile is reused", func() { live = true }, keyA, false},
		{"uncovered", func() {
			f.Covered(&changefeed.Event{Type: changefeed.TypeUncovered, Kind: changefeed.KindExternal, Name: "depth"})
		}, keyA, true},
		{"uncovered, again", nil, keyA, true},
		{"covered again, 2s on: kept", func() { cover(); clk.Step(2 * time.Second) }, keyA, true},
		{"covered again: reused", nil, keyA, false},
		{"a coverage that ended and began again unread", func() {
			f.Covered(&changefeed.Event{Type: changefeed.TypeUncovered, Kind: changefeed.KindExternal, Name: "depth"})
			cover()
			clk.Step(2 * time.Second)
		}, keyA, true},
		{"reused in the new coverage", nil, keyA, false},
		{"a resync forgets the values", f.Resync, keyA, true},
		{"and the coverage", func() { clk.Step(2 * time.Second) }, keyA, true},
		{"covered once said again", cover, keyA, true},
		{"covered after the resync", func() { clk.Step(2 * time.Second) }, keyA, true},
		{"reused after the resync", nil, keyA, false},
		{"a change of every series", func() {
			f.Changed(&changefeed.Event{Type: changefeed.TypeChange, Kind: changefeed.KindExternal, Name: "depth", All: true})
		}, keyA, true},
		{"a custom metric's change is not the External one", func() {
			clk.Step(2 * time.Second)
			read(keyA, selA)
			f.Changed(&changefeed.Event{Type: changefeed.TypeChange, Kind: changefeed.KindCustom, Name: "other", All: true})
		}, keyA, false},
	}
	for _, s := range steps {
		if s.before != nil {
			s.before()
		}
		sel := selA
		if s.key == keyB {
			sel = selB
		}
		if got := read(s.key, sel); got != s.wantSource {
			t.Fatalf("%s: read the source %v, want %v", s.name, got, s.wantSource)
		}
	}

	// A change while a read is in flight: the value read is not kept.
	clk.Step(2 * time.Second)
	src.during = func() { change("a") }
	change("a")
	clk.Step(2 * time.Second)
	if !read(keyA, selA) {
		t.Fatal("a changed value was not read")
	}
	src.during = nil
	if !read(keyA, selA) {
		t.Error("a value read while its series changed was reused")
	}
	clk.Step(2 * time.Second)
	if !read(keyA, selA) || read(keyA, selA) {
		t.Fatal("a value read 2s after the change was not kept")
	}
	// Even when the adapter serves no older reading (maxAge 0).
	f.Covered(&changefeed.Event{Type: changefeed.TypeCovered, Kind: changefeed.KindExternal, Name: "depth", LeaseSeconds: 120})
	src.during = func() { change("a") }
	read(keyA, selA)
	src.during = nil
	if !read(keyA, selA) {
		t.Error("a value read while its series changed was reused (maxAge 0)")
	}
	// A failed read is not kept.
	f.set(keyB, nil)
	f.index(kindMA, ma("shop", "b", external("depth", match("queue", "b"))))
	src.err = errors.New("adapter down")
	before := src.reads
	for range 2 {
		if _, _, err := c.metricSource(keyB).ExternalMetric(context.Background(), "depth", "shop", selB); err == nil {
			t.Fatal("a failed read answered")
		}
	}
	if n := src.reads - before; n != 2 {
		t.Errorf("two failing reads asked the source %d times, want 2", n)
	}
	src.err = nil
	if !read(keyB, selB) || read(keyB, selB) {
		t.Error("the first good read after failures was not kept")
	}
	// A deleted object keeps nothing.
	f.set(keyA, nil)
	if !read(keyA, selA) || !read(keyA, selA) {
		t.Error("a deleted object's value was reused")
	}
}

// TestVouchedOwnReplica: a value the feed's own adapter replica answered is
// kept as soon as it is read after the coverage and the last change; one
// another replica answered waits for maxAge.
func TestVouchedOwnReplica(t *testing.T) {
	t.Parallel()
	feedReplica := "r1"
	c, clk, src, f := vouchingFeed(t, func() bool { return true }, func() string { return feedReplica })
	f.index(kindMA, ma("shop", "a", external("depth", match("queue", "a"))))
	key, sel := kindMA+"/shop/a", labels.SelectorFromSet(labels.Set{"queue": "a"})
	change := func() {
		f.Changed(&changefeed.Event{Type: changefeed.TypeChange, Kind: changefeed.KindExternal, Name: "depth", Namespace: "shop",
			Labels: map[string]string{"queue": "a", "namespace": "shop"}})
	}
	read := func() bool {
		t.Helper()
		before := src.reads
		if _, _, err := c.metricSource(key).ExternalMetric(context.Background(), "depth", "shop", sel); err != nil {
			t.Fatal(err)
		}
		return src.reads > before
	}
	steps := []struct {
		name             string
		servedBy         string
		before           func()
		wantSource, kept bool
	}{
		{name: "covered just now, the feed's replica answers: kept", servedBy: "r1", wantSource: true, kept: true,
			before: func() {
				f.Covered(&changefeed.Event{Type: changefeed.TypeCovered, Kind: changefeed.KindExternal, Name: "depth", LeaseSeconds: 120, MaxAgeMillis: 1500})
			}},
		{name: "changed just now, the feed's replica answers: kept", servedBy: "r1", before: change, wantSource: true, kept: true},
		{name: "changed just now, another replica answers: not kept", servedBy: "r2", before: change, wantSource: true},
		{name: "another replica after maxAge: kept", servedBy: "r2", before: func() { clk.Step(2 * time.Second) }, wantSource: true, kept: true},
		{name: "an answer naming no replica: not kept", servedBy: "", before: change, wantSource: true},
		{name: "the feed names no replica (an older adapter): not kept", servedBy: "", before: func() { feedReplica = ""; change() }, wantSource: true},
		{name: "a change during the own replica's read: not kept", servedBy: "r1", before: func() { feedReplica = "r1"; src.during = change }, wantSource: true},
		{name: "then kept", servedBy: "r1", before: func() { src.during = nil }, wantSource: true, kept: true},
		{name: "the feed reconnected to r2 during a read r2 answered: not kept", servedBy: "r2",
			before: func() { change(); src.during = func() { feedReplica = "r2" } }, wantSource: true},
	}
	for _, s := range steps {
		src.servedBy = s.servedBy
		if s.before != nil {
			s.before()
		}
		if got := read(); got != s.wantSource {
			t.Fatalf("%s: read the source %v, want %v", s.name, got, s.wantSource)
		}
		src.during = nil
		if reused := !read(); reused != s.kept {
			t.Fatalf("%s: the next reconcile reused the value %v, want %v", s.name, reused, s.kept)
		}
		change() // the next step begins with nothing kept
	}
}
