package scenario

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFormatSpecIsInTheRepository checks that the format's specification
// ships with the code: docs/scenarios.md exists, names every example and
// deviation, and nothing points at a file outside the repository.
func TestFormatSpecIsInTheRepository(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/scenarios.md")
	if err != nil {
		t.Fatalf("the format spec: %v", err)
	}
	for _, dir := range []string{"examples", "deviations"} {
		files, err := filepath.Glob("testdata/" + dir + "/*.yaml")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if name := strings.TrimSuffix(filepath.Base(f), ".yaml"); !strings.Contains(string(doc), "`"+name+"`") {
				t.Errorf("docs/scenarios.md does not describe testdata/%s/%s", dir, name)
			}
		}
	}
	for _, want := range []string{"kube-controller-manager v1.37.2", "kube-controller-manager v1.36.3", "--upstream-arithmetic", "--kube-version", "hack/oracle", "## Deviations from upstream", "## Kubernetes versions"} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("docs/scenarios.md does not mention %q", want)
		}
	}
	refs, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append(refs, "../../README.md", "../../cmd/autoscaler/simulate.go") {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), "shared/scenarios") {
			t.Errorf("%s refers to shared/scenarios, which is not in the repository", f)
		}
	}
}
