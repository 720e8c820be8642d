#!/usr/bin/env bash
# hack/cluster.sh — a local Kubernetes control plane for metricscale, without Docker.
#
#   hack/cluster.sh up [--nodes N] [--hpa-sync-period 15s] [--no-hpa-controller | --separate-hpa-controller]
#                      [--kubernetes-only] [--no-prometheus] [--no-backends | --backends NAME,...]
#                      [--no-record] [--no-pod-stages] [--dir DIR]
#   hack/cluster.sh down [--purge] [--dir DIR]
#   hack/cluster.sh status | env | kubectl ARGS | build | restart-autoscaler [--change-feed-url URL|none]
#   hack/cluster.sh stop-prometheus | start-prometheus | install-prometheus
#   hack/cluster.sh install-backends | stop-backend NAME | start-backend NAME
#   hack/cluster.sh help                       # all of it, with what each does
#
# The program is Go: package hack/cluster and its command hack/cluster/cmd/cluster, which
# the e2e suite and the demo import directly. This wrapper builds the command of this
# checkout into the cache (quick when nothing changed) and runs it with the same arguments.
# Environment: METRICSCALE_CLUSTER_DIR (state folder), METRICSCALE_CACHE (cache root),
# METRICSCALE_KEEP_ON_FAILURE=1 (leave components running when `up` fails).
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE_ROOT=${METRICSCALE_CACHE:-${XDG_CACHE_HOME:-${HOME:?neither HOME nor XDG_CACHE_HOME is set}/.cache}/metricscale}
command -v go >/dev/null 2>&1 || {
  echo "error: go is not on PATH; it is needed to build hack/cluster and the cluster's binaries" >&2
  exit 1
}

# One binary per checkout, so that two worktrees do not rebuild each other's.
key=$(printf '%s' "$REPO_ROOT" | sha256sum | cut -c1-12)
dir=$CACHE_ROOT/cluster-cmd/$key
mkdir -p "$dir"
build() { (cd "$REPO_ROOT" && go build -o "$dir/cluster" ./hack/cluster/cmd/cluster) >"$dir/build.log" 2>&1; }
if command -v flock >/dev/null 2>&1; then
  # fd 7 only for the build: the cluster's processes must not inherit the lock.
  (flock -w 600 7 && build) 7>"$dir/build.lock" || rc=$?
else
  build || rc=$?
fi
if [[ ${rc:-0} -ne 0 ]]; then
  cat "$dir/build.log" >&2
  echo "error: building hack/cluster/cmd/cluster failed (log: $dir/build.log)" >&2
  exit 1
fi
METRICSCALE_REPO_ROOT=$REPO_ROOT exec "$dir/cluster" "$@"
