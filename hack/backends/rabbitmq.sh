#!/usr/bin/env bash
# hack/backends/rabbitmq.sh — the local RabbitMQ the queue e2e and demo read through the
# adapter's rabbitmq provider (hack/backends/rabbitmq.yaml).
#
#   hack/backends/rabbitmq.sh install          # Debian's rabbitmq-server package if missing (root)
#   hack/backends/rabbitmq.sh start DIR        # start it on 127.0.0.1 (AMQP 15673, management 15674)
#   hack/backends/rabbitmq.sh stop DIR         # stop it (an outage, or at `down`), keep the data
#   hack/backends/rabbitmq.sh env [DIR]        # eval "$(hack/backends/rabbitmq.sh env DIR)"
#   hack/backends/rabbitmq.sh ctl DIR ARGS...  # rabbitmqctl against this node
#
# `start` is idempotent: it writes the config under DIR/rabbitmq (data in mnesia/, logs in
# log/, the Erlang cookie in .erlang.cookie: HOME is DIR/rabbitmq), starts the node
# metricscale@localhost with the management plugin when it does not run, waits until it
# answers (up to 90s), and makes sure of two users, whose passwords it writes once under
# DIR/rabbitmq (mode 0600):
#   - metricscale (DIR/rabbitmq/password): the adapter's, least privilege — tag monitoring
#     (reads the management API) and, on vhost /, permissions '^$' '^$' '^$': access to the
#     vhost for the AMQP passive declare, no right on any resource
#     (providers/rabbitmq/README.md);
#   - metricscale-e2e (DIR/rabbitmq/e2e-password): the tests' and the demo's, every right on
#     vhost / and tag management (it declares the durable queue e2e-jobs at start).
# guest is deleted. Management statistics are collected every 500 ms and kept at 1 s
# granularity (the defaults, 5 s, make counts up to ~10 s old), so the adapter sees a
# publish within about a second.
#
# Ports, all on 127.0.0.1: AMQP 15673, management 15674, Erlang distribution 25673, and the
# node's own epmd on 25674 (not the system's 4369), which `stop` ends with the node.
#
# Environment: METRICSCALE_RABBITMQ_BIN (the scripts' directory, default
# /usr/lib/rabbitmq/bin), METRICSCALE_CLUSTER_DIR and METRICSCALE_CACHE (as for
# hack/cluster.sh: the default DIR of `env`).
set -euo pipefail

AMQP_PORT=15673
MANAGEMENT_PORT=15674
DIST_PORT=25673
EPMD_PORT=25674
NODE=metricscale@localhost
RMQ_USER=metricscale
E2E_USER=metricscale-e2e
E2E_QUEUE=e2e-jobs
WAIT_SECONDS=90

BIN=${METRICSCALE_RABBITMQ_BIN:-/usr/lib/rabbitmq/bin}
CACHE_ROOT=${METRICSCALE_CACHE:-${XDG_CACHE_HOME:-${HOME:?neither HOME nor XDG_CACHE_HOME is set}/.cache}/metricscale}

# the helpers the backends share: log, die, sq, apt_install, new_password, wait_until...
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# ---------------------------------------------------------------- install

cmd_install() {
  [[ -x $BIN/rabbitmq-server && -x $BIN/rabbitmqctl ]] && return 0
  local rc=0
  apt_install rabbitmq-server "$BIN/rabbitmq-server" || rc=$? # (its service would take port 5672)
  apt_installed rabbitmq-server "$rc" "$BIN/rabbitmq-server" "$BIN/rabbitmqctl"
  log "    installed rabbitmq-server $(dpkg-query -W -f='${Version}' rabbitmq-server 2>/dev/null || echo '(version unknown)')"
}

# ---------------------------------------------------------------- layout

