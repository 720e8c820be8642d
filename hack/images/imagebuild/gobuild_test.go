package imagebuild

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// GoBuild builds the released commands in one go build with exactly LDFlags
// (as the Dockerfile does) and the worker apart, stamped in its main package.
func TestGoBuildStampsEachTarget(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	fakeGo := filepath.Join(dir, "go")
	script := "#!/bin/sh\nprintf '%s|' \"$@\" >> " + calls + "\necho >> " + calls + "\n"
	if err := os.WriteFile(fakeGo, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	src := Source{Root: dir, Commit: "c0ffee"}
	if err := GoBuild(context.Background(), fakeGo, src, "v9", "amd64", "/out", []string{"worker", "adapter", "autoscaler"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	common := "build|-trimpath|-buildvcs=false|-ldflags|"
	want := common + "-s -w -X main.Version=v9 -X main.Commit=c0ffee|-o|/out/|./hack/worker|\n" +
		common + LDFlags("v9", "c0ffee") + "|-o|/out/|./cmd/adapter|./cmd/autoscaler|\n"
	if string(b) != want {
		t.Errorf("go invocations:\n%s\nwant:\n%s", b, want)
	}
	if err := GoBuild(context.Background(), fakeGo, src, "v9", "amd64", "/out", []string{"kubelet"}); err == nil || !strings.Contains(err.Error(), `unknown target "kubelet"`) {
		t.Errorf("an unknown target: %v", err)
	}
}
