//go:build tools

// Package tools pins the commands this build module compiles (KEDA's operator and its
// metrics server), so that `go mod tidy` keeps their dependencies.
package tools

import (
	_ "github.com/kedacore/keda/v2/cmd/adapter"
	_ "github.com/kedacore/keda/v2/cmd/operator"
)
