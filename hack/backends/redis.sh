#!/usr/bin/env bash
# hack/backends/redis.sh — the local Redis the queue e2e and demo read through the adapter's
# redis provider (hack/backends/redis.yaml).
#
#   hack/backends/redis.sh install     # Debian's redis-server package if its binary is missing (root)
#   hack/backends/redis.sh start DIR   # start redis-server on 127.0.0.1:16379, data and logs in DIR/redis
#   hack/backends/redis.sh stop DIR    # stop it (an outage, or at `down`), keep the data
#   hack/backends/redis.sh env [DIR]   # eval "$(hack/backends/redis.sh env DIR)"
#
# `start` is idempotent: it writes DIR/redis/redis.conf, starts the server when it does not
# run, and waits until it answers. Two ACL users, whose passwords it writes once under
# DIR/redis (mode 0600; the config holds only their SHA-256):
#   - metricscale (DIR/redis/password): the adapter's, least privilege — read-only access to
#     keys (%R~*), no channels, only LLEN, XLEN, XINFO GROUPS and SCAN
#     (providers/redis/README.md);
#   - default (DIR/redis/admin-password): the tests' and the demo's, every command.
# The data is saved when the server stops (SHUTDOWN saves: `save` is configured), so a
# stop/start keeps the queues.
#
# Environment: METRICSCALE_REDIS_SERVER (default /usr/bin/redis-server),
# METRICSCALE_REDIS_CLI (default /usr/bin/redis-cli), METRICSCALE_CLUSTER_DIR and
# METRICSCALE_CACHE (as for hack/cluster.sh: the default DIR of `env`).
set -euo pipefail

REDIS_PORT=16379
REDIS_USER=metricscale
# The adapter's rights; keep in step with providers/redis/README.md.
REDIS_USER_RULES='resetkeys %R~* resetchannels -@all +llen +xlen +xinfo|groups +scan'
WAIT_SECONDS=60

SERVER_BIN=${METRICSCALE_REDIS_SERVER:-/usr/bin/redis-server}
CLI_BIN=${METRICSCALE_REDIS_CLI:-/usr/bin/redis-cli}
CACHE_ROOT=${METRICSCALE_CACHE:-${XDG_CACHE_HOME:-${HOME:?neither HOME nor XDG_CACHE_HOME is set}/.cache}/metricscale}

# the helpers the backends share: log, die, sq, apt_install, new_password, wait_until...
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# ---------------------------------------------------------------- install

cmd_install() {
  [[ -x $SERVER_BIN && -x $CLI_BIN ]] && return 0
  local rc=0
  apt_install redis-server "$SERVER_BIN" || rc=$? # (its service would take port 6379)
  apt_installed redis-server "$rc" "$SERVER_BIN" "$CLI_BIN"
  log "    installed $("$SERVER_BIN" --version)"
}

# ---------------------------------------------------------------- layout

