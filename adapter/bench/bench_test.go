// Package bench measures the adapter end to end: external metric queries
// against the real adapter's secure port over loopback TLS with a bearer
// token (authenticated by delegated TokenReview against the in-process fake
// kube-apiserver, cached by the adapter as in a cluster), the memory cost of
// stored series, and the push port's ingestion throughput in each wire
// format (BenchmarkPushIngest).
//
//	go test -run '^$' -bench . -benchtime 20000x ./adapter/bench/
//
// The token is checked by the adapter's real delegated authenticator (a
// TokenReview, cached), not by a static-token shortcut. The clients run in a
// child process (this test binary re-executed, see runLoad), so the CPU the
// benchmarks report for the adapter is the adapter's alone, with the fake
// kube-apiserver that answers its reviews.
package bench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/metricscale/metricscale/adapter/internal/testenv"
	"github.com/metricscale/metricscale/providers"
	"github.com/metricscale/metricscale/providers/memory"
	"github.com/metricscale/metricscale/providers/pushformat"
)

const (
	benchSeries  = 10_000
	benchMetrics = 100 // 100 series per metric
	benchClients = 8
	benchQueries = 100 // distinct queries
)

func benchSamples(n, metrics int) []providers.Sample {
	out := make([]providers.Sample, n)
	for i := range out {
		out[i] = providers.Sample{
			Name: fmt.Sprintf("queue_depth_%d", i%metrics),
			Labels: map[string]string{
				"namespace": "default",
				"queue":     fmt.Sprintf("queue-%d", i/metrics),
				"pod":       fmt.Sprintf("worker-7d9f8c6b5-%06d", i),
			},
			Value: float64(i),
		}
	}
	return out
}

// pushedAdapter starts an adapter, quiet, holding the benchmark's series;
// both stop when b ends.
func pushedAdapter(b *testing.B) (context.Context, *testenv.Adapter) {
	klog.SetOutput(nopWriter{})
	klog.LogToStderr(false)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	a, err := testenv.Start(ctx, b.TempDir(), "--max-age=1h", "--series-ttl=1h")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(a.Stop)
	samples := benchSamples(benchSeries, benchMetrics)
	if code, msg, err := testenv.Push(ctx, a.PushURL, testenv.PushToken, "text/plain", pushformat.FormatText(samples)); err != nil || code != 204 {
		b.Fatalf("push: %d %s %v", code, msg, err)
	}
	return ctx, a
}

// BenchmarkExternalQuery: 10,000 series stored, 8 concurrent clients, each
// query an external metric with a label selector matching one series.
func BenchmarkExternalQuery(b *testing.B) {
	ctx, a := pushedAdapter(b)

	// Like 100 HPAs, each asking for its own metric and selector: the
	// adapter's delegated authorizer caches one SubjectAccessReview per
	// distinct request (the label selector is part of it), as in a cluster.
	paths := make([]string, benchQueries)
	for q := range paths {
		paths[q] = fmt.Sprintf("/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_depth_%d?labelSelector=%s",
			q%benchMetrics, url.QueryEscape(fmt.Sprintf("queue=queue-%d", (q*37)%(benchSeries/benchMetrics))))
	}
	runLoad(ctx, b, a, paths, nil)
	b.Logf("%d series: TokenReviews %d, SubjectAccessReviews %d", benchSeries, a.Fake.TokenReviews.Load(), a.Fake.AccessReviews.Load())
}

// BenchmarkExternalQueryFrontProxy is BenchmarkExternalQuery as the
// aggregator sends it: the front-proxy client certificate (verified by the
// adapter's request-header authenticator) and X-Remote-User/-Group headers.
func BenchmarkExternalQueryFrontProxy(b *testing.B) {
	ctx, a := pushedAdapter(b)
	certFile, keyFile := writeKeyPair(b, a.FrontProxy)
	paths := make([]string, benchQueries)
	for q := range paths {
		paths[q] = fmt.Sprintf("/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_depth_%d?labelSelector=%s",
			q%benchMetrics, url.QueryEscape(fmt.Sprintf("queue=queue-%d", (q*37)%(benchSeries/benchMetrics))))
	}
	runLoadSpec(ctx, b, a, paths, loadSpec{CertFile: certFile, KeyFile: keyFile,
		Header: map[string][]string{"X-Remote-User": {testenv.HPAUser}, "X-Remote-Group": {"system:serviceaccounts", "system:authenticated"}}}, nil)
}

// writeKeyPair writes a client certificate and its key as PEM files.
func writeKeyPair(b *testing.B, c tls.Certificate) (certFile, keyFile string) {
	b.Helper()
	dir := b.TempDir()
	var certPEM []byte
	for _, der := range c.Certificate {
		certPEM = append(certPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	key, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		b.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600); err != nil {
		b.Fatal(err)
	}
	return certFile, keyFile
}

// BenchmarkBytesPerSeries stores 100,000 series in a memory store and
// reports the heap growth per series. The measurement is made once whatever
// -benchtime says (b.N only repeats nothing).
func BenchmarkBytesPerSeries(b *testing.B) {
	const n = 100_000
	samples := benchSamples(n, benchMetrics)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := memory.NewStore(clock.RealClock{}, time.Hour, 0)
	for j := 0; j < n; j += 1000 {
		if err := s.Append(samples[j : j+1000]); err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if s.Len() != n {
		b.Fatalf("stored %d series", s.Len())
	}
	runtime.KeepAlive(s)
	runtime.KeepAlive(samples) // alive in both readings: not counted
	perSeries := float64(after.HeapAlloc-before.HeapAlloc) / n
	for i := 0; i < b.N; i++ {
	}
	b.ReportMetric(perSeries, "bytes/series")
	b.Logf("%.0f bytes per series at %d series (goal: at most 1024)", perSeries, n)
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }
