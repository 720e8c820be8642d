#!/usr/bin/env bash
# hack/bench-controller.sh — N MetricAutoscalers next to N equivalent HPAs on the local
# cluster (default 1000 each, syncPeriod 15s, External queue metric); prints each
# controller's CPU time per reconcile and RSS, read from /proc, and reconciles from /metrics.
#
#   hack/bench-controller.sh [N] [SECONDS]
#
# Needs the whole local stack with kube-controller-manager's HPA controller
# (hack/cluster.sh up); it starts it when none runs.
set -euo pipefail
cd "$(dirname "$0")/.."
export METRICSCALE_BENCH_N=${1:-1000} METRICSCALE_BENCH_SECONDS=${2:-120}
exec go test -count=1 -tags 'e2e benchcontroller' -timeout 60m -run '^TestControllerBenchmark$' -v ./hack/e2e/
