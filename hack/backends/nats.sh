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

nats_bin() {
  if [[ -n ${METRICSCALE_NATS_BIN:-} ]]; then
    printf '%s' "$METRICSCALE_NATS_BIN"
  elif command -v nats-server >/dev/null 2>&1; then
    command -v nats-server
  else
    printf '%s' /usr/sbin/nats-server
  fi
}

# port_open PORT — something accepts connections on 127.0.0.1:PORT.
port_open() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

# pid_alive DIR — prints the pid of DIR's running nats-server, fails when there is none.
pid_alive() {
  local pidfile=$1/nats/nats.pid pid
  [[ -f $pidfile ]] || return 1
  pid=$(<"$pidfile")
  [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
  # a recycled pid is not our server
  [[ $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) == *nats-server* ]] || return 1
  printf '%s' "$pid"
}

# ready — JetStream is enabled and the server answers on its client port.
ready() {
  curl -fsS -m 2 -o /dev/null "http://$HOST:$MONITOR_PORT/healthz?js-enabled=true" 2>/dev/null && port_open "$PORT"
}

cmd_install() {
  local bin
  bin=$(nats_bin)
  [[ -x $bin ]] && return 0
  [[ $(id -u) == 0 ]] || die "$bin is missing; install Debian's package as root (apt-get install --no-install-recommends nats-server)"
  command -v apt-get >/dev/null 2>&1 || die "$bin is missing and there is no apt-get to install it"
  local ilog=$CACHE_ROOT/install-nats.log rc=0
  mkdir -p "$CACHE_ROOT"
  log "installing Debian's nats-server package (apt-get; log $ilog)"
  # The package ships a service its postinst may try to start: without systemd that can fail,
  # and a running service would take port 4222. A policy-rc.d that forbids starting services
  # (exit 101) prevents both; one that already exists is left alone.
  (
    policy=/usr/sbin/policy-rc.d
    if [[ ! -e $policy ]]; then
      trap 'rm -f "$policy"' EXIT
      printf '#!/bin/sh\n# written by metricscale hack/backends/nats.sh while installing nats-server\nexit 101\n' >"$policy"
      chmod 755 "$policy"
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=300 update &&
      apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends nats-server
  ) >"$ilog" 2>&1 || rc=$?
  bin=$(nats_bin)
  if [[ ! -x $bin ]]; then
    tail -n 20 "$ilog" >&2
    die "installing nats-server failed (apt-get exit code $rc; full log: $ilog)"
  fi
  [[ $rc -eq 0 ]] || warn "apt-get exited with $rc while installing nats-server, but $bin is there (see $ilog)"
  log "installed $("$bin" --version 2>&1 | head -n 1)"
}

cmd_start() {
  local dir=$1/nats bin pid
  bin=$(nats_bin)
  [[ -x $bin ]] || die "$bin is missing; run: hack/backends/nats.sh install"
  mkdir -p "$dir/store"
  if pid=$(pid_alive "$1"); then
    log "nats-server already running (pid $pid)"
  else
    if port_open "$PORT" || port_open "$MONITOR_PORT"; then
      die "port $PORT or $MONITOR_PORT on $HOST is taken by another process"
    fi
    # setsid: the server outlives this script and the caller's process group
    setsid "$bin" -a "$HOST" -p "$PORT" -m "$MONITOR_PORT" -js -sd "$dir/store" \
      -n metricscale-nats -l "$dir/nats.log" </dev/null >>"$dir/nats.out" 2>&1 &
    pid=$!
    printf '%s\n' "$pid" >"$dir/nats.pid"
  fi
  local deadline=$((SECONDS + READY_TIMEOUT))
  until ready; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 20 "$dir/nats.log" "$dir/nats.out" >&2 2>/dev/null || true
      die "nats-server exited at start (logs in $dir)"
    fi
    if ((SECONDS >= deadline)); then
      tail -n 20 "$dir/nats.log" >&2 2>/dev/null || true
      die "nats-server is not ready after ${READY_TIMEOUT}s (logs in $dir)"
    fi
    sleep 0.2
  done
  log "nats-server ready on nats://$HOST:$PORT (JetStream store $dir/store, pid $pid)"
}

cmd_stop() {
  local dir=$1/nats pid
  if pid=$(pid_alive "$1"); then
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + STOP_TIMEOUT))
    while kill -0 "$pid" 2>/dev/null; do
      if ((SECONDS >= deadline)); then
        warn "nats-server (pid $pid) did not stop in ${STOP_TIMEOUT}s; killing it"
        kill -KILL "$pid" 2>/dev/null || true
      fi
      sleep 0.1
    done
  fi
  rm -f "$dir/nats.pid"
  local deadline=$((SECONDS + STOP_TIMEOUT))
  while port_open "$PORT"; do
    ((SECONDS < deadline)) || die "port $PORT is still open after stopping nats-server"
    sleep 0.1
  done
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
