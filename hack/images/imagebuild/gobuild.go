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
func LDFlags(version, commit string) string { return ldFlags(versionPkg, version, commit) }

// ldFlags stamps the version into pkg's Version and Commit.
func ldFlags(pkg, version, commit string) string {
	return fmt.Sprintf("-s -w -X %s.Version=%s -X %s.Commit=%s", pkg, version, pkg, commit)
}

// GoBuild builds each target's package of the main module in src.Root for
// linux/arch into dir/<target>, statically (no cgo) and without paths or VCS
// state of this machine in the binaries (-trimpath, -buildvcs=false: the
// commit is stamped by the linker flags instead). Targets stamped in the same
// package build in one go build; the released commands always do, with
// exactly LDFlags, as the Dockerfile builds them.
func GoBuild(ctx context.Context, goCmd string, src Source, version, arch, dir string, targets []string) error {
	var pkgs []string // the version packages, in the order of targets
	byPkg := map[string][]string{}
	for _, t := range targets {
		tg, ok := Targets[t]
		if !ok {
			return fmt.Errorf("unknown target %q", t)
		}
		if _, seen := byPkg[tg.VersionPkg]; !seen {
			pkgs = append(pkgs, tg.VersionPkg)
		}
		// -o dir/ names each binary after its package's directory
		if filepath.Base(tg.Package) != t {
			return fmt.Errorf("target %s: package %s must end in /%s", t, tg.Package, t)
		}
		byPkg[tg.VersionPkg] = append(byPkg[tg.VersionPkg], tg.Package)
	}
	for _, pkg := range pkgs {
		if err := goBuild(ctx, goCmd, src, ldFlags(pkg, version, src.Commit), arch, dir, byPkg[pkg]); err != nil {
			return err
		}
	}
	return nil
}

func goBuild(ctx context.Context, goCmd string, src Source, ldflags, arch, dir string, packages []string) error {
	args := append([]string{"build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", dir + string(filepath.Separator)}, packages...)
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
