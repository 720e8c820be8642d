package version

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoRoot is the repository, from this package's directory.
const repoRoot = "../../.."

// releaseVersion is the Makefile's VERSION, the release version's one source.
func releaseVersion(t *testing.T) string {
	t.Helper()
	mk, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^VERSION \?= (\S+)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("Makefile: no `VERSION ?= ...` line")
	}
	return string(m[1])
}

// TestManifestsUseReleaseVersion: every image of ours that manifests/ deploys
// is the one `make images` builds, and a chart's appVersion is the release.
func TestManifestsUseReleaseVersion(t *testing.T) {
	t.Parallel()
	version := releaseVersion(t)
	imageLine := regexp.MustCompile(`^\s*(?:-\s*)?image:\s*"?([^"\s]+)"?`)
	ours := regexp.MustCompile(`^(?:[^/]+/)?metricscale/`)
	want := map[string]bool{
		"ghcr.io/metricscale/adapter:" + version:    false,
		"ghcr.io/metricscale/autoscaler:" + version: false,
	}
	err := filepath.WalkDir(filepath.Join(repoRoot, "manifests"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if ext := filepath.Ext(path); ext != ".yaml" && ext != ".yml" {
			return nil
		}
		body, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		for i, line := range strings.Split(string(body), "\n") {
			if d.Name() == "Chart.yaml" {
				if v, ok := strings.CutPrefix(line, "appVersion:"); ok {
					if v = strings.Trim(strings.TrimSpace(v), `"'`); v != version {
						t.Errorf("%s:%d: appVersion %q, want the Makefile's VERSION %q", rel, i+1, v, version)
					}
				}
			}
			m := imageLine.FindStringSubmatch(line)
			if m == nil || strings.Contains(line, "{{") || !ours.MatchString(m[1]) {
				continue // a templated (chart) or third-party image
			}
			if _, ok := want[m[1]]; !ok {
				t.Errorf("%s:%d: image %s, want one of the images `make images` builds: ghcr.io/metricscale/{adapter,autoscaler}:%s", rel, i+1, m[1], version)
				continue
			}
			want[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for ref, seen := range want {
		if !seen {
			t.Errorf("no manifest under manifests/ deploys %s", ref)
		}
	}
}
