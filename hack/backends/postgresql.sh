#!/usr/bin/env bash
# hack/backends/postgresql.sh — the local PostgreSQL the queue e2e and demo read through the
# adapter's postgresql provider (hack/backends/postgresql.yaml).
#
#   hack/backends/postgresql.sh install     # Debian's postgresql package if its binaries are missing (root)
#   hack/backends/postgresql.sh start DIR   # initdb once under DIR/postgresql, start on 127.0.0.1:15432
#   hack/backends/postgresql.sh stop DIR    # stop it (an outage, or at `down`), keep the data
#   hack/backends/postgresql.sh env [DIR]   # eval "$(hack/backends/postgresql.sh env DIR)"
#
# `start` is idempotent: it initializes the data once, starts the server when it does not run,
# and (re)applies the schema: database e2e, table jobs(id serial, queue text, state text), and
# two roles whose passwords it writes under DIR/postgresql (mode 0600):
#   - metricscale (DIR/postgresql/password): the adapter's, least privilege — LOGIN, CONNECT on
#     e2e, USAGE on schema public, SELECT on jobs, default_transaction_read_only on;
#   - e2e_writer (DIR/postgresql/writer-password): the tests' and the demo's, owner of jobs.
# The superuser postgres logs in only through the unix socket, which lives in the data
# directory (peer authentication: run psql as the postgres user).
#
# initdb and postgres refuse to run as root: as root, the server runs as the `postgres` system
# user the package created, and its data must be reachable by that user. When DIR is not (it
# lies under a 0700 home such as /root), the data goes to /var/tmp/metricscale-postgresql-<id>
# and DIR/postgresql/server links to it.
#
# Environment: METRICSCALE_POSTGRESQL_BIN (the server's bin directory, default the newest
# /usr/lib/postgresql/*/bin), METRICSCALE_CLUSTER_DIR and METRICSCALE_CACHE (as for
# hack/cluster.sh: the default DIR of `env`).
set -euo pipefail

PG_PORT=15432
PG_DATABASE=e2e
PG_ROLE=metricscale
PG_WRITER=e2e_writer
WAIT_SECONDS=60

CACHE_ROOT=${METRICSCALE_CACHE:-${XDG_CACHE_HOME:-${HOME:?neither HOME nor XDG_CACHE_HOME is set}/.cache}/metricscale}

