package memory

import (
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/metricscale/metricscale/providers"
)

// recordedChanges is a providers.ChangeSink that keeps what it hears.
type recordedChanges struct{ got []providers.Change }

func (r *recordedChanges) Publish(c providers.Change) { r.got = append(r.got, c) }

// take returns the changes heard since the last take, as sorted strings.
func (r *recordedChanges) take() []string {
	var out []string
	for _, c := range r.got {
		keys := make([]string, 0, len(c.Labels))
		for k := range c.Labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		s := fmt.Sprintf("%s ns=%q kind=%q all=%v", c.Metric, c.Namespace, c.Kind, c.All)
		for _, k := range keys {
			s += fmt.Sprintf(" %s=%s", k, c.Labels[k])
		}
		out = append(out, s)
	}
	sort.Strings(out)
	r.got = nil
	return out
}

func TestPublishesOnlyRealChanges(t *testing.T) {
	t.Parallel()
	p, clk, _ := newTestProvider(t)
	rec := &recordedChanges{}
	p.SetChanges(rec)
	p.store.SetMaxBytes(0)
	p.store.maxSeries = 3

	at := func(s providers.Sample, ts time.Time) providers.Sample { s.Timestamp = ts; return s }
	steps := []struct {
		name    string
		samples []providers.Sample
		wantErr bool
		want    []string
	}{
		{name: "new series", samples: []providers.Sample{smp("depth", 5, "queue", "a", "namespace", "shop"), smp("depth", 7, "queue", "b")},
			want: []string{`depth ns="" kind="" all=false queue=b`, `depth ns="shop" kind="" all=false namespace=shop queue=a`}},
		{name: "same values again", samples: []providers.Sample{smp("depth", 5, "queue", "a", "namespace", "shop"), smp("depth", 7, "queue", "b")}},
		{name: "one value changed", samples: []providers.Sample{smp("depth", 5, "queue", "a", "namespace", "shop"), smp("depth", 8, "queue", "b")},
			want: []string{`depth ns="" kind="" all=false queue=b`}},
		{name: "an older sample replaces nothing", samples: []providers.Sample{at(smp("depth", 99, "queue", "b"), t0.Add(-time.Hour))}},
		{name: "a refused push publishes nothing", samples: []providers.Sample{smp("depth", 1, "queue", "c"), smp("depth", 1, "queue", "d")}, wantErr: true},
	}
	for _, s := range steps {
		err := p.Append(s.samples)
		if (err != nil) != s.wantErr {
			t.Fatalf("%s: Append: %v, want error %v", s.name, err, s.wantErr)
		}
		if got := rec.take(); fmt.Sprint(got) != fmt.Sprint(s.want) {
			t.Errorf("%s: published %q, want %q", s.name, got, s.want)
		}
	}

	// A value past the maximum age is not served: the same value pushed
	// again is served again, which is a change.
	clk.Step(3 * time.Minute)
	push(t, p, smp("depth", 8, "queue", "b"))
	if got, want := rec.take(), []string{`depth ns="" kind="" all=false queue=b`}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("stale value pushed again: published %q, want %q", got, want)
	}

	// Expiry removes a series from every answer: a change.
	clk.Step(9 * time.Minute) // queue a was last pushed 12 minutes ago, b 9
	if n := p.expire(); n != 1 {
		t.Fatalf("expired %d series, want 1", n)
	}
	if got, want := rec.take(), []string{`depth ns="shop" kind="" all=false namespace=shop queue=a`}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("expiry: published %q, want %q", got, want)
	}
}

func TestNoSinkNoChange(t *testing.T) {
	t.Parallel()
	p, _, _ := newTestProvider(t)
	push(t, p, smp("depth", 5, "queue", "a"))
	if n := p.expire(); n != 0 {
		t.Fatalf("expired %d", n)
	}
	// The store full error stays the same with or without a sink.
	p.store.maxSeries = 1
	err := p.Append([]providers.Sample{smp("depth", 1, "queue", "z")})
	if !errors.Is(err, ErrStoreFull) {
		t.Fatalf("Append over the limit: %v, want ErrStoreFull", err)
	}
}
