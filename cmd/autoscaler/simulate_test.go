package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSimulate(t *testing.T) {
	t.Parallel()
	example, err := os.ReadFile("../../autoscaler/scenario/testdata/examples/01-cpu-utilization-scale-up.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const deviation = "../../autoscaler/scenario/testdata/deviations/04-scale-up-policy-over-int32.yaml"
	const policies = "../../autoscaler/scenario/testdata/examples/11-behavior-scale-up-policies.yaml"
	cases := []struct {
		name       string
		args       []string
		stdin      string
		wantCode   int
		wantOut    string
		wantNoOut  bool
		wantStderr string
	}{
		{name: "jsonl from stdin", args: []string{"-f", "-"}, stdin: string(example), wantOut: `{"at":"0s","replicas":5,"rescaled":true,"error":""`},
		{name: "table", args: []string{"-f", "-", "-o", "table"}, stdin: string(example), wantOut: "3 → 5"},
		// A scale-up policy of 2^31-1 pods: saturated by default, wrapping
		// (and blocking the scale-up) as upstream with --upstream-arithmetic.
		{name: "saturating arithmetic", args: []string{"-f", deviation}, wantOut: `{"at":"0s","replicas":10,"rescaled":true`},
		{name: "upstream arithmetic", args: []string{"-f", deviation, "--upstream-arithmetic"}, wantOut: `{"at":"0s","replicas":2,"rescaled":false`},
		{name: "malformed prints nothing on stdout", args: []string{"-f", "-"}, stdin: strings.Replace(string(example), "at: 2m", "at: later", 1),
			wantCode: 1, wantNoOut: true, wantStderr: "steps[1].at"},
		// The Pods 4 per 60s policy holds 2 → 20 at 6.
		{name: "explain table", args: []string{"-f", policies, "-o", "table", "--explain"},
			wantOut: "0s  replicas 2 → 6  [scale-up policy]\n    metric 0 External queue_messages_ready 100/10 (avg): proposes 20"},
		{name: "explain jsonl", args: []string{"-f", policies, "--explain"}, wantOut: `"explanation":{"rule":"scale-up policy","metrics":[{"name":"External queue_messages_ready","proposal":20,"rule":"average"`},
		{name: "missing file flag", args: nil, wantCode: 2, wantNoOut: true, wantStderr: "-f is required"},
		{name: "bad output", args: []string{"-f", "-", "-o", "xml"}, wantCode: 2, wantNoOut: true, wantStderr: "-o must be"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			code := simulate(context.Background(), tc.args, strings.NewReader(tc.stdin), &out, &errOut)
			checkRun(t, code, &out, &errOut, tc.wantCode, tc.wantNoOut, tc.wantOut, tc.wantStderr)
			if tc.wantCode != 0 && tc.wantStderr == "" {
				t.Fatal("a failing case must name what it expects on stderr")
			}
		})
	}
}

func TestSimulatePlot(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "plot.svg")
	var out, errOut bytes.Buffer
	code := simulate(context.Background(), []string{"-f", "../../autoscaler/scenario/testdata/examples/11-behavior-scale-up-policies.yaml", "--plot", file}, nil, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// A well-formed SVG document with a replicas line and one metric panel.
	dec := xml.NewDecoder(bytes.NewReader(data))
	var root string
	paths := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if root == "" {
				root = se.Name.Local
			}
			if se.Name.Local == "path" {
				paths++
			}
		}
	}
	if root != "svg" || paths != 4 {
		t.Errorf("root <%s> with %d paths, want <svg> with 4 (replicas, desired, metric, target)", root, paths)
	}
	if !strings.Contains(string(data), "queue_messages_ready") {
		t.Error("the metric panel is not titled with the metric's name")
	}
}

// checkRun checks a subcommand's exit code, what it printed (nothing at
// all with wantNoOut) and its stderr: nothing when wantStderr is empty (a
// success says nothing there), else a message containing it.
func checkRun(t *testing.T, code int, out, errOut *bytes.Buffer, wantCode int, wantNoOut bool, wantOut, wantStderr string) {
	t.Helper()
	if code != wantCode {
		t.Fatalf("exit %d, want %d (stderr %q)", code, wantCode, errOut.String())
	}
	if wantNoOut && out.Len() != 0 {
		t.Errorf("stdout %q, want nothing", out.String())
	}
	if !strings.Contains(out.String(), wantOut) {
		t.Errorf("stdout %q, want it to contain %q", out.String(), wantOut)
	}
	switch {
	case wantStderr == "" && errOut.Len() != 0:
		t.Errorf("stderr %q, want nothing", errOut.String())
	case !strings.Contains(errOut.String(), wantStderr):
		t.Errorf("stderr %q, want it to contain %q", errOut.String(), wantStderr)
	}
}
