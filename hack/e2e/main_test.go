//go:build e2e

package e2e

import (
	"os"
	"testing"
)

// cluster is the local cluster every test runs against.
var cluster *Cluster

func TestMain(m *testing.M) {
	os.Exit(RunMain(m, &cluster))
}
