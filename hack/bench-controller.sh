#!/usr/bin/env bash
# hack/bench-controller.sh — N MetricAutoscalers beside N equivalent HPAs on the local cluster
# (default 10,000 each; N/10 targets with 10 pods, the rest with 1; an External queue metric
# each), kube-controller-manager's HPA controller running alone in a second
# kube-controller-manager at the same 15s sync period. Prints, for both controllers, CPU
# seconds per 1,000 reconciles, API requests per reconcile, live heap and RSS per
# autoscaler, the pass time, the first pass after a restart and reconciles per second at
# saturation (1s periods, each controller alone), and the adapter's and apiserver's CPU, the
# host's and each component's over the steady window.
#
#   hack/bench-controller.sh [N] [SECONDS]
#
# METRICSCALE_BENCH_PROFILES=DIR also saves both controllers' CPU profiles over the steady
# window and their heap profiles after it (DIR/NAME.{cpu,heap}.pprof, for go tool pprof).
#
# Starts the cluster it needs when none runs (hack/cluster.sh up --separate-hpa-controller
# --hpa-sync-period 15s --nodes 10 --no-prometheus --no-backends --no-record --no-pod-stages:
# the autoscaler as shipped, recording off); a running cluster started
# otherwise fails the benchmark with a message saying so. At 10,000 it takes about 40 minutes
# on 2 cores, most of it creating 20,000 Deployments (7 min) and their 38,000 pods (20 min).
# kwok turns about 5 pods a second Running here, on most of a core, so a measurement that
# overlaps its work measures kwok's load: the benchmark writes each scheduled pod's status as
# kwok's pod-ready stage would (Running, Ready); neither controller reads a pod's phase for
# these metrics. Its kwok runs node stages only and no metrics-server runs (--no-pod-stages):
# with its pod stages, serving metrics-server's 10 s scrape of all 38,000 pods, kwok took 64 % of
# a core through the measurement (0 % without). METRICSCALE_BENCH_KWOK=1 leaves the pods to kwok
# (the measurement then overlaps its work); METRICSCALE_BENCH_RUNNING=1 also waits for kwok to
# make them all Running and Ready (two hours at 10,000); both start kwok with its pod stages.
set -euo pipefail
cd "$(dirname "$0")/.."
export METRICSCALE_BENCH_N=${1:-10000} METRICSCALE_BENCH_SECONDS=${2:-120}
up_args="--separate-hpa-controller --hpa-sync-period 15s --nodes 10 --no-prometheus --no-backends --no-record"
# Pods marked Running by the benchmark need no kwok pod stages (nor metrics-server).
[[ ${METRICSCALE_BENCH_KWOK:-} == 1 || ${METRICSCALE_BENCH_RUNNING:-} == 1 ]] || up_args+=" --no-pod-stages"
export METRICSCALE_E2E_UP_ARGS=${METRICSCALE_E2E_UP_ARGS:-$up_args}
exec go test -count=1 -tags 'e2e benchcontroller' -timeout 180m -run '^TestControllerBenchmark$' -v ./hack/e2e/
