# shellcheck shell=bash
# hack/backends/lib.sh — what the queue-backend scripts hack/backends/NAME.sh share. Each one
# sources it (source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"); it is not a backend itself
# (hack/cluster.sh runs a NAME.sh only when a NAME.yaml lies next to it).
#
# The scripts set CACHE_ROOT (where apt_install writes its log) before they use apt_install.

# BACKEND is the sourcing script's name: redis for hack/backends/redis.sh.
BACKEND=$(basename "${BASH_SOURCE[1]}" .sh)

# ---------------------------------------------------------------- messages

if [[ -t 1 ]]; then RED=$'\e[31m' RESET=$'\e[0m'; else RED='' RESET=''; fi
log() { printf '%s\n' "$*"; }
warn() { printf 'warning: %s\n' "$*" >&2; }
die() {
  printf '%serror:%s %s\n' "$RED" "$RESET" "$*" >&2
  exit 1
}

# sq WORD prints WORD single-quoted for a shell (the env lines).
sq() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

# ---------------------------------------------------------------- install

# apt_install PACKAGE BINARY — installs Debian's PACKAGE with apt-get, as root, because BINARY
# (which the messages name) is missing; the output goes to CACHE_ROOT/install-BACKEND.log.
# The package's postinst would start its service, which takes the package's default port
# (and without systemd can fail): a temporary /usr/sbin/policy-rc.d that forbids starting
# services (exit 101) prevents that; one that already exists is left alone.
# Returns apt-get's exit code: hand it to apt_installed.
apt_install() {
  local package=$1 binary=$2 ilog=$CACHE_ROOT/install-$BACKEND.log
  [[ $(id -u) == 0 ]] || die "$binary is missing; install Debian's package as root (apt-get install --no-install-recommends $package)"
  command -v apt-get >/dev/null 2>&1 || die "$binary is missing and there is no apt-get to install it"
  mkdir -p "$CACHE_ROOT"
  log "    installing Debian's $package package (apt-get; log $ilog)"
  (
    policy=/usr/sbin/policy-rc.d
    if [[ ! -e $policy ]]; then
      trap 'rm -f "$policy"' EXIT
      printf '#!/bin/sh\n# written by metricscale hack/backends/%s.sh while installing %s\nexit 101\n' "$BACKEND" "$package" >"$policy"
      chmod 755 "$policy"
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=300 update &&
      apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends "$package"
  ) >"$ilog" 2>&1
}

# apt_installed PACKAGE RC BINARY... — after apt_install PACKAGE (exit code RC): dies, with the
# log's tail, when a BINARY is still missing. A package script that failed only at starting
# the service leaves the binaries usable: then it only warns.
apt_installed() {
  local package=$1 rc=$2 ilog=$CACHE_ROOT/install-$BACKEND.log b
  shift 2
  for b in "$@"; do
    if [[ ! -x $b ]]; then
      tail -n 20 "$ilog" >&2
      die "installing $package failed (apt-get exit code $rc; full log: $ilog)"
    fi
  done
  [[ $rc -eq 0 ]] || warn "apt-get exited with $rc while installing $package, but $1 is there (see $ilog)"
}

# new_password FILE — writes a random password (24 letters and digits, mode 0600) to FILE,
# once: an existing one is kept.
new_password() {
  local f=$1
  [[ -s $f ]] && return 0
  (umask 077 && head -c 32 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 24 >"$f.tmp") && mv "$f.tmp" "$f"
}

# ---------------------------------------------------------------- ports

# port_open PORT — something accepts connections on 127.0.0.1:PORT.
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# ports_closed PORT... — nothing accepts connections on any of them.
ports_closed() {
  local p
  for p in "$@"; do
    ! port_open "$p" || return 1
  done
}

# wait_until SECONDS CHECK... — runs CHECK every 0.1 s until it succeeds; fails after SECONDS.
wait_until() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
}

# wait_ports_closed SECONDS PORT... — until every PORT is closed; fails after SECONDS.
wait_ports_closed() { wait_until "$1" ports_closed "${@:2}"; }

# ---------------------------------------------------------------- processes with a pid file

# pidfile_pid PIDFILE NAME — prints the pid in PIDFILE when that process is alive and runs NAME
# (its command line holds NAME: a recycled pid is not ours); fails otherwise.
pidfile_pid() {
  local pidfile=$1 name=$2 pid
  [[ -s $pidfile ]] || return 1
  pid=$(<"$pidfile")
  [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
  [[ $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) == *"$name"* ]] || return 1
  printf '%s' "$pid"
}

# start_pidfile PIDFILE OUT COMMAND... — starts COMMAND in the background in its own session
# (setsid: it outlives this script and the caller's process group), input /dev/null, output
# appended to OUT, and writes its pid to PIDFILE.
start_pidfile() {
  local pidfile=$1 out=$2
  shift 2
  setsid "$@" </dev/null >>"$out" 2>&1 &
  printf '%s\n' "$!" >"$pidfile"
}

# wait_started PID SECONDS CHECK... — runs CHECK every 0.1 s until it succeeds; fails when the
# process PID exits first (kill -0 tells) or after SECONDS.
wait_started() {
  local pid=$1 deadline=$((SECONDS + $2))
  shift 2
  until "$@"; do
    kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
}

# stop_pidfile PIDFILE NAME PORT SECONDS — stops the NAME process of PIDFILE if it runs (TERM,
# then KILL with a warning when it is still there after SECONDS), removes PIDFILE, and waits
# until PORT is closed (SECONDS more at most).
stop_pidfile() {
  local pidfile=$1 name=$2 port=$3 seconds=$4 pid deadline
  if pid=$(pidfile_pid "$pidfile" "$name"); then
    kill -TERM "$pid" 2>/dev/null || true
    deadline=$((SECONDS + seconds))
    while kill -0 "$pid" 2>/dev/null; do
      if ((SECONDS >= deadline)); then
        warn "$name (pid $pid) did not stop in ${seconds}s; killing it"
        kill -KILL "$pid" 2>/dev/null || true
      fi
      sleep 0.1
    done
  fi
  rm -f "$pidfile"
  wait_ports_closed "$seconds" "$port" || die "port $port is still open after stopping $name"
}
