package scenario

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExamplesAgreeWithUpstream replays every example and compares it with
// what kube-controller-manager v1.36 wrote for it.
func TestExamplesAgreeWithUpstream(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/examples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no examples found in testdata/examples")
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			s, err := Parse(data)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			got, err := Replay(context.Background(), s)
			if err != nil {
				t.Fatalf("replay: %v", err)
			}
			expected, err := os.ReadFile(strings.TrimSuffix(file, ".yaml") + ".expected.jsonl")
			if err != nil {
				t.Fatal(err)
			}
			want, err := ReadResults(expected)
			if err != nil {
				t.Fatalf("expected output: %v", err)
			}
			if diffs := Disagreements(s.Autoscaler.Status, got, want); len(diffs) > 0 {
				t.Errorf("disagrees with upstream:\n  %s", strings.Join(diffs, "\n  "))
			}
		})
	}
}
