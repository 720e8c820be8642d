// Command adapter is metricscale's metrics adapter: an aggregated API server
// for custom.metrics.k8s.io and external.metrics.k8s.io. See package
// adapter/app.
package main

import (
	"os"

	"github.com/metricscale/metricscale/adapter/app"
)

func main() {
	os.Exit(app.Main(os.Args[1:]))
}
