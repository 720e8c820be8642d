// Command adapter is metricscale's metrics adapter: an aggregated API server
// for custom.metrics.k8s.io and external.metrics.k8s.io. See package
// adapter/app.
package main

import (
	"fmt"
	"os"

	"github.com/metricscale/metricscale/adapter/app"
	"github.com/metricscale/metricscale/cmd/internal/version"
)

func main() {
	// --version is answered here: the serving flags are defined in adapter/app.
	if version.Requested(os.Args[1:]) {
		fmt.Println(version.String("metricscale-adapter"))
		return
	}
	os.Exit(app.Main(os.Args[1:]))
}
