package memory

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/pushformat"
)

// seriesSamples makes n realistic series: 100 metrics over 20 namespaces,
// each with a unique pod name and a small label set.
func seriesSamples(n int) []providers.Sample {
	out := make([]providers.Sample, n)
	for i := range out {
		out[i] = providers.Sample{
			Name: fmt.Sprintf("app_metric_%d", i%100),
			Labels: map[string]string{
				"namespace": fmt.Sprintf("team-%d", i%20),
				"pod":       fmt.Sprintf("worker-7d9f8c6b5-%06d", i),
				"queue":     fmt.Sprintf("queue-%d", i%50),
				"instance":  "10.0.0.1:8080",
			},
			Value: float64(i),
		}
	}
	return out
}

// BytesPerSeries stores n series and returns the heap growth per series.
func BytesPerSeries(n int) float64 {
	samples := seriesSamples(n)
	clk := clocktesting.NewFakeClock(t0)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := NewStore(clk, time.Hour, 0)
	for i := 0; i < n; i += 1000 {
		if err := s.Append(samples[i:min(i+1000, n)]); err != nil {
			panic(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(s)
	runtime.KeepAlive(samples) // alive in both readings: not counted
	if s.Len() != n {
		panic(fmt.Sprintf("stored %d series, want %d", s.Len(), n))
	}
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

func TestMemoryPerSeries(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 100,000 series")
	}
	// The samples are alive in both readings, so only the store counts. Goal: at most 1 KiB per series at 100,000 series.
	perSeries := BytesPerSeries(100_000)
	t.Logf("%.0f bytes per series at 100,000 series", perSeries)
	if perSeries > 1024 {
		t.Errorf("%.0f bytes per series, over the 1 KiB budget", perSeries)
	}
}

func TestStoreConcurrentUse(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(t0)
	p := New("mem", NewStore(clk, time.Minute, 0), testResolver(), nil, clk, time.Minute)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				_ = p.Append([]providers.Sample{smp("m", float64(i), "namespace", "default", "pod", fmt.Sprint("p", i%17))})
				if i%50 == 0 {
					p.Store().Expire()
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				_, _ = p.GetExternalMetric(context.Background(), "default", labels.Everything(), providers.ExternalMetricInfo{Metric: "m"})
				_ = p.ListAllMetrics()
			}
		}()
	}
	wg.Wait()
	if n := p.SeriesCount(); n != 17 {
		t.Errorf("series = %d, want 17", n)
	}
}

func TestRemoveKeepsIndexConsistent(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(t0)
	s := NewStore(clk, time.Minute, 0)
	var samples []providers.Sample
	for i := 0; i < 50; i++ {
		samples = append(samples, smp("m", float64(i), "i", fmt.Sprint(i)))
	}
	if err := s.Append(samples); err != nil {
		t.Fatal(err)
	}
	clk.Step(45 * time.Second)
	// refresh the odd ones; the even ones expire
	var odd []providers.Sample
	for i := 1; i < 50; i += 2 {
		odd = append(odd, smp("m", float64(i*10), "i", fmt.Sprint(i)))
	}
	if err := s.Append(odd); err != nil {
		t.Fatal(err)
	}
	clk.Step(30 * time.Second)
	if n := s.Expire(); n != 25 {
		t.Fatalf("expired %d, want 25", n)
	}
	s.view("m", func(f *family) {
		if len(f.list) != 25 || len(f.byHash) > 25 {
			t.Fatalf("list %d, hash %d", len(f.list), len(f.byHash))
		}
		for i, sr := range f.list {
			if int(sr.idx) != i {
				t.Errorf("series %d has idx %d", i, sr.idx)
			}
			v := sr.Get("i")
			var n int
			fmt.Sscan(v, &n)
			if n%2 != 1 || sr.value != float64(n*10) {
				t.Errorf("series i=%s value %v survived wrongly", v, sr.value)
			}
			if f.find(&point{hash: sr.hash, labels: sr.labels}) != sr {
				t.Errorf("series i=%s not found by hash", v)
			}
		}
	})
}

func BenchmarkAppend(b *testing.B) {
	samples := seriesSamples(10_000)
	s := NewStore(clocktesting.NewFakeClock(t0), time.Hour, 0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := (i * 100) % len(samples)
		if err := s.Append(samples[j : j+100]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "samples/s")
}

// capSample is a series at the label caps: MaxLabels labels whose names
// and values are as long as allowed, all distinct (nothing interned twice).
func capSample(i int) providers.Sample {
	lbls := make(map[string]string, pushformat.MaxLabels)
	for j := range pushformat.MaxLabels {
		name := fmt.Sprintf("l%02d_%s", j, strings.Repeat("n", pushformat.MaxNameLen-4))
		lbls[name] = fmt.Sprintf("%08d-%02d-%s", i, j, strings.Repeat("v", pushformat.MaxLabelValueLen-12))
	}
	return providers.Sample{Name: "cap", Labels: lbls, Value: 1}
}

// TestStoreLimits: the store bounds what one series may carry and the bytes
// all series take, not only their count.
func TestStoreLimits(t *testing.T) {
	t.Parallel()
	many := map[string]string{}
	for i := range pushformat.MaxLabels + 1 {
		many[fmt.Sprintf("l%d", i)] = "x"
	}
	tests := []struct {
		name   string
		sample providers.Sample
		want   string
	}{
		{"too many labels", providers.Sample{Name: "m", Labels: many, Value: 1}, "labels, more than"},
		{"long label name", providers.Sample{Name: "m", Labels: map[string]string{strings.Repeat("n", pushformat.MaxNameLen+1): "x"}, Value: 1}, "label name longer than"},
		{"long label value", providers.Sample{Name: "m", Labels: map[string]string{"a": strings.Repeat("v", pushformat.MaxLabelValueLen+1)}, Value: 1}, "value longer than"},
		{"long metric name", providers.Sample{Name: strings.Repeat("m", pushformat.MaxNameLen+1), Value: 1}, "metric name longer than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := NewStore(clocktesting.NewFakeClock(t0), time.Hour, 0)
			if err := s.Append([]providers.Sample{tc.sample}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Append = %v, want an error containing %q", err, tc.want)
			}
		})
	}

	t.Run("byte budget", func(t *testing.T) {
		t.Parallel()
		s := NewStore(clocktesting.NewFakeClock(t0), time.Hour, 0)
		s.SetMaxBytes(3 * estimateBytes(capSample(0).Name, capSample(0).Labels))
		if err := s.Append([]providers.Sample{capSample(0), capSample(1), capSample(2)}); err != nil {
			t.Fatalf("three series within the budget: %v", err)
		}
		err := s.Append([]providers.Sample{capSample(3)})
		if !errors.Is(err, ErrStoreFull) || !strings.Contains(err.Error(), "bytes") {
			t.Errorf("a series over the byte budget: %v, want ErrStoreFull naming bytes", err)
		}
		if err := s.Append([]providers.Sample{capSample(1)}); err != nil {
			t.Errorf("an update needs no room: %v", err)
		}
		if s.Len() != 3 {
			t.Errorf("stored %d series", s.Len())
		}
	})
}

// BenchmarkBytesPerSeriesAtCaps measures the heap a series at the label
// caps takes, against the store's estimate (which the byte budget counts).
func BenchmarkBytesPerSeriesAtCaps(b *testing.B) {
	const n = 2000
	samples := make([]providers.Sample, n)
	for i := range samples {
		samples[i] = capSample(i)
	}
	var measured float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		s := NewStore(clocktesting.NewFakeClock(t0), time.Hour, 0)
		for i := 0; i < n; i += 100 {
			if err := s.Append(samples[i : i+100]); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(s)
		measured = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
	}
	runtime.KeepAlive(samples)
	b.ReportMetric(measured, "bytes/series")
	b.ReportMetric(float64(estimateBytes(samples[0].Name, samples[0].Labels)), "estimated-bytes/series")
	b.ReportMetric(float64(DefaultMaxBytes)/float64(estimateBytes(samples[0].Name, samples[0].Labels)), "series-at-default-budget")
}

// TestVersionsConvergeInAnyOrder: the value is a last-writer-wins register
// on (sample time, acceptance time, origin), so replicas receiving the same
// samples in different orders store the same value.
func TestVersionsConvergeInAnyOrder(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	at := func(v float64, ts, acc int64, origin uint64) providers.Sample {
		return providers.Sample{Name: "q", Value: v, Timestamp: now.Add(time.Duration(ts)), Accepted: now.Add(time.Duration(acc)).UnixNano(), Origin: origin}
	}
	samples := []providers.Sample{
		at(1, 0, 0, 7),
		at(2, 0, 5, 3),   // same sample time, accepted later: wins over 1
		at(3, 0, 5, 9),   // same times, greater origin: wins over 2
		at(4, -1, 50, 9), // older sample time: loses whatever its acceptance
	}
	orders := [][]int{{0, 1, 2, 3}, {3, 2, 1, 0}, {2, 0, 3, 1}, {1, 3, 0, 2}}
	for _, order := range orders {
		s := NewStore(clocktesting.NewFakePassiveClock(now), time.Hour, 0)
		for _, i := range order {
			if err := s.Append([]providers.Sample{samples[i]}); err != nil {
				t.Fatal(err)
			}
		}
		var got []providers.Sample
		_ = s.Snapshot(10, func(b []providers.Sample) error { got = append(got, b...); return nil })
		if len(got) != 1 || got[0].Value != 3 || got[0].Origin != 9 {
			t.Errorf("order %v: stored %+v, want value 3 from origin 9", order, got)
		}
	}
}

// TestSnapshotCarriesVersionsAndSeen: a copy keeps each series' version and
// when it was last received, and skips series past the TTL.
func TestSnapshotCarriesVersionsAndSeen(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	clk := clocktesting.NewFakePassiveClock(now)
	s := NewStore(clk, time.Minute, 0)
	old := providers.Sample{Name: "a", Labels: map[string]string{"x": "1"}, Value: 1, Timestamp: now, Accepted: now.UnixNano(), Origin: 5, Seen: now.Add(-2 * time.Minute)}
	fresh := providers.Sample{Name: "b", Value: 2}
	if err := s.Append([]providers.Sample{old, fresh}); err != nil {
		t.Fatal(err)
	}
	var got []providers.Sample
	if err := s.Snapshot(1, func(b []providers.Sample) error { got = append(got, b...); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "b" || got[0].Accepted != now.UnixNano() || !got[0].Seen.Equal(now) || !got[0].Timestamp.Equal(now) {
		t.Errorf("snapshot = %+v, want only b, stamped and seen now (a was last received past the TTL)", got)
	}
}