set_dir() {
  local dir=${1:-}
  [[ -n $dir ]] || die "usage: $0 $CMD DIR"
  case $dir in /*) ;; *) dir=$PWD/$dir ;; esac
  DIR=${dir%/}
  RDIR=$DIR/rabbitmq
  LOGDIR=$RDIR/log
  PIDFILE=$RDIR/rabbitmq.pid
  SERVER_LOG=$LOGDIR/server.out
  PASSWORD_FILE=$RDIR/password
  E2E_PASSWORD_FILE=$RDIR/e2e-password
}

# rabbit_env NAME... runs a command with this node's environment: its config files, data,
# logs, cookie (HOME) and epmd, never /etc/rabbitmq or /var/lib/rabbitmq.
rabbit_env() {
  env HOME="$RDIR" \
    RABBITMQ_NODENAME="$NODE" \
    RABBITMQ_MNESIA_BASE="$RDIR/mnesia" \
    RABBITMQ_LOG_BASE="$LOGDIR" \
    RABBITMQ_ENABLED_PLUGINS_FILE="$RDIR/enabled_plugins" \
    RABBITMQ_CONFIG_FILE="$RDIR/rabbitmq.conf" \
    RABBITMQ_ADVANCED_CONFIG_FILE="$RDIR/advanced.config" \
    RABBITMQ_CONF_ENV_FILE="$RDIR/rabbitmq-env.conf" \
    RABBITMQ_PID_FILE="$PIDFILE" \
    ERL_EPMD_PORT="$EPMD_PORT" \
    ERL_EPMD_ADDRESS=127.0.0.1 \
    "$@"
}

ctl() { rabbit_env "$BIN/rabbitmqctl" "$@"; }

pid() { pidfile_pid "$PIDFILE" beam; }

# running: the node of this DIR runs (its pid is alive and is an Erlang VM).
running() { pid >/dev/null; }

answers() { port_open "$AMQP_PORT" && port_open "$MANAGEMENT_PORT"; }

write_config() {
  mkdir -p "$RDIR/mnesia" "$LOGDIR"
  chmod 700 "$RDIR"
  new_password "$PASSWORD_FILE"
  new_password "$E2E_PASSWORD_FILE"
  if [[ ! -s $RDIR/.erlang.cookie ]]; then
    (umask 077 && head -c 32 /dev/urandom | base64 | tr -dc 'A-Z' | head -c 20 >"$RDIR/.erlang.cookie")
    chmod 400 "$RDIR/.erlang.cookie"
  fi
  echo '[rabbitmq_management].' >"$RDIR/enabled_plugins"
  : >"$RDIR/rabbitmq-env.conf"
  cat >"$RDIR/rabbitmq.conf" <<EOF
# written by metricscale hack/backends/rabbitmq.sh start
listeners.tcp.1 = 127.0.0.1:$AMQP_PORT
management.tcp.ip = 127.0.0.1
management.tcp.port = $MANAGEMENT_PORT
distribution.listener.interface = 127.0.0.1
distribution.listener.port_range.min = $DIST_PORT
distribution.listener.port_range.max = $DIST_PORT
# counts reach the management API within about a second (default 5000)
collect_statistics_interval = 500
log.console = false
log.file.level = info
EOF
  # 1 s samples instead of 5 s: the API's counts are the latest sample
  cat >"$RDIR/advanced.config" <<'EOF'
[{rabbitmq_management_agent, [{sample_retention_policies,
   [{global, [{605, 1}]}, {basic, [{605, 1}]}, {detailed, [{10, 1}]}]}]}].
EOF
}

# ensure_user NAME PASSWORD_FILE TAGS CONF WRITE READ — the password through stdin, never on
# a command line.
ensure_user() {
  local name=$1 file=$2 tags=$3
  if ! ctl -q list_users 2>/dev/null | awk '{print $1}' | grep -qx -- "$name"; then
    ctl -q add_user "$name" <"$file" >/dev/null || die "rabbitmqctl add_user $name failed"
  else
    ctl -q change_password "$name" <"$file" >/dev/null || die "rabbitmqctl change_password $name failed"
  fi
  ctl -q set_user_tags "$name" $tags >/dev/null || die "rabbitmqctl set_user_tags $name failed"
  ctl -q set_permissions -p / "$name" "$4" "$5" "$6" >/dev/null || die "rabbitmqctl set_permissions $name failed"
}

# declare_queue — the durable e2e queue, through the management API as the e2e user, so the
# metric has a series (0) before the first publish.
declare_queue() {
  command -v curl >/dev/null 2>&1 || return 0
  printf 'user = "%s:%s"\n' "$E2E_USER" "$(cat "$E2E_PASSWORD_FILE")" |
    curl -sf -K - -X PUT -H 'content-type: application/json' -d '{"durable":true}' \
      "http://127.0.0.1:$MANAGEMENT_PORT/api/queues/%2F/$E2E_QUEUE" >/dev/null ||
    die "declaring queue $E2E_QUEUE failed"
}

# ---------------------------------------------------------------- start / stop

cmd_start() {
  set_dir "$@"
  [[ -x $BIN/rabbitmq-server ]] || die "$BIN/rabbitmq-server is missing: run $0 install (as root) first"
  if running && answers; then
    log "    RabbitMQ already runs on 127.0.0.1:$AMQP_PORT (management $MANAGEMENT_PORT, pid $(pid), data $RDIR)"
    return 0
  fi
  local fresh=false
  if ! running; then
    local p
    for p in "$AMQP_PORT" "$MANAGEMENT_PORT" "$DIST_PORT"; do
      port_open "$p" && die "port $p on 127.0.0.1 is in use by another process; RabbitMQ in $RDIR cannot start"
    done
    [[ -d $RDIR/mnesia/$NODE ]] || fresh=true
    write_config
    rm -f "$PIDFILE"
    # its own session: the node outlives this script and the caller's process group
    rabbit_env setsid "$BIN/rabbitmq-server" >>"$SERVER_LOG" 2>&1 </dev/null &
  fi
  if ! wait_until "$WAIT_SECONDS" answers || ! ctl -q await_startup --timeout 30 >/dev/null 2>&1; then
    tail -n 20 "$SERVER_LOG" >&2 || true
    die "RabbitMQ on 127.0.0.1:$AMQP_PORT does not answer after ${WAIT_SECONDS}s (logs: $LOGDIR)"
  fi
  ensure_user "$RMQ_USER" "$PASSWORD_FILE" monitoring '^$' '^$' '^$'
  ensure_user "$E2E_USER" "$E2E_PASSWORD_FILE" management '.*' '.*' '.*'
  if [[ $fresh == true ]]; then
    ctl -q delete_user guest >/dev/null 2>&1 || true
  fi
  declare_queue
  log "    RabbitMQ $(dpkg-query -W -f='${Version}' rabbitmq-server 2>/dev/null) on 127.0.0.1:$AMQP_PORT (management $MANAGEMENT_PORT), pid $(pid) (data $RDIR)"
}

cmd_stop() {
  set_dir "$@"
  if running; then
    # rabbitmqctl stop is the clean way; a signal is the fallback when the node does not answer.
    ctl -q stop >/dev/null 2>&1 || kill -TERM "$(pid)" 2>/dev/null || true
  fi
  wait_ports_closed "$WAIT_SECONDS" "$AMQP_PORT" "$MANAGEMENT_PORT" "$DIST_PORT" ||
    die "ports of RabbitMQ in $RDIR still open ${WAIT_SECONDS}s after stopping it (logs: $LOGDIR)"
  rm -f "$PIDFILE"
  # the node's own epmd (its port is this script's): it would outlive the node
  if port_open "$EPMD_PORT"; then
    ERL_EPMD_PORT=$EPMD_PORT epmd -kill >/dev/null 2>&1 || true
  fi
}

cmd_env() {
  local dir=${1:-${METRICSCALE_CLUSTER_DIR:-$CACHE_ROOT/cluster}}
  set_dir "$dir"
  echo "export METRICSCALE_RABBITMQ_AMQP_URL=amqp://127.0.0.1:$AMQP_PORT"
  echo "export METRICSCALE_RABBITMQ_MANAGEMENT_URL=http://127.0.0.1:$MANAGEMENT_PORT"
  echo "export METRICSCALE_RABBITMQ_USER=$RMQ_USER"
  echo "export METRICSCALE_RABBITMQ_PASSWORD_FILE=$(sq "$PASSWORD_FILE")"
  echo "export METRICSCALE_RABBITMQ_E2E_USER=$E2E_USER"
  echo "export METRICSCALE_RABBITMQ_E2E_PASSWORD_FILE=$(sq "$E2E_PASSWORD_FILE")"
  echo "export METRICSCALE_RABBITMQ_DIR=$(sq "$RDIR")"
}

cmd_ctl() {
  set_dir "${1:-}"
  shift
  ctl "$@"
}

usage() { sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

CMD=${1:-}
[[ $# -gt 0 ]] && shift
case $CMD in
  install) cmd_install ;;
  start) cmd_start "$@" ;;
  stop) cmd_stop "$@" ;;
  env) cmd_env "$@" ;;
  ctl) cmd_ctl "$@" ;;
  help | -h | --help) usage ;;
  '') usage >&2; exit 2 ;;
  *) usage >&2; die "unknown command: $CMD" ;;
esac
