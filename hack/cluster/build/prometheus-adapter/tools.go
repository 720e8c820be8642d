//go:build tools

// Package tools pins the command this build module compiles, so that
// `go mod tidy` keeps its dependencies.
package tools

import _ "sigs.k8s.io/prometheus-adapter/cmd/adapter"