# the helpers the backends share: log, die, sq, apt_install, new_password, wait_until...
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# pg_bin prints the server's bin directory (the newest installed major version).
pg_bin() {
  if [[ -n ${METRICSCALE_POSTGRESQL_BIN:-} ]]; then
    printf '%s' "$METRICSCALE_POSTGRESQL_BIN"
    return
  fi
  local d best=''
  for d in /usr/lib/postgresql/*/bin; do
    [[ -x $d/postgres ]] || continue
    if [[ -z $best ]] || [[ ${d#/usr/lib/postgresql/} > ${best#/usr/lib/postgresql/} ]]; then best=$d; fi
  done
  printf '%s' "${best:-/usr/lib/postgresql/15/bin}"
}
BIN=$(pg_bin)

# as_pg runs a server command as the postgres user when we are root (initdb and postgres
# refuse root), as ourselves otherwise.
as_pg() {
  if [[ $(id -u) == 0 ]]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# ---------------------------------------------------------------- install

cmd_install() {
  [[ -x $BIN/postgres && -x $BIN/initdb ]] && return 0
  local rc=0
  apt_install postgresql "$BIN/postgres" || rc=$? # (its service would take port 5432)
  BIN=$(pg_bin)
  apt_installed postgresql "$rc" "$BIN/postgres"
  log "    installed $("$BIN/postgres" --version)"
}

# ---------------------------------------------------------------- layout

set_dir() {
  local dir=${1:-}
  [[ -n $dir ]] || die "usage: $0 $CMD DIR"
  case $dir in /*) ;; *) dir=$PWD/$dir ;; esac
  DIR=${dir%/}
  PGDIR=$DIR/postgresql
  SERVER=$PGDIR/server # the postgres user's: data, log; a link when DIR is out of its reach
  DATA=$SERVER/data
  LOGFILE=$SERVER/postgresql.log
  resolve_server
  PASSWORD_FILE=$PGDIR/password
  WRITER_PASSWORD_FILE=$PGDIR/writer-password
}

# resolve_server follows SERVER's link: the postgres user cannot take the path through DIR.
resolve_server() {
  if [[ -L $SERVER ]]; then SERVER=$(readlink "$SERVER"); fi
  DATA=$SERVER/data
  LOGFILE=$SERVER/postgresql.log
}

# make_server_dir creates SERVER, owned by the user the server runs as.
make_server_dir() {
  mkdir -p "$PGDIR"
  [[ -e $SERVER ]] && return 0
  if [[ $(id -u) != 0 ]]; then
    mkdir -m 700 "$SERVER"
    return 0
  fi
  id postgres >/dev/null 2>&1 || die "there is no postgres user (Debian's postgresql package creates it: $0 install)"
  if runuser -u postgres -- test -x "$PGDIR"; then
    mkdir -m 700 "$SERVER"
    chown postgres:postgres "$SERVER"
  else
    local id elsewhere
    id=$(printf '%s' "$DIR" | cksum | cut -d' ' -f1)
    elsewhere=/var/tmp/metricscale-postgresql-$id
    mkdir -p -m 700 "$elsewhere"
    chown postgres:postgres "$elsewhere"
    ln -s "$elsewhere" "$SERVER"
  fi
  resolve_server
}

running() { [[ -f $DATA/postmaster.pid ]] && as_pg "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; }

# psql_super runs psql as the superuser through the socket in the data directory.
psql_super() { as_pg "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$DATA" -p "$PG_PORT" -U postgres "$@"; }

# ---------------------------------------------------------------- start / stop

cmd_start() {
  set_dir "$@"
  [[ -x $BIN/initdb ]] || die "$BIN/initdb is missing: run $0 install (as root) first"
  make_server_dir
  if [[ ! -f $DATA/PG_VERSION ]]; then
    log "    initdb $DATA"
    rm -rf "$DATA"
    if ! as_pg "$BIN/initdb" -D "$DATA" -U postgres -E UTF8 --no-locale \
      --auth-local=peer --auth-host=scram-sha-256 >"$PGDIR/initdb.log" 2>&1; then
      tail -n 20 "$PGDIR/initdb.log" >&2
      die "initdb failed (full log: $PGDIR/initdb.log)"
    fi
    # A throwaway test server: no durability needed, as little memory as possible.
    as_pg tee -a "$DATA/postgresql.conf" >/dev/null <<EOF
# written by metricscale hack/backends/postgresql.sh
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$DATA'
max_connections = 40
shared_buffers = 16MB
fsync = off
synchronous_commit = off
full_page_writes = off
EOF
  fi
  if ! running; then
    if port_open "$PG_PORT"; then
      die "port $PG_PORT on 127.0.0.1 is in use by another process; PostgreSQL in $DATA cannot start"
    fi
    if ! as_pg "$BIN/pg_ctl" -D "$DATA" -l "$LOGFILE" -w -t "$WAIT_SECONDS" start >/dev/null 2>&1; then
      tail -n 20 "$LOGFILE" >&2 || true
      die "PostgreSQL did not start within ${WAIT_SECONDS}s (log: $LOGFILE)"
    fi
  fi
  wait_until "$WAIT_SECONDS" "$BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" ||
    die "PostgreSQL on 127.0.0.1:$PG_PORT is not ready after ${WAIT_SECONDS}s (log: $LOGFILE)"
  setup_schema
  log "    PostgreSQL $("$BIN/postgres" --version | awk '{print $3}') on 127.0.0.1:$PG_PORT, database $PG_DATABASE (data $DATA)"
}

# setup_schema (re)applies the database, the table, the roles and their grants.
setup_schema() {
  new_password "$PASSWORD_FILE"
  new_password "$WRITER_PASSWORD_FILE"
  # The passwords go through stdin, never on a command line.
  {
    printf '\\set role_pw %s\n\\set writer_pw %s\n' "$(cat "$PASSWORD_FILE")" "$(cat "$WRITER_PASSWORD_FILE")"
    cat <<EOF
SELECT 'CREATE DATABASE $PG_DATABASE' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = '$PG_DATABASE')\\gexec
SELECT 'CREATE ROLE $PG_ROLE' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$PG_ROLE')\\gexec
SELECT 'CREATE ROLE $PG_WRITER' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$PG_WRITER')\\gexec
ALTER ROLE $PG_ROLE WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS CONNECTION LIMIT 10 PASSWORD :'role_pw';
ALTER ROLE $PG_ROLE SET default_transaction_read_only = on;
ALTER ROLE $PG_WRITER WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD :'writer_pw';
REVOKE ALL ON DATABASE $PG_DATABASE FROM PUBLIC;
REVOKE CONNECT ON DATABASE postgres FROM PUBLIC;
GRANT CONNECT ON DATABASE $PG_DATABASE TO $PG_ROLE, $PG_WRITER;
\\connect $PG_DATABASE
REVOKE ALL ON SCHEMA public FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO $PG_ROLE, $PG_WRITER;
CREATE TABLE IF NOT EXISTS jobs (id serial PRIMARY KEY, queue text NOT NULL, state text NOT NULL DEFAULT 'pending');
CREATE INDEX IF NOT EXISTS jobs_queue_state ON jobs (queue, state);
ALTER TABLE jobs OWNER TO $PG_WRITER;
REVOKE ALL ON jobs FROM $PG_ROLE;
GRANT SELECT ON jobs TO $PG_ROLE;
EOF
  } | psql_super -d postgres >"$PGDIR/setup.log" 2>&1 || {
    tail -n 20 "$PGDIR/setup.log" >&2
    die "setting up database $PG_DATABASE failed (full log: $PGDIR/setup.log)"
  }
}

cmd_stop() {
  set_dir "$@"
  if [[ -f $DATA/PG_VERSION ]] && running; then
    as_pg "$BIN/pg_ctl" -D "$DATA" -m fast -w -t "$WAIT_SECONDS" stop >/dev/null 2>&1 ||
      die "PostgreSQL in $DATA did not stop within ${WAIT_SECONDS}s (log: $LOGFILE)"
  fi
  wait_ports_closed "$WAIT_SECONDS" "$PG_PORT" ||
    die "port $PG_PORT is still open ${WAIT_SECONDS}s after stopping PostgreSQL in $DATA"
}

cmd_env() {
  local dir=${1:-${METRICSCALE_CLUSTER_DIR:-$CACHE_ROOT/cluster}}
  set_dir "$dir"
  echo "export METRICSCALE_POSTGRESQL_HOST=127.0.0.1"
  echo "export METRICSCALE_POSTGRESQL_PORT=$PG_PORT"
  echo "export METRICSCALE_POSTGRESQL_DATABASE=$PG_DATABASE"
  echo "export METRICSCALE_POSTGRESQL_USER=$PG_ROLE"
  echo "export METRICSCALE_POSTGRESQL_PASSWORD_FILE=$(sq "$PASSWORD_FILE")"
  echo "export METRICSCALE_POSTGRESQL_WRITER=$PG_WRITER"
  echo "export METRICSCALE_POSTGRESQL_WRITER_PASSWORD_FILE=$(sq "$WRITER_PASSWORD_FILE")"
  echo "export METRICSCALE_POSTGRESQL_PSQL=$(sq "$BIN/psql")"
  echo "export METRICSCALE_POSTGRESQL_DATA=$(sq "$DATA")"
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
