#!/usr/bin/env bash
# hack/backends/kafka.sh — a Kafka broker for the local cluster's queue e2e and demo.
#
#   hack/backends/kafka.sh install      # build hack/kfake into ~/.cache/metricscale/bin (if stale)
#   hack/backends/kafka.sh start DIR    # kfake on 127.0.0.1:19092, 3 partitions per new topic
#   hack/backends/kafka.sh stop DIR     # stop it and wait until the port is closed
#   hack/backends/kafka.sh env [DIR]    # export lines: eval "$(hack/backends/kafka.sh env)"
#
# No Kafka broker is packaged for Debian here, so the broker is franz-go's kfake (the fake
# cluster of the client the adapter uses, speaking the real wire protocol) run as a process
# by hack/kfake. It keeps everything in memory: a stop loses every topic, record and
# committed offset, and a start begins with an empty cluster.
# Everything lives under DIR/kafka: the log (kfake.log) and the pid file. start is idempotent
# (a running broker is left alone) and waits until it says ready and accepts connections; the
# adapter reads it through the provider in hack/backends/kafka.yaml.
#
# Environment: METRICSCALE_CACHE (cache root; the binary is METRICSCALE_CACHE/bin/kfake).
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PORT=19092
HOST=127.0.0.1
PARTITIONS=3
READY_TIMEOUT=60
STOP_TIMEOUT=30
CACHE_ROOT=${METRICSCALE_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/metricscale}
BIN=$CACHE_ROOT/bin/kfake

# the helpers the backends share: log, die, start_pidfile, stop_pidfile...
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
  sed -n '2,8p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# ready DIR — the broker of DIR said it is ready (in this run's log) and accepts connections.
ready() { port_open "$PORT" && grep -q '^ready' "$1/kafka/kfake.log" 2>/dev/null; }

# stale — the binary is missing or older than a source it is built from (hack/kfake, go.mod,
# go.sum: the kfake version).
stale() {
  [[ -x $BIN ]] || return 0
  [[ -n $(find "$REPO_ROOT/hack/kfake" "$REPO_ROOT/go.mod" "$REPO_ROOT/go.sum" -newer "$BIN" -print -quit) ]]
}

cmd_install() {
  stale || return 0
  command -v go >/dev/null 2>&1 || die "go is not on PATH: it builds $BIN from hack/kfake"
  mkdir -p "$(dirname "$BIN")"
  log "building $BIN from hack/kfake"
  # build to a temporary name, so a failed build leaves no half-written binary
  (cd "$REPO_ROOT" && go build -o "$BIN.tmp" ./hack/kfake) || die "go build ./hack/kfake failed"
  mv -f "$BIN.tmp" "$BIN"
}

cmd_start() {
  local dir=$1/kafka pid
  [[ -x $BIN ]] || die "$BIN is missing; run: hack/backends/kafka.sh install"
  mkdir -p "$dir"
  if pid=$(pidfile_pid "$dir/kfake.pid" kfake); then
    log "kfake already running (pid $pid)"
  else
    if port_open "$PORT"; then
      die "port $PORT on $HOST is taken by another process"
    fi
    # a fresh log: the readiness check below looks for this run's "ready" line
    [[ -f $dir/kfake.log ]] && mv -f "$dir/kfake.log" "$dir/kfake.log.prev"
    start_pidfile "$dir/kfake.pid" "$dir/kfake.log" "$BIN" -port "$PORT" -partitions "$PARTITIONS"
    pid=$(<"$dir/kfake.pid")
  fi
  if ! wait_started "$pid" "$READY_TIMEOUT" ready "$1"; then
    tail -n 20 "$dir/kfake.log" >&2 2>/dev/null || true
    if ! kill -0 "$pid" 2>/dev/null; then
      rm -f "$dir/kfake.pid"
      die "kfake exited at start (log $dir/kfake.log)"
    fi
    die "kfake is not ready after ${READY_TIMEOUT}s (log $dir/kfake.log)"
  fi
  log "kfake ready on $HOST:$PORT (in memory: empty after every start; pid $pid)"
}

cmd_stop() {
  stop_pidfile "$1/kafka/kfake.pid" kfake "$PORT" "$STOP_TIMEOUT"
  log "kfake stopped (its topics and offsets are gone)"
}

cmd_env() {
  echo "export METRICSCALE_KAFKA_BROKERS='$HOST:$PORT'"
}

main() {
  [[ $# -ge 1 ]] || usage
  local action=$1
  shift
  case $action in
  install) cmd_install ;;
  start | stop)
    [[ $# -eq 1 && -n $1 ]] || die "$action needs the state folder: hack/backends/kafka.sh $action DIR"
    "cmd_$action" "$1"
    ;;
  env) cmd_env ;;
  -h | --help | help) usage ;;
  *) die "unknown command '$action' (install, start DIR, stop DIR, env)" ;;
  esac
}

main "$@"
