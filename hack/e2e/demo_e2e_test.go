//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestDemo runs `make demo` in its fast mode on the running cluster and
// checks the story it tells: the workers scale up during the spike, the
// queue drains, the workers scale back, and the plot is a valid SVG.
func TestDemo(t *testing.T) {
	needAutoscaler(t)
	checkDemo(t)
}

// TestDemoBackends is the same demo with the queue in a real broker
// (--backend): jobs published to it, workers consuming from it, the
// autoscaler on the metric the adapter reads from it. Redis only, to keep
// the suite within CI's time (each run is about two minutes); the others run
// with `make demo BACKEND=NAME`, and their brokers are covered by TestQueueBackends.
func TestDemoBackends(t *testing.T) {
	needAutoscaler(t)
	running, err := cluster.runningBackends()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"redis"} {
		t.Run(name, func(t *testing.T) {
			if !slices.Contains(running, name) {
				t.Fatalf("the cluster does not run the %s backend (running: %v); restart it with hack/cluster.sh down && hack/cluster.sh up", name, running)
			}
			checkDemo(t, "--backend", name)
		})
	}
}

// checkDemo runs the demo's fast pattern with extra flags and checks its
// summary and plot.
func checkDemo(t *testing.T, args ...string) {
	t.Helper()
	dir := t.TempDir()
	summaryFile := filepath.Join(dir, "summary.json")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append([]string{"run", "./hack/demo", "--fast", "--out", dir, "--summary-json", summaryFile}, args...)...)
	cmd.Dir = cluster.RepoRoot
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("the demo failed: %v\n%s", err, out.String())
	}
	t.Logf("demo output:\n%s", out.String())
	var sum struct {
		PeakDepth     int    `json:"peakDepth"`
		PeakReplicas  int32  `json:"peakReplicas"`
		FinalDepth    int    `json:"finalDepth"`
		FinalReplicas int32  `json:"finalReplicas"`
		Plot          string `json:"plot"`
	}
	data, err := os.ReadFile(summaryFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.PeakReplicas <= 1 {
		t.Errorf("replicas never rose above 1 (peak %d)", sum.PeakReplicas)
	}
	if sum.FinalReplicas >= sum.PeakReplicas {
		t.Errorf("replicas did not fall back after the spike: peak %d, final %d", sum.PeakReplicas, sum.FinalReplicas)
	}
	if sum.PeakDepth == 0 || sum.FinalDepth != 0 {
		t.Errorf("the queue did not fill and drain: peak %d, final %d", sum.PeakDepth, sum.FinalDepth)
	}
	svg, err := os.ReadFile(sum.Plot)
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(svg))
	root := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the plot %s is not well-formed XML: %v", sum.Plot, err)
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	if root != "svg" {
		t.Errorf("the plot's root element is <%s>, want <svg>", root)
	}
}
