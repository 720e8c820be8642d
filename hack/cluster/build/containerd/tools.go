//go:build tools

// Package tools pins the commands this build module compiles, so that
// `go mod tidy` keeps their dependencies.
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
