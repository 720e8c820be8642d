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

log() { printf '%s\n' "$*"; }
warn() { printf 'warning: %s\n' "$*" >&2; }
die() {
  printf 'error: %s\n' "$*" >&2
  exit 1
}
usage() {
  sed -n '2,8p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# port_open PORT — something accepts connections on 127.0.0.1:PORT.
port_open() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

# pid_alive DIR — prints the pid of DIR's running kfake, fails when there is none.
pid_alive() {
  local pidfile=$1/kafka/kfake.pid pid
  [[ -f $pidfile ]] || return 1
  pid=$(<"$pidfile")
  [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
  # a recycled pid is not our broker
  [[ $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) == *kfake* ]] || return 1
  printf '%s' "$pid"
}

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
  if pid=$(pid_alive "$1"); then
    log "kfake already running (pid $pid)"
  else
    if port_open "$PORT"; then
      die "port $PORT on $HOST is taken by another process"
    fi
    # a fresh log: the readiness check below looks for this run's "ready" line
    [[ -f $dir/kfake.log ]] && mv -f "$dir/kfake.log" "$dir/kfake.log.prev"
    # setsid: the broker outlives this script and the caller's process group
    setsid "$BIN" -port "$PORT" -partitions "$PARTITIONS" </dev/null >>"$dir/kfake.log" 2>&1 &
    pid=$!
    printf '%s\n' "$pid" >"$dir/kfake.pid"
  fi
  local deadline=$((SECONDS + READY_TIMEOUT))
  until port_open "$PORT" && grep -q '^ready' "$dir/kfake.log" 2>/dev/null; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 20 "$dir/kfake.log" >&2 2>/dev/null || true
      rm -f "$dir/kfake.pid"
      die "kfake exited at start (log $dir/kfake.log)"
    fi
    if ((SECONDS >= deadline)); then
      tail -n 20 "$dir/kfake.log" >&2 2>/dev/null || true
      die "kfake is not ready after ${READY_TIMEOUT}s (log $dir/kfake.log)"
    fi
    sleep 0.1
  done
  log "kfake ready on $HOST:$PORT (in memory: empty after every start; pid $pid)"
}

cmd_stop() {
  local dir=$1/kafka pid
  if pid=$(pid_alive "$1"); then
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + STOP_TIMEOUT))
    while kill -0 "$pid" 2>/dev/null; do
      if ((SECONDS >= deadline)); then
        warn "kfake (pid $pid) did not stop in ${STOP_TIMEOUT}s; killing it"
        kill -KILL "$pid" 2>/dev/null || true
      fi
      sleep 0.1
    done
  fi
  rm -f "$dir/kfake.pid"
  local deadline=$((SECONDS + STOP_TIMEOUT))
  while port_open "$PORT"; do
    ((SECONDS < deadline)) || die "port $PORT is still open after stopping kfake"
    sleep 0.1
  done
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
