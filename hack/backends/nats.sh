#!/usr/bin/env bash
# hack/backends/nats.sh — NATS with JetStream for the local cluster's queue e2e and demo.
#
#   hack/backends/nats.sh install      # Debian's nats-server package, if missing (root)
#   hack/backends/nats.sh start DIR    # nats-server -js on 127.0.0.1:14222 (monitoring 18222)
#   hack/backends/nats.sh stop DIR     # stop it; the JetStream store is kept for the next start
#   hack/backends/nats.sh env [DIR]    # export lines: eval "$(hack/backends/nats.sh env)"
#
# Everything lives under DIR/nats: the store (store/), the log (nats.log), the pid file.
# start is idempotent (a running server is left alone) and waits until JetStream answers;
# the adapter reads it through the provider in hack/backends/nats.yaml.
#
# Environment: METRICSCALE_NATS_BIN (default: nats-server on PATH, else /usr/sbin/nats-server),
# METRICSCALE_CACHE (where install writes its log).
set -euo pipefail

PORT=14222
MONITOR_PORT=18222
HOST=127.0.0.1
READY_TIMEOUT=60
STOP_TIMEOUT=30
CACHE_ROOT=${METRICSCALE_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/metricscale}

# the helpers the backends share: log, die, apt_install, start_pidfile, stop_pidfile...
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
  sed -n '2,8p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

nats_bin() {
  if [[ -n ${METRICSCALE_NATS_BIN:-} ]]; then
    printf '%s' "$METRICSCALE_NATS_BIN"
  elif command -v nats-server >/dev/null 2>&1; then
    command -v nats-server
  else
    printf '%s' /usr/sbin/nats-server
  fi
}

# ready — JetStream is enabled and the server answers on its client port.
ready() {
  curl -fsS -m 2 -o /dev/null "http://$HOST:$MONITOR_PORT/healthz?js-enabled=true" 2>/dev/null && port_open "$PORT"
}

cmd_install() {
  local bin rc=0
  bin=$(nats_bin)
  [[ -x $bin ]] && return 0
  apt_install nats-server "$bin" || rc=$? # (its service would take port 4222)
  bin=$(nats_bin)
  apt_installed nats-server "$rc" "$bin"
  log "installed $("$bin" --version 2>&1 | head -n 1)"
}

cmd_start() {
  local dir=$1/nats bin pid
  bin=$(nats_bin)
  [[ -x $bin ]] || die "$bin is missing; run: hack/backends/nats.sh install"
  mkdir -p "$dir/store"
  if pid=$(pidfile_pid "$dir/nats.pid" nats-server); then
    log "nats-server already running (pid $pid)"
  else
    if port_open "$PORT" || port_open "$MONITOR_PORT"; then
      die "port $PORT or $MONITOR_PORT on $HOST is taken by another process"
    fi
    start_pidfile "$dir/nats.pid" "$dir/nats.out" "$bin" -a "$HOST" -p "$PORT" -m "$MONITOR_PORT" \
      -js -sd "$dir/store" -n metricscale-nats -l "$dir/nats.log"
    pid=$(<"$dir/nats.pid")
  fi
  if ! wait_started "$pid" "$READY_TIMEOUT" ready; then
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 20 "$dir/nats.log" "$dir/nats.out" >&2 2>/dev/null || true
      die "nats-server exited at start (logs in $dir)"
    fi
    tail -n 20 "$dir/nats.log" >&2 2>/dev/null || true
    die "nats-server is not ready after ${READY_TIMEOUT}s (logs in $dir)"
  fi
  log "nats-server ready on nats://$HOST:$PORT (JetStream store $dir/store, pid $pid)"
}

cmd_stop() {
  local dir=$1/nats
  stop_pidfile "$dir/nats.pid" nats-server "$PORT" "$STOP_TIMEOUT"
  log "nats-server stopped (store kept in $dir/store)"
}

cmd_env() {
  echo "export METRICSCALE_NATS_URL='nats://$HOST:$PORT'"
  echo "export METRICSCALE_NATS_MONITOR_URL='http://$HOST:$MONITOR_PORT'"
}

main() {
  [[ $# -ge 1 ]] || usage
  local action=$1
  shift
  case $action in
  install) cmd_install ;;
  start | stop)
    [[ $# -eq 1 && -n $1 ]] || die "$action needs the state folder: hack/backends/nats.sh $action DIR"
    "cmd_$action" "$1"
    ;;
  env) cmd_env ;;
  -h | --help | help) usage ;;
  *) die "unknown command '$action' (install, start DIR, stop DIR, env)" ;;
  esac
}

main "$@"
