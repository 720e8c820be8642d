// Helper program for hack/cluster.sh: PKI, kubeconfigs, probes and port checks, with
// the standard library only so that a machine with nothing but Go can run the cluster.
module github.com/metricscale/metricscale/hack/cluster/build/clusterutil

go 1.26.0
