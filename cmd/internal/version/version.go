// Package version holds the release version and commit that the image
// builds (hack/images, the Dockerfile) stamp into the binaries at link time:
//
//	-ldflags "-X github.com/metricscale/metricscale/cmd/internal/version.Version=v0.1.0
//	          -X github.com/metricscale/metricscale/cmd/internal/version.Commit=<sha>"
//
// It is deliberately not k8s.io/component-base/version: the apiserver
// derives its compatibility version from that one, and a metricscale
// version there would break the adapter's start.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is the release version; "dev" in a plain `go build`.
var Version = "dev"

// Commit is the git commit the binary was built from. When not stamped, the
// VCS revision go build recorded (if any) is reported instead.
var Commit = ""

// String is the one-line answer to --version, for example
// "metricscale-adapter v0.1.0 (commit 0123abc…, go1.26.8)".
func String(program string) string {
	return fmt.Sprintf("%s %s (commit %s, %s)", program, Version, commit(), runtime.Version())
}

func commit() string {
	if Commit != "" {
		return Commit
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}

// Requested reports whether the command line asks for the version: a
// --version flag (or --version=true) before any "--". It lets a command
// whose flags are defined elsewhere answer --version before parsing them.
func Requested(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "--version", "--version=true":
			return true
		}
	}
	return false
}
