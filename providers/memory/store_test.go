package memory

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/metricscale/metricscale/providers"
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
