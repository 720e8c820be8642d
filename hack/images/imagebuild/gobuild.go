package imagebuild

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// versionPkg is where the binaries keep their version (cmd/internal/version).
const versionPkg = "github.com/metricscale/metricscale/cmd/internal/version"

// LDFlags are the linker flags of a release binary: no symbol table nor
// DWARF, and the version and commit stamped into versionPkg. The Dockerfile
// passes the same.
func LDFlags(version, commit string) string {
	return fmt.Sprintf("-s -w -X %s.Version=%s -X %s.Commit=%s", versionPkg, version, versionPkg, commit)
}

// GoBuild builds ./cmd/<target> of the main module in src.Root for
// linux/arch into dir/<target>, statically (no cgo) and without paths or VCS
// state of this machine in the binaries (-trimpath, -buildvcs=false: the
// commit is stamped by LDFlags instead).
func GoBuild(ctx context.Context, goCmd string, src Source, version, arch, dir string, targets []string) error {
	args := []string{"build", "-trimpath", "-buildvcs=false", "-ldflags", LDFlags(version, src.Commit), "-o", dir + string(filepath.Separator)}
	for _, t := range targets {
		args = append(args, "./cmd/"+t)
	}
	cmd := exec.CommandContext(ctx, goCmd, args...)
	cmd.Dir = src.Root
	// GOFLAGS is cleared so that a developer's settings (say -race or
	// -buildvcs) cannot change what the images hold.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOFLAGS=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s in %s: %w\n%s", strings.Join(args, " "), src.Root, err, out.String())
	}
	return nil
}
