// Build-only module for the local cluster's real node (--real-node): the program of its
// pod sandbox image (what the "pause" image does). Standard library only.
module github.com/metricscale/metricscale/hack/cluster/build/sandbox

go 1.26.0