set_dir() {
  local dir=${1:-}
  [[ -n $dir ]] || die "usage: $0 $CMD DIR"
  case $dir in /*) ;; *) dir=$PWD/$dir ;; esac
  DIR=${dir%/}
  RDIR=$DIR/redis
  DATA=$RDIR/data
  CONF=$RDIR/redis.conf
  PIDFILE=$RDIR/redis.pid
  LOGFILE=$RDIR/redis.log
  PASSWORD_FILE=$RDIR/password
  ADMIN_PASSWORD_FILE=$RDIR/admin-password
}

sha256() { printf '%s' "$(cat "$1")" | sha256sum | cut -d' ' -f1; }

# cli runs redis-cli as the default (admin) user; the password goes through the
# environment, never on a command line.
cli() { REDISCLI_AUTH=$(cat "$ADMIN_PASSWORD_FILE") "$CLI_BIN" -h 127.0.0.1 -p "$REDIS_PORT" "$@"; }

pid() { pidfile_pid "$PIDFILE" redis-server; }

# running: the server of this DIR runs (its pid is alive and is a redis-server).
running() { pid >/dev/null; }

answers() { [[ $(cli PING 2>/dev/null) == PONG ]]; }

write_config() {
  mkdir -p "$DATA"
  new_password "$PASSWORD_FILE"
  new_password "$ADMIN_PASSWORD_FILE"
  (umask 077 && cat >"$CONF.tmp" <<EOF
# written by metricscale hack/backends/redis.sh start
bind 127.0.0.1
port $REDIS_PORT
protected-mode yes
daemonize yes
pidfile "$PIDFILE"
logfile "$LOGFILE"
dir "$DATA"
# SHUTDOWN (stop) saves, so the queues survive an outage
save 60 1
appendonly no
maxmemory 256mb
user default on #$(sha256 "$ADMIN_PASSWORD_FILE") ~* &* +@all
user $REDIS_USER on #$(sha256 "$PASSWORD_FILE") $REDIS_USER_RULES
EOF
  ) && mv "$CONF.tmp" "$CONF"
}

# ---------------------------------------------------------------- start / stop

cmd_start() {
  set_dir "$@"
  [[ -x $SERVER_BIN ]] || die "$SERVER_BIN is missing: run $0 install (as root) first"
  [[ -x $CLI_BIN ]] || die "$CLI_BIN is missing: run $0 install (as root) first"
  if running && answers; then
    log "    Redis already runs on 127.0.0.1:$REDIS_PORT (pid $(pid), data $DATA)"
    return 0
  fi
  if ! running; then
    port_open "$REDIS_PORT" && die "port $REDIS_PORT on 127.0.0.1 is in use by another process; Redis in $RDIR cannot start"
    write_config
    rm -f "$PIDFILE"
    "$SERVER_BIN" "$CONF" >>"$LOGFILE" 2>&1 || {
      tail -n 20 "$LOGFILE" >&2 || true
      die "redis-server did not start (log: $LOGFILE)"
    }
  fi
  if ! wait_until "$WAIT_SECONDS" answers; then
    tail -n 20 "$LOGFILE" >&2 || true
    die "Redis on 127.0.0.1:$REDIS_PORT does not answer after ${WAIT_SECONDS}s (log: $LOGFILE)"
  fi
  log "    Redis $("$SERVER_BIN" --version | awk '{print $3}' | sed 's/^v=//') on 127.0.0.1:$REDIS_PORT, pid $(pid) (data $DATA)"
}

cmd_stop() {
  set_dir "$@"
  if running; then
    # SHUTDOWN saves the data; a signal is the fallback when the server does not answer.
    cli SHUTDOWN >/dev/null 2>&1 || kill -TERM "$(pid)" 2>/dev/null || true
  fi
  wait_ports_closed "$WAIT_SECONDS" "$REDIS_PORT" ||
    die "port $REDIS_PORT is still open ${WAIT_SECONDS}s after stopping Redis in $RDIR (log: $LOGFILE)"
  rm -f "$PIDFILE"
}

cmd_env() {
  local dir=${1:-${METRICSCALE_CLUSTER_DIR:-$CACHE_ROOT/cluster}}
  set_dir "$dir"
  echo "export METRICSCALE_REDIS_ADDR=127.0.0.1:$REDIS_PORT"
  echo "export METRICSCALE_REDIS_USER=$REDIS_USER"
  echo "export METRICSCALE_REDIS_PASSWORD_FILE=$(sq "$PASSWORD_FILE")"
  echo "export METRICSCALE_REDIS_ADMIN_PASSWORD_FILE=$(sq "$ADMIN_PASSWORD_FILE")"
  echo "export METRICSCALE_REDIS_CLI=$(sq "$CLI_BIN")"
}

usage() { sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

CMD=${1:-}
[[ $# -gt 0 ]] && shift
case $CMD in
  install) cmd_install ;;
  start) cmd_start "$@" ;;
  stop) cmd_stop "$@" ;;
  env) cmd_env "$@" ;;
  help | -h | --help) usage ;;
  '') usage >&2; exit 2 ;;
  *) usage >&2; die "unknown command: $CMD" ;;
esac
