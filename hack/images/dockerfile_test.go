package main

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/metricscale/metricscale/hack/images/imagebuild"
)

// TestDockerfile keeps the Dockerfile, which cannot be built here (no
// container engine), in step with what `make images` builds.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	dockerfile := string(b)
	// printf's escape of a file body.
	printf := func(body []byte) string { return strings.ReplaceAll(string(body), "\n", `\n`) }
	base := map[string][]byte{}
	for _, f := range imagebuild.BaseFiles(nil) {
		base[f.Path] = f.Body
	}
	want := []string{
		`-ldflags "` + imagebuild.LDFlags("$VERSION", "$COMMIT") + `"`,
		"CGO_ENABLED=0",
		"-trimpath -buildvcs=false",
		"USER " + imagebuild.User,
		"/etc/ssl/certs/ca-certificates.crt /rootfs/" + imagebuild.CABundlePath,
		printf(base["etc/passwd"]) + "' > /rootfs/etc/passwd",
		printf(base["etc/group"]) + "' > /rootfs/etc/group",
		"FROM scratch AS",
	}
	var targets []string
	for target, tg := range imagebuild.Targets {
		if tg.Release { // the worker is a development image, not in the Dockerfile
			targets = append(targets, target)
		}
	}
	sort.Strings(targets)
	for _, target := range targets {
		want = append(want, "FROM scratch AS "+target+"\n", `ENTRYPOINT ["/`+target+`"]`)
	}
	want = append(want, "adapter|autoscaler)")
	for _, w := range want {
		if !strings.Contains(dockerfile, w) {
			t.Errorf("Dockerfile does not contain %q, which `make images` uses", w)
		}
	}
	if strings.Join(targets, "|") != "adapter|autoscaler" {
		t.Errorf("targets %v: update the Dockerfile's TARGET check", targets)
	}
}
