#!/usr/bin/env bash
# hack/cluster.sh — a local Kubernetes control plane for metricscale, without Docker.
#
#   hack/cluster.sh up [--nodes N] [--hpa-sync-period 15s] [--no-hpa-controller | --separate-hpa-controller]
#                      [--kubernetes-only] [--no-prometheus] [--no-backends] [--no-record] [--no-pod-stages]
#                      [--dir DIR]
#   hack/cluster.sh down [--purge] [--dir DIR]
#   hack/cluster.sh status [--dir DIR]
#   hack/cluster.sh env [--dir DIR]            # eval "$(hack/cluster.sh env)"
#   hack/cluster.sh kubectl [--dir DIR] ARGS   # kubectl against the cluster
#   hack/cluster.sh build                      # only build (or check) the cached binaries
#   hack/cluster.sh restart-autoscaler [--change-feed-url URL|none]
#                                              # stop (if running) and start the autoscaler again
#   hack/cluster.sh stop-prometheus            # stop only Prometheus (an outage, for e2e tests)
#   hack/cluster.sh start-prometheus           # start it again, with the same data
#   hack/cluster.sh install-prometheus         # install Debian's prometheus package if missing
#   hack/cluster.sh install-backends           # install (or build) every queue backend's server
#   hack/cluster.sh stop-backend NAME          # stop one queue backend (an outage, for e2e tests)
#   hack/cluster.sh start-backend NAME         # start it again, with the same data
#
# `up` builds etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok
# and metrics-server once (Go modules under hack/cluster/build, cached in
# ~/.cache/metricscale/<kubernetes version>/bin), then runs them on 127.0.0.1 with a
# generated PKI, fake kwok nodes and metrics.k8s.io. Unless --kubernetes-only, it also
# builds and runs the metricscale adapter and autoscaler from the working tree (the
# autoscaler with --hpa-objects when kube-controller-manager runs without its HPA controller;
# --separate-hpa-controller runs the HPA controller alone in a second kube-controller-manager,
# with its own lease, so that its CPU and memory are the HPA controller's: for benchmarks; the
# autoscaler subscribes to the adapter's change feed, https://127.0.0.1:6444/changes, unless
# --change-feed-url names another URL, or none; it records every MetricAutoscaler's reconciles
# for `autoscaler record` on 127.0.0.1:6449 unless --no-record).
# --no-pod-stages gives kwok its node stages only: no pod lifecycle (pods stay Pending unless
# something writes their status) and no resource metrics, so no metrics-server either. For
# benchmarks that write pod status themselves: at tens of thousands of pods, kwok with its pod
# stages and metrics-server's scrapes otherwise takes most of a core.
# Unless --no-prometheus, it also runs Prometheus (Debian's package, installed with apt-get
# when missing) scraping hack/exporter every second: series set by the tests and cAdvisor
# series of the pods on the fake nodes; the adapter then runs with hack/adapter-config.yaml
# (its memory provider for pushes, a prometheus provider for the prom_* metrics).
# Unless --no-backends, it also runs the queue backends of hack/backends (one NAME.go per
# server), each on its fixed 127.0.0.1 port, and adds each one's provider
# (hack/backends/NAME.yaml) to the adapter's config.
# Everything lives in the state folder (--dir, $METRICSCALE_CLUSTER_DIR, default
# ~/.cache/metricscale/cluster); `down` stops exactly the processes `up` started.
#
# Environment: METRICSCALE_CLUSTER_DIR (state folder), METRICSCALE_CACHE (cache root),
# METRICSCALE_KEEP_ON_FAILURE=1 (leave components running when `up` fails).
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_ROOT=$REPO_ROOT/hack/cluster/build

CACHE_ROOT=${METRICSCALE_CACHE:-${XDG_CACHE_HOME:-${HOME:?neither HOME nor XDG_CACHE_HOME is set}/.cache}/metricscale}
KUBE_VERSION=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" { print $3 }' "$BUILD_ROOT/kubernetes/go.mod")
CACHE_DIR=$CACHE_ROOT/$KUBE_VERSION
BIN=$CACHE_DIR/bin

# Ports, all on 127.0.0.1.
ETCD_PORT=2379
ETCD_PEER_PORT=2380
APISERVER_PORT=6443
KCM_PORT=10257
KCM_HPA_PORT=10258
SCHEDULER_PORT=10259
KWOK_PORT=10250
METRICS_SERVER_PORT=4443
ADAPTER_PORT=6444
PUSH_PORT=6445
AUTOSCALER_PORT=6446
AUTOSCALER_RECORD_PORT=6449
PROMETHEUS_PORT=9090
EXPORTER_PORT=9105

PROMETHEUS_BIN=${METRICSCALE_PROMETHEUS_BIN:-/usr/bin/prometheus}
BACKENDS_DIR=$REPO_ROOT/hack/backends

# Every component `up` may start; `status` lists them in this order, `down` stops them in
# the reverse order. (Prometheus starts first, to become ready while the others start.)
ALL_COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-controller-manager-hpa kube-scheduler kwok metrics-server metricscale-adapter metricscale-autoscaler exporter prometheus)

# ---------------------------------------------------------------- output helpers

if [[ -t 1 ]]; then BOLD=$'\e[1m' RED=$'\e[31m' GREEN=$'\e[32m' YELLOW=$'\e[33m' RESET=$'\e[0m'; else BOLD='' RED='' GREEN='' YELLOW='' RESET=''; fi

log() { printf '%s\n' "$*"; }
warn() { printf '%swarning:%s %s\n' "$YELLOW" "$RESET" "$*" >&2; }
die() {
  printf '%serror:%s %s\n' "$RED" "$RESET" "$*" >&2
  exit 1
}

# now_ms prints the wall clock in milliseconds.
now_ms() { local t=${EPOCHREALTIME/./}; printf '%s' $((t / 1000)); }
secs() { printf '%d.%01ds' $(($1 / 1000)) $((($1 % 1000) / 100)); }

UP_START=0
PHASE_START=0
PHASES=()
phase_begin() {
  PHASE_START=$(now_ms)
  log "${BOLD}==>${RESET} $*"
}
phase_end() {
  local d=$(($(now_ms) - PHASE_START))
  PHASES+=("$(printf '%-42s %8s' "$1" "$(secs "$d")")")
  log "    done in $(secs "$d") (at $(secs $(($(now_ms) - UP_START))))"
}

# ---------------------------------------------------------------- arguments

CMD=${1:-}
[[ $# -gt 0 ]] && shift
DIR=${METRICSCALE_CLUSTER_DIR:-$CACHE_ROOT/cluster}
NODES=1
HPA_SYNC_PERIOD=15s
HPA_CONTROLLER=true
KUBERNETES_ONLY=false
PROMETHEUS=true
BACKENDS=true
RUNNING_BACKENDS=()
PURGE=false
CHANGE_FEED_URL=""
RECORD=true
POD_STAGES=true
PASSTHROUGH=()
EXPLICIT=" " # flags given on the command line, to compare with a running cluster

need_value() { [[ $# -ge 2 && -n $2 ]] || die "$1 needs a value"; }
while [[ $# -gt 0 ]]; do
  arg=$1
  if [[ ($CMD == kubectl || $CMD == *-backend) && $arg != --* ]] || [[ $CMD == kubectl && $arg != --dir && $arg != --dir=* ]]; then
    PASSTHROUGH+=("$arg")
    shift
    continue
  fi
  case $arg in
    --*=*) set -- "${arg%%=*}" "${arg#*=}" "${@:2}"; continue ;;
    --dir) need_value "$@"; DIR=$2; shift 2 ;;
    --nodes) need_value "$@"; NODES=$2; EXPLICIT+="nodes "; shift 2 ;;
    --hpa-sync-period) need_value "$@"; HPA_SYNC_PERIOD=$2; EXPLICIT+="hpa-sync-period "; shift 2 ;;
    --no-hpa-controller) HPA_CONTROLLER=false; EXPLICIT+="no-hpa-controller "; shift ;;
    --separate-hpa-controller) HPA_CONTROLLER=separate; EXPLICIT+="separate-hpa-controller "; shift ;;
    --kubernetes-only) KUBERNETES_ONLY=true; EXPLICIT+="kubernetes-only "; shift ;;
    --no-prometheus) PROMETHEUS=false; EXPLICIT+="no-prometheus "; shift ;;
    --no-backends) BACKENDS=false; EXPLICIT+="no-backends "; shift ;;
    --no-record) RECORD=false; EXPLICIT+="no-record "; shift ;;
    --no-pod-stages) POD_STAGES=false; EXPLICIT+="no-pod-stages "; shift ;;
    --purge) PURGE=true; shift ;;
    --change-feed-url) need_value "$@"; CHANGE_FEED_URL=$2; shift 2 ;;
    -h | --help) CMD=help; shift ;;
    *) die "unknown argument: $arg (see hack/cluster.sh --help)" ;;
  esac
done
[[ $NODES =~ ^[1-9][0-9]*$ ]] || die "--nodes must be a positive integer, not '$NODES'"
[[ $HPA_SYNC_PERIOD =~ ^[0-9]+(ms|s|m)$ ]] || die "--hpa-sync-period must be a duration such as 5s or 1m, not '$HPA_SYNC_PERIOD'"
case $DIR in /*) ;; *) DIR=$PWD/$DIR ;; esac
DIR=${DIR%/}

PKI=$DIR/pki
RUN=$DIR/run
LOGS=$DIR/logs
KUBECONFIG_ADMIN=$DIR/kubeconfig
STATE_FILE=$DIR/cluster.env
KUBECTL=("$BIN/kubectl" --kubeconfig "$KUBECONFIG_ADMIN" --cache-dir "$DIR/kubectl-cache")
# KC is kubectl for this script's own calls: none may hang.
KC=("${KUBECTL[@]}" --request-timeout=30s)

# ---------------------------------------------------------------- process bookkeeping
#
# run/<name>.pid holds two lines: the pid, and the argv[0] the process was started with.
# A process is ours only when /proc/<pid>/cmdline still starts with that argv[0]: a
# recycled pid is never signalled.

pid_of() {
  local f=$RUN/$1.pid pid exe actual
  [[ -f $f ]] || return 1
  { read -r pid && read -r exe; } <"$f" || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  [[ -r /proc/$pid/cmdline ]] || return 1
  actual=$({ tr '\0' '\n' <"/proc/$pid/cmdline"; } 2>/dev/null | head -n 1) || return 1
  [[ $actual == "$exe" ]] || return 1
  printf '%s' "$pid"
}
alive() { pid_of "$1" >/dev/null; }

STARTED=()
# start NAME BINARY ARGS... — runs a component in its own session, detached from the
# caller's terminal and pipes, logging to logs/NAME.log.
start() {
  local name=$1
  shift
  local pidf=$RUN/$name.pid log=$LOGS/$name.log
  rm -f "$pidf"
  : >"$log"
  local launcher=()
  command -v setsid >/dev/null 2>&1 && launcher=(setsid)
  # The inner shell records its own pid, then execs the binary under the same pid.
  # shellcheck disable=SC2016 # expanded by the inner shell
  "${launcher[@]}" bash -c 'printf "%s\n%s\n" "$$" "$1" >"$0.tmp" && mv "$0.tmp" "$0" && exec "$@"' \
    "$pidf" "$@" </dev/null >>"$log" 2>&1 8>&- 9>&- &
  local i
  for ((i = 0; i < 50; i++)); do
    [[ -s $pidf ]] && break
    sleep 0.1
  done
  [[ -s $pidf ]] || die "$name did not start (no pid file $pidf); see $log"
  STARTED+=("$name")
  log "    started $name (pid $(head -n 1 "$pidf"), log $log)"
}

# stop NAME — SIGTERM, then SIGKILL after a grace period; waits until the process is gone.
stop() {
  local name=$1 pid i
  if ! pid=$(pid_of "$name"); then
    rm -f "$RUN/$name.pid"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 150; i++)); do
    alive "$name" || break
    sleep 0.1
  done
  if alive "$name"; then
    warn "$name (pid $pid) did not exit within 15s of SIGTERM; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
      alive "$name" || break
      sleep 0.1
    done
    alive "$name" && die "$name (pid $pid) is still running after SIGKILL"
  fi
  rm -f "$RUN/$name.pid"
  log "    stopped $name (pid $pid)"
}

show_log_tail() {
  local name=$1 log=$LOGS/$1.log
  if [[ -s $log ]]; then
    printf '%s--- last lines of %s ---%s\n' "$BOLD" "$log" "$RESET" >&2
    tail -n 25 "$log" >&2
    printf '%s--- end of %s ---%s\n' "$BOLD" "$log" "$RESET" >&2
  fi
}

# fail_component NAME MESSAGE — prints the message and the component's log tail, then exits.
fail_component() {
  show_log_tail "$1"
  die "$2 (full log: $LOGS/$1.log)"
}

# wait_healthy NAME TIMEOUT_SECONDS WHAT COMMAND... — polls COMMAND until it succeeds;
# fails early when the component's process exits.
wait_healthy() {
  local name=$1 timeout=$2 what=$3
  shift 3
  local deadline=$(($(now_ms) + timeout * 1000)) out=''
  while true; do
    if out=$("$@" 2>&1); then return 0; fi
    if [[ -f $RUN/$name.pid ]] && ! alive "$name"; then
      fail_component "$name" "$name exited while waiting for it to become $what"
    fi
    if (($(now_ms) > deadline)); then
      [[ -n $out ]] && printf 'last check said: %s\n' "$(tail -n 3 <<<"$out")" >&2
      fail_component "$name" "$name did not become $what within ${timeout}s"
    fi
    sleep 0.3
  done
}

probe() { "$BIN/clusterutil" probe -q "$@"; }

# hpa_controller_mode MODE [SYNC_PERIOD] — how kube-controller-manager's HPA controller runs, for logs.
hpa_controller_mode() {
  case $1 in
    true) echo "on, sync period ${2:-$HPA_SYNC_PERIOD}" ;;
    separate) echo "alone in kube-controller-manager-hpa, sync period ${2:-$HPA_SYNC_PERIOD}" ;;
    *) echo off ;;
  esac
}
probe_apiserver() { probe -ca "$PKI/ca.crt" -cert "$PKI/admin.crt" -key "$PKI/admin.key" "https://127.0.0.1:$APISERVER_PORT$1"; }

# health NAME — one quick health check of a component.
health() {
  case $1 in
    etcd) probe "http://127.0.0.1:$ETCD_PORT/health" ;;
    kube-apiserver) probe_apiserver /readyz ;;
    kube-controller-manager) probe -insecure "https://127.0.0.1:$KCM_PORT/healthz" ;;
    kube-controller-manager-hpa) probe -insecure "https://127.0.0.1:$KCM_HPA_PORT/healthz" ;;
    kube-scheduler) probe -insecure "https://127.0.0.1:$SCHEDULER_PORT/healthz" ;;
    kwok) probe -insecure "https://127.0.0.1:$KWOK_PORT/healthz" ;;
    metrics-server) probe -insecure "https://127.0.0.1:$METRICS_SERVER_PORT/readyz" ;;
    metricscale-adapter) probe -insecure "https://127.0.0.1:$ADAPTER_PORT/healthz" ;;
    metricscale-autoscaler) probe "http://127.0.0.1:$AUTOSCALER_PORT/readyz" ;;
    exporter) probe "http://127.0.0.1:$EXPORTER_PORT/healthz" ;;
    prometheus) probe "http://127.0.0.1:$PROMETHEUS_PORT/-/ready" ;;
    *) return 1 ;;
  esac
}

port_of() {
  case $1 in
    etcd) echo "$ETCD_PORT" ;;
    kube-apiserver) echo "$APISERVER_PORT" ;;
    kube-controller-manager) echo "$KCM_PORT" ;;
    kube-controller-manager-hpa) echo "$KCM_HPA_PORT" ;;
    kube-scheduler) echo "$SCHEDULER_PORT" ;;
    kwok) echo "$KWOK_PORT" ;;
    metrics-server) echo "$METRICS_SERVER_PORT" ;;
    metricscale-adapter) echo "$ADAPTER_PORT,$PUSH_PORT" ;;
    metricscale-autoscaler) echo "$AUTOSCALER_PORT" ;;
    exporter) echo "$EXPORTER_PORT" ;;
    prometheus) echo "$PROMETHEUS_PORT" ;;
    *) echo - ;;
  esac
}

# ---------------------------------------------------------------- building

# with_lock FILE COMMAND... — runs COMMAND holding an exclusive lock on FILE when flock exists.
with_lock() {
  local file=$1
  shift
  if command -v flock >/dev/null 2>&1; then
    (
      exec 9>"$file"
      flock -w 1800 9 || die "could not lock $file within 30 minutes"
      "$@"
    )
  else
    "$@"
  fi
}

# build_module MODULE OUTPUTS PACKAGES [LDFLAGS] — builds the main PACKAGES of the build
# module hack/cluster/build/MODULE into $BIN, unless the binaries there were built from
# the same module files (stamp = sha256 of go.mod, go.sum and *.go).
build_module() {
  local module=$1 outputs=$2 packages=$3 ldflags=${4:-}
  local src=$BUILD_ROOT/$module stamp_file=$BIN/.$module.stamp
  local stamp f files=()
  for f in "$src"/go.mod "$src"/go.sum "$src"/*.go; do [[ -f $f ]] && files+=("$f"); done
  stamp=$(cat "${files[@]}" | sha256sum | cut -c1-16)
  local missing=false o
  for o in $outputs; do [[ -x $BIN/$o ]] || missing=true; done
  if [[ $missing == false && -f $stamp_file && $(cat "$stamp_file") == "$stamp" ]]; then
    return 0
  fi
  local t0 tmp blog=$CACHE_DIR/build-$module.log
  t0=$(now_ms)
  tmp=$(mktemp -d "$BIN/.build-$module.XXXXXX")
  log "    building $outputs (module hack/cluster/build/$module; log $blog)"
  # shellcheck disable=SC2086 # packages is a word list
  if ! (cd "$src" && GOWORK=off GOFLAGS=-mod=readonly go build -buildvcs=false \
    -ldflags "-s -w $ldflags" -o "$tmp/" $packages) >"$blog" 2>&1; then
    rm -rf "$tmp"
    tail -n 30 "$blog" >&2
    die "building $outputs failed (full log: $blog)"
  fi
  for o in $outputs; do mv -f "$tmp/$o" "$BIN/$o"; done
  rm -rf "$tmp"
  printf '%s\n' "$stamp" >"$stamp_file"
  log "    built $outputs in $(secs $(($(now_ms) - t0)))"
}

# kwok ships no stages: assemble its configuration (stages for fast nodes and pods,
# resource-usage metrics from pod annotations) from its module's kustomize folder.
# kwok-nodes.yaml has the node stages only (--no-pod-stages).
write_kwok_config() {
  local out=$CACHE_DIR/kwok.yaml nodes_out=$CACHE_DIR/kwok-nodes.yaml
  [[ -s $out && $out -nt $BIN/kwok && -s $nodes_out && $nodes_out -nt $BIN/kwok ]] && return 0
  local kdir
  kdir=$(cd "$BUILD_ROOT/kwok" && GOWORK=off go list -m -f '{{.Dir}}' sigs.k8s.io/kwok) ||
    die "cannot find the sigs.k8s.io/kwok module folder"
  local node_stages=(stage/node/fast/node-initialize.yaml stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml)
  concat_kustomize "$kdir" "${node_stages[@]}" \
    stage/pod/fast/pod-ready.yaml stage/pod/fast/pod-complete.yaml stage/pod/fast/pod-delete.yaml \
    metrics/resource/metrics-resource.yaml metrics/usage/usage-from-annotation.yaml >"$out.tmp"
  concat_kustomize "$kdir" "${node_stages[@]}" >"$nodes_out.tmp"
  mv "$out.tmp" "$out"
  mv "$nodes_out.tmp" "$nodes_out"
}

# concat_kustomize DIR FILE... prints the files of DIR/kustomize as one YAML stream.
concat_kustomize() {
  local kdir=$1 f first=true
  shift
  for f in "$@"; do
    [[ -f $kdir/kustomize/$f ]] || die "kwok module has no kustomize/$f"
    $first || echo '---'
    first=false
    cat "$kdir/kustomize/$f"
  done
}

build_all() {
  command -v go >/dev/null 2>&1 || die "go is not on PATH; it is needed to build the cluster binaries"
  mkdir -p "$BIN"
  build_module clusterutil clusterutil .
  local kv="-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION"
  kv+=" -X k8s.io/component-base/version.gitMajor=$(cut -d. -f1 <<<"${KUBE_VERSION#v}")"
  kv+=" -X k8s.io/component-base/version.gitMinor=$(cut -d. -f2 <<<"$KUBE_VERSION")"
  kv+=" -X k8s.io/component-base/version.gitTreeState=clean"
  kv+=" -X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION"
  build_module kubernetes "kube-apiserver kube-controller-manager kube-scheduler kubectl" \
    "k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl" "$kv"
  build_module etcd etcd .
  build_module kwok kwok sigs.k8s.io/kwok/cmd/kwok
  build_module metrics-server metrics-server sigs.k8s.io/metrics-server/cmd/metrics-server
  # prometheus-adapter v0.12, only for the parity e2e (its command is named adapter).
  build_module prometheus-adapter adapter sigs.k8s.io/prometheus-adapter/cmd/adapter
  ln -sf adapter "$BIN/prometheus-adapter"
  write_kwok_config
}

# ---------------------------------------------------------------- Prometheus

# install_prometheus — makes sure Debian's prometheus package (its binary /usr/bin/prometheus)
# is installed, installing it with apt-get when it is not (root only). The package's own
# service is never used: `up` runs its own prometheus process with a generated config.
install_prometheus() {
  [[ -x $PROMETHEUS_BIN ]] && return 0
  if [[ $(id -u) != 0 ]]; then
    die "$PROMETHEUS_BIN is missing; install Debian's package as root (apt-get install --no-install-recommends prometheus), or use 'up --no-prometheus'"
  fi
  command -v apt-get >/dev/null 2>&1 || die "$PROMETHEUS_BIN is missing and there is no apt-get to install it; use 'up --no-prometheus'"
  local t0 ilog=$CACHE_ROOT/install-prometheus.log rc=0
  t0=$(now_ms)
  mkdir -p "$CACHE_ROOT"
  log "    installing Debian's prometheus package (apt-get; log $ilog)"
  # The package ships a service and its postinst may try to start it: without systemd that
  # can fail, and a running service would take port 9090. A policy-rc.d that forbids
  # starting services (exit 101) prevents both; one that already exists is left alone.
  (
    policy=/usr/sbin/policy-rc.d
    if [[ ! -e $policy ]]; then
      trap 'rm -f "$policy"' EXIT
      printf '#!/bin/sh\n# written by metricscale hack/cluster.sh while installing prometheus\nexit 101\n' >"$policy"
      chmod 755 "$policy"
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=300 update &&
      apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends prometheus
  ) >"$ilog" 2>&1 || rc=$?
  if [[ ! -x $PROMETHEUS_BIN ]]; then
    tail -n 20 "$ilog" >&2
    die "installing prometheus failed (apt-get exit code $rc; full log: $ilog)"
  fi
  # A package script that failed only at starting the service leaves the binary usable.
  [[ $rc -eq 0 ]] || warn "apt-get exited with $rc while installing prometheus, but $PROMETHEUS_BIN is there (see $ilog)"
  log "    installed $("$PROMETHEUS_BIN" --version 2>&1 | head -n 1) in $(secs $(($(now_ms) - t0)))"
}

# paused NAME — the component was stopped on purpose (stop-prometheus), it is not missing.
paused() { [[ -f $RUN/$1.paused ]]; }

write_prometheus_config() {
  local dir=$DIR/prometheus
  mkdir -p "$dir"
  cat >"$dir/prometheus.yml.tmp" <<EOF
# Written by hack/cluster.sh up: scrape hack/exporter every second.
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: exporter
    # The labels the tests set (and the exporter's pod and node labels) stay as they are.
    honor_labels: true
    static_configs:
      - targets: ['127.0.0.1:$EXPORTER_PORT']
EOF
  mv "$dir/prometheus.yml.tmp" "$dir/prometheus.yml"
}

# start_prometheus — starts Prometheus on the data in DIR/prometheus/data (kept by
# stop-prometheus and start-prometheus, removed by up and down); does not wait.
start_prometheus() {
  local dir=$DIR/prometheus
  mkdir -p "$dir/data"
  rm -f "$RUN/prometheus.paused"
  start prometheus "$PROMETHEUS_BIN" --config.file="$dir/prometheus.yml" \
    --storage.tsdb.path="$dir/data" --storage.tsdb.retention.time=2h \
    --web.listen-address="127.0.0.1:$PROMETHEUS_PORT" --log.level=info
}

urlencode() {
  local s=$1 out='' c i
  for ((i = 0; i < ${#s}; i++)); do
    c=${s:i:1}
    case $c in
      [a-zA-Z0-9._~-]) out+=$c ;;
      *) out+=$(printf '%%%02X' "'$c") ;;
    esac
  done
  printf '%s' "$out"
}

# prometheus_scraped_exporter SINCE — Prometheus scraped the exporter successfully after
# SINCE (Unix seconds, with a fraction). A restarted Prometheus still answers with the samples from before.
prometheus_scraped_exporter() {
  # (timestamp() of a plain selector is the sample's time, of an expression the query's.)
  local query="timestamp(up{job=\"exporter\"}) > $1 and on(instance) up{job=\"exporter\"} == 1" out
  out=$("$BIN/clusterutil" probe "http://127.0.0.1:$PROMETHEUS_PORT/api/v1/query?query=$(urlencode "$query")") || return 1
  [[ $out == *'"result":[{'* ]] || { echo "no successful scrape of the exporter yet ($query): $out"; return 1; }
}

# wait_prometheus SINCE — Prometheus ready and done with a successful scrape of the
# exporter after SINCE (Unix seconds).
wait_prometheus() {
  wait_healthy prometheus 60 ready health prometheus
  wait_healthy prometheus 30 "done with a scrape of the exporter" prometheus_scraped_exporter "$1"
}

# ---------------------------------------------------------------- state

load_state() {
  [[ -f $STATE_FILE ]] || return 1
  # shellcheck disable=SC1090
  source "$STATE_FILE"
}

# cluster_state prints running, partial or stopped.
cluster_state() {
  local c any=false all=true
  local comps=()
  if load_state 2>/dev/null; then
    read -r -a comps <<<"${STATE_COMPONENTS:-}"
  else
    comps=("${ALL_COMPONENTS[@]}")
  fi
  for c in "${comps[@]}"; do
    if alive "$c"; then any=true; elif ! paused "$c"; then all=false; fi
  done
  if [[ $any == false ]]; then
    echo stopped
  elif [[ $all == true && -f $STATE_FILE ]]; then
    echo running
  else
    echo partial
  fi
}

dead_components() {
  local c out=()
  load_state 2>/dev/null || true
  for c in ${STATE_COMPONENTS:-${ALL_COMPONENTS[*]}}; do alive "$c" || paused "$c" || out+=("$c"); done
  echo "${out[*]}"
}

# ---------------------------------------------------------------- up

check_ports() {
  local busy
  if ! busy=$("$BIN/clusterutil" ports-free "$@" 2>/dev/null); then
    {
      echo "port(s) needed by the cluster are in use on this machine: $busy"
      if command -v ss >/dev/null 2>&1; then
        local p
        for p in $busy; do ss -Hltnp "sport = :$p" 2>/dev/null | sed 's/^/    /'; done
      fi
      echo "stop whatever listens there (or 'hack/cluster.sh down --dir DIR' for another state folder) and retry"
    } >&2
    die "cannot start the cluster: port(s) $busy in use"
  fi
}

apply() { "${KC[@]}" apply -f - >/dev/null; }

on_up_exit() {
  local rc=$?
  [[ $rc -eq 0 ]] && return 0
  if [[ ${#STARTED[@]} -gt 0 && ${METRICSCALE_KEEP_ON_FAILURE:-} == 1 ]]; then
    warn "up failed; METRICSCALE_KEEP_ON_FAILURE=1 so the started components stay up (stop them with: hack/cluster.sh down --dir $DIR)"
    exit "$rc"
  fi
  if [[ ${#STARTED[@]} -gt 0 ]]; then
    if [[ $rc -ge 128 ]]; then
      warn "up was interrupted; stopping the components it started (logs stay in $LOGS)"
    else
      warn "up failed; stopping the components it started (logs stay in $LOGS)"
    fi
    local i
    for ((i = ${#STARTED[@]} - 1; i >= 0; i--)); do stop "${STARTED[i]}" || true; done
  fi
  rm -f "$STATE_FILE"
  exit "$rc"
}

write_state() {
  local tmp=$STATE_FILE.tmp
  {
    printf 'STATE_VERSION=%q\n' "$KUBE_VERSION"
    printf 'STATE_NODES=%q\n' "$NODES"
    printf 'STATE_HPA_SYNC_PERIOD=%q\n' "$HPA_SYNC_PERIOD"
    printf 'STATE_HPA_CONTROLLER=%q\n' "$HPA_CONTROLLER"
    printf 'STATE_KUBERNETES_ONLY=%q\n' "$KUBERNETES_ONLY"
    printf 'STATE_PROMETHEUS=%q\n' "$PROMETHEUS"
    printf 'STATE_BACKENDS=%q\n' "${RUNNING_BACKENDS[*]}"
    printf 'STATE_RECORD=%q\n' "$RECORD"
    printf 'STATE_POD_STAGES=%q\n' "$POD_STAGES"
    printf 'STATE_COMPONENTS=%q\n' "$1"
    printf 'STATE_STARTED_AT=%q\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    printf 'STATE_REPO_ROOT=%q\n' "$REPO_ROOT"
  } >"$tmp"
  mv "$tmp" "$STATE_FILE"
}

node_yaml() {
  local name=$1
  cat <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $name
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
    metrics.k8s.io/resource-metrics-path: /metrics/nodes/$name/metrics/resource
  labels:
    type: kwok
    kubernetes.io/hostname: $name
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    kubernetes.io/role: agent
    node-role.kubernetes.io/agent: ""
spec:
  taints:
  - key: kwok.x-k8s.io/node
    value: fake
    effect: NoSchedule
status:
  allocatable: {cpu: "1000", memory: 4Ti, pods: "5000"}
  capacity: {cpu: "1000", memory: 4Ti, pods: "5000"}
  nodeInfo:
    architecture: amd64
    operatingSystem: linux
EOF
}

# apiservice_yaml NAME GROUP VERSION NAMESPACE SERVICE PORT VERSION_PRIORITY
apiservice_yaml() {
  cat <<EOF
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: $1
spec:
  group: $2
  version: $3
  service: {namespace: $4, name: $5, port: $6}
  insecureSkipTLSVerify: true
  groupPriorityMinimum: 100
  versionPriority: $7
EOF
}

external_name_service_yaml() {
  cat <<EOF
---
apiVersion: v1
kind: Service
metadata:
  name: $2
  namespace: $1
spec:
  type: ExternalName
  externalName: localhost
EOF
}

wait_apiservices() {
  local name=$1 timeout=$2
  shift 2
  local s
  for s in "$@"; do
    wait_healthy "$name" "$timeout" "Available as APIService $s" \
      "${KC[@]}" wait --for=condition=Available "apiservice/$s" --timeout=5s
  done
}

cmd_up() {
  UP_START=$(now_ms)
  mkdir -p "$DIR" "$RUN" "$LOGS"
  local lockfile=$DIR/.lock
  if command -v flock >/dev/null 2>&1; then
    exec 8>"$lockfile"
    flock -w 1800 8 || die "another 'hack/cluster.sh' holds $lockfile"
  fi

  case $(cluster_state) in
    running)
      load_state
      log "cluster already running in $DIR (started $STATE_STARTED_AT; components: $STATE_COMPONENTS)"
      # Flags given now that the running cluster does not match: say so, change nothing.
      local differs=()
      [[ $EXPLICIT == *" nodes "* && $STATE_NODES != "$NODES" ]] && differs+=("it runs $STATE_NODES node(s), not $NODES")
      [[ $EXPLICIT == *" hpa-sync-period "* && $STATE_HPA_SYNC_PERIOD != "$HPA_SYNC_PERIOD" ]] &&
        differs+=("its HPA sync period is $STATE_HPA_SYNC_PERIOD, not $HPA_SYNC_PERIOD")
      [[ $EXPLICIT == *" no-hpa-controller "* && $STATE_HPA_CONTROLLER != false ]] && differs+=("it runs the HPA controller")
      [[ $EXPLICIT == *" separate-hpa-controller "* && $STATE_HPA_CONTROLLER != separate ]] && differs+=("it does not run the HPA controller in a kube-controller-manager of its own")
      [[ $EXPLICIT == *" kubernetes-only "* && $STATE_KUBERNETES_ONLY == false ]] && differs+=("it runs the metricscale components too")
      [[ $EXPLICIT == *" no-prometheus "* && ${STATE_PROMETHEUS:-false} == true ]] && differs+=("it runs Prometheus")
      [[ $EXPLICIT == *" no-pod-stages "* && ${STATE_POD_STAGES:-true} == true ]] && differs+=("its kwok runs pod stages")
      if paused prometheus; then
        warn "its Prometheus is stopped (hack/cluster.sh stop-prometheus); start it again with: hack/cluster.sh start-prometheus"
      fi
      local d
      for d in "${differs[@]}"; do warn "$d; run 'hack/cluster.sh down' first to change that"; done
      if [[ ${STATE_REPO_ROOT:-$REPO_ROOT} != "$REPO_ROOT" && $STATE_COMPONENTS == *metricscale-* ]]; then
        warn "its metricscale components were built from another checkout ($STATE_REPO_ROOT), not $REPO_ROOT"
      fi
      log "KUBECONFIG=$KUBECONFIG_ADMIN"
      return 0
      ;;
    partial)
      die "the cluster in $DIR is partly running (not running: $(dead_components)); run 'hack/cluster.sh down$([[ -n ${METRICSCALE_CLUSTER_DIR:-} ]] || printf ' --dir %q' "$DIR")' first, then 'up' again"
      ;;
  esac
  trap on_up_exit EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM

  local with_adapter=false with_autoscaler=false
  if [[ $KUBERNETES_ONLY == false && -f $REPO_ROOT/cmd/adapter/main.go ]]; then with_adapter=true; fi
  # The autoscaler reads the adapter's APIs: it runs when the adapter does.
  if [[ $with_adapter == true && -f $REPO_ROOT/cmd/autoscaler/main.go && -f $REPO_ROOT/manifests/autoscaler/crd.yaml ]]; then
    with_autoscaler=true
  fi

  # ---- build
  phase_begin "build binaries (cache: $BIN)"
  mkdir -p "$CACHE_DIR"
  [[ $PROMETHEUS == true ]] && install_prometheus
  with_lock "$CACHE_DIR/.build.lock" build_all
  local exporter_build='' prometheus_since=0
  if [[ $PROMETHEUS == true ]]; then
    mkdir -p "$DIR/bin"
    log "    building exporter from the working tree (./hack/exporter), next to the other builds"
    (cd "$REPO_ROOT" && go build -o "$DIR/bin/exporter" ./hack/exporter) >"$LOGS/exporter-build.log" 2>&1 &
    exporter_build=$!
  fi
  if [[ $with_adapter == true ]]; then
    mkdir -p "$DIR/bin"
    log "    building metricscale-adapter from the working tree (./cmd/adapter)"
    if ! (cd "$REPO_ROOT" && go build -o "$DIR/bin/metricscale-adapter" ./cmd/adapter) >"$LOGS/adapter-build.log" 2>&1; then
      tail -n 30 "$LOGS/adapter-build.log" >&2
      die "building ./cmd/adapter failed (full log: $LOGS/adapter-build.log)"
    fi
  fi
  if [[ $with_autoscaler == true ]]; then
    log "    building metricscale-autoscaler from the working tree (./cmd/autoscaler)"
    if ! (cd "$REPO_ROOT" && go build -o "$DIR/bin/metricscale-autoscaler" ./cmd/autoscaler) >"$LOGS/autoscaler-build.log" 2>&1; then
      tail -n 30 "$LOGS/autoscaler-build.log" >&2
      die "building ./cmd/autoscaler failed (full log: $LOGS/autoscaler-build.log)"
    fi
  fi
  if [[ -n $exporter_build ]] && ! wait "$exporter_build"; then
    tail -n 30 "$LOGS/exporter-build.log" >&2
    die "building ./hack/exporter failed (full log: $LOGS/exporter-build.log)"
  fi
  phase_end build

  # ---- ports and PKI
  phase_begin "check ports, write PKI and kubeconfigs"
  local ports=("$ETCD_PORT" "$ETCD_PEER_PORT" "$APISERVER_PORT" "$KCM_PORT" "$SCHEDULER_PORT" "$KWOK_PORT" "$METRICS_SERVER_PORT")
  [[ $with_adapter == true ]] && ports+=("$ADAPTER_PORT" "$PUSH_PORT")
  [[ $with_autoscaler == true ]] && ports+=("$AUTOSCALER_PORT" "$AUTOSCALER_RECORD_PORT")
  [[ $PROMETHEUS == true ]] && ports+=("$PROMETHEUS_PORT" "$EXPORTER_PORT")
  check_ports "${ports[@]}"
  "$BIN/clusterutil" pki -dir "$PKI" || die "writing the PKI to $PKI failed"
  local server=https://127.0.0.1:$APISERVER_PORT c
  "$BIN/clusterutil" kubeconfig -out "$KUBECONFIG_ADMIN" -server "$server" -ca "$PKI/ca.crt" \
    -cert "$PKI/admin.crt" -key "$PKI/admin.key" -user admin
  mkdir -p "$DIR/kubeconfigs"
  for c in kube-controller-manager kube-scheduler kwok metrics-server; do
    "$BIN/clusterutil" kubeconfig -out "$DIR/kubeconfigs/$c.kubeconfig" -server "$server" -ca "$PKI/ca.crt" \
      -cert "$PKI/$c.crt" -key "$PKI/$c.key" -user "$c"
  done
  phase_end "ports, PKI, kubeconfigs"

  local components=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)
  [[ $HPA_CONTROLLER == separate ]] && components+=(kube-controller-manager-hpa)
  [[ $POD_STAGES == true ]] && components+=(metrics-server)
  [[ $with_adapter == true ]] && components+=(metricscale-adapter)
  [[ $with_autoscaler == true ]] && components+=(metricscale-autoscaler)
  [[ $PROMETHEUS == true ]] && components+=(exporter prometheus)
  # The queue backends feed the adapter's config, which exists only with Prometheus.
  if [[ $BACKENDS == true && $PROMETHEUS == true && $with_adapter == true ]]; then
    mapfile -t RUNNING_BACKENDS < <(backend_names)
  fi
  # The state is written before anything starts, so that `down` finds what a failed
  # or interrupted `up` left behind.
  write_state "${components[*]}"

  # ---- Prometheus needs nothing else: it starts first and is waited for later.
  if [[ $PROMETHEUS == true ]]; then
    phase_begin "start prometheus (ready checked later)"
    rm -rf "$DIR/prometheus"
    write_prometheus_config
    prometheus_since=$EPOCHREALTIME
    start_prometheus
    phase_end "prometheus started"
  fi

  # ---- etcd
  phase_begin "start etcd"
  rm -rf "$DIR/etcd"
  start etcd "$BIN/etcd" --name=metricscale --data-dir="$DIR/etcd" \
    --listen-client-urls="http://127.0.0.1:$ETCD_PORT" --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster="metricscale=http://127.0.0.1:$ETCD_PEER_PORT" --initial-cluster-state=new \
    --unsafe-no-fsync --log-level=warn
  wait_healthy etcd 30 healthy health etcd
  phase_end etcd

  # ---- kube-apiserver
  phase_begin "start kube-apiserver"
  mkdir -p "$DIR/kube-apiserver"
  start kube-apiserver "$BIN/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --bind-address=127.0.0.1 --secure-port="$APISERVER_PORT" --advertise-address=127.0.0.1 \
    --cert-dir="$DIR/kube-apiserver" \
    --endpoint-reconciler-type=none --service-cluster-ip-range=10.0.0.0/24 \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --client-ca-file="$PKI/ca.crt" --authorization-mode=RBAC --allow-privileged=true \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
    --requestheader-client-ca-file="$PKI/front-proxy-ca.crt" --requestheader-allowed-names=front-proxy-client \
    --requestheader-extra-headers-prefix=X-Remote-Extra- --requestheader-group-headers=X-Remote-Group \
    --requestheader-username-headers=X-Remote-User \
    --proxy-client-cert-file="$PKI/front-proxy-client.crt" --proxy-client-key-file="$PKI/front-proxy-client.key" \
    --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types=InternalIP \
    --profiling=false --v=1
  wait_healthy kube-apiserver 120 ready probe_apiserver /readyz
  # The exporter watches pods and nodes; it is waited for later.
  if [[ $PROMETHEUS == true ]]; then
    start exporter "$DIR/bin/exporter" --listen="127.0.0.1:$EXPORTER_PORT" --kubeconfig="$KUBECONFIG_ADMIN"
  fi
  phase_end kube-apiserver

  # ---- controller-manager and scheduler
  phase_begin "start kube-controller-manager (HPA controller: $(hpa_controller_mode "$HPA_CONTROLLER")) and kube-scheduler"
  local controllers='*'
  [[ $HPA_CONTROLLER != true ]] && controllers='*,-horizontalpodautoscaling'
  mkdir -p "$DIR/kube-controller-manager/flexvolume" "$DIR/kube-scheduler"
  local kc=$DIR/kubeconfigs/kube-controller-manager.kubeconfig
  start kube-controller-manager "$BIN/kube-controller-manager" \
    --kubeconfig="$kc" --authentication-kubeconfig="$kc" --authorization-kubeconfig="$kc" \
    --bind-address=127.0.0.1 --secure-port="$KCM_PORT" --cert-dir="$DIR/kube-controller-manager" \
    --leader-elect=false --controllers="$controllers" --use-service-account-credentials=true \
    --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
    --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
    --flex-volume-plugin-dir="$DIR/kube-controller-manager/flexvolume" \
    --horizontal-pod-autoscaler-sync-period="$HPA_SYNC_PERIOD" \
    --kube-api-qps=100 --kube-api-burst=200 --profiling=false --v=1
  if [[ $HPA_CONTROLLER == separate ]]; then
    # The HPA controller alone, as a cluster would run it: leader-elected, on its own lease.
    mkdir -p "$DIR/kube-controller-manager-hpa"
    start kube-controller-manager-hpa "$BIN/kube-controller-manager" \
      --kubeconfig="$kc" --authentication-kubeconfig="$kc" --authorization-kubeconfig="$kc" \
      --bind-address=127.0.0.1 --secure-port="$KCM_HPA_PORT" --cert-dir="$DIR/kube-controller-manager-hpa" \
      --leader-elect=true --leader-elect-resource-name=kube-controller-manager-hpa \
      --controllers=horizontalpodautoscaling --use-service-account-credentials=true \
      --horizontal-pod-autoscaler-sync-period="$HPA_SYNC_PERIOD" \
      --kube-api-qps=100 --kube-api-burst=200 --profiling=true --v=1
  fi
  local ks=$DIR/kubeconfigs/kube-scheduler.kubeconfig
  start kube-scheduler "$BIN/kube-scheduler" \
    --kubeconfig="$ks" --authentication-kubeconfig="$ks" --authorization-kubeconfig="$ks" \
    --bind-address=127.0.0.1 --secure-port="$SCHEDULER_PORT" --cert-dir="$DIR/kube-scheduler" \
    --leader-elect=false --kube-api-qps=100 --kube-api-burst=200 --profiling=false --v=1
  wait_healthy kube-controller-manager 60 healthy health kube-controller-manager
  [[ $HPA_CONTROLLER == separate ]] && wait_healthy kube-controller-manager-hpa 60 healthy health kube-controller-manager-hpa
  wait_healthy kube-scheduler 60 healthy health kube-scheduler
  phase_end "kube-controller-manager, kube-scheduler"

  # ---- kwok and its nodes
  phase_begin "start kwok and create $NODES fake node(s)"
  # KWOK_WORKDIR keeps kwok away from ~/.kwok (it would also load ~/.kwok/kwok.yaml).
  mkdir -p "$DIR/kwok"
  local kwok_config=$CACHE_DIR/kwok.yaml
  [[ $POD_STAGES == true ]] || kwok_config=$CACHE_DIR/kwok-nodes.yaml
  KWOK_WORKDIR=$DIR/kwok start kwok "$BIN/kwok" --kubeconfig="$DIR/kubeconfigs/kwok.kubeconfig" --config="$kwok_config" \
    --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --manage-nodes-with-label-selector= --cidr=10.244.0.0/16 \
    --node-ip=127.0.0.1 --node-port="$KWOK_PORT" --server-address="127.0.0.1:$KWOK_PORT" \
    --tls-cert-file="$PKI/kubelet.crt" --tls-private-key-file="$PKI/kubelet.key" \
    --node-lease-duration-seconds=40
  wait_healthy kwok 30 healthy health kwok
  local i
  for ((i = 0; i < NODES; i++)); do node_yaml "kwok-node-$i"; echo '---'; done | apply ||
    die "creating the fake nodes failed"
  wait_healthy kwok 60 "Ready on all nodes" "${KC[@]}" wait --for=condition=Ready node --all --timeout=5s
  phase_end "kwok, nodes"

  # ---- metrics-server (kwok serves no resource metrics without its pod stages)
  if [[ $POD_STAGES == true ]]; then
    phase_begin "start metrics-server and register metrics.k8s.io"
    mkdir -p "$DIR/metrics-server"
    local km=$DIR/kubeconfigs/metrics-server.kubeconfig
    start metrics-server "$BIN/metrics-server" \
      --kubeconfig="$km" --authentication-kubeconfig="$km" --authorization-kubeconfig="$km" \
      --bind-address=127.0.0.1 --secure-port="$METRICS_SERVER_PORT" --cert-dir="$DIR/metrics-server" \
      --kubelet-insecure-tls --kubelet-use-node-status-port --kubelet-preferred-address-types=InternalIP \
      --metric-resolution=10s --kubelet-request-timeout=5s --v=1
    wait_healthy metrics-server 60 live probe -insecure "https://127.0.0.1:$METRICS_SERVER_PORT/livez"
    {
      external_name_service_yaml kube-system metrics-server
      apiservice_yaml v1beta1.metrics.k8s.io metrics.k8s.io v1beta1 kube-system metrics-server "$METRICS_SERVER_PORT" 100
    } | apply || die "registering metrics.k8s.io failed"
    wait_apiservices metrics-server 60 v1beta1.metrics.k8s.io
    phase_end "metrics-server"
  fi

  # ---- the cluster is usable once the default ServiceAccount exists
  phase_begin "wait until the cluster is usable (default ServiceAccount)"
  wait_healthy kube-controller-manager 60 "done creating the default ServiceAccount" \
    "${KC[@]}" get serviceaccount default --namespace default
  phase_end "usable"

  if [[ ${#RUNNING_BACKENDS[@]} -gt 0 ]]; then
    phase_begin "start the queue backends (${RUNNING_BACKENDS[*]})"
    local b
    # install is a no-op when the server is there (it builds kfake when its source changed).
    for b in "${RUNNING_BACKENDS[@]}"; do backend "$b" install && backend "$b" start; done
    phase_end "backends"
  fi

  if [[ $PROMETHEUS == true ]]; then
    phase_begin "wait for exporter and prometheus (first scrape)"
    wait_healthy exporter 30 healthy health exporter
    wait_prometheus "$prometheus_since"
    phase_end "exporter, prometheus"
  fi

  # ---- the metricscale adapter, from the working tree
  if [[ $with_adapter == true ]]; then
    phase_begin "start metricscale-adapter and register custom/external.metrics.k8s.io"
    start_adapter
    phase_end "metricscale-adapter"
  fi

  # ---- the metricscale autoscaler controller (after the adapter: it reads its APIs)
  if [[ $with_autoscaler == true ]]; then
    phase_begin "start metricscale-autoscaler (MetricAutoscaler CRD, leader election)"
    start_autoscaler
    phase_end "metricscale-autoscaler"
  fi

  trap - EXIT
  log ""
  log "${GREEN}cluster is up${RESET} in $(secs $(($(now_ms) - UP_START))) (state folder $DIR)"
  local p
  for p in "${PHASES[@]}"; do log "    $p"; done
  log "    $(printf '%-42s %8s' total "$(secs $(($(now_ms) - UP_START)))")"
  log ""
  log "use it with:  eval \"\$(hack/cluster.sh env)\"   (KUBECONFIG=$KUBECONFIG_ADMIN)"
}

# serviceaccount_kubeconfig NS SA RBAC_FILE DIR — applies RBAC_FILE (relative to the repo) and
# prints the path of a kubeconfig that acts as ServiceAccount NS/SA, so that the component runs
# with exactly the permissions its manifests grant; without RBAC_FILE, the admin kubeconfig.
serviceaccount_kubeconfig() {
  local ns=$1 sa=$2 rbac=$3 dir=$4
  if [[ ! -f $REPO_ROOT/$rbac ]]; then
    log "    no $rbac: $sa runs with the admin kubeconfig" >&2
    printf '%s' "$KUBECONFIG_ADMIN"
    return
  fi
  log "    applying $rbac; $sa runs as ServiceAccount $ns/$sa" >&2
  local applog=$LOGS/$sa-rbac.log
  "${KC[@]}" apply -f "$REPO_ROOT/$rbac" >"$applog" 2>&1 || {
    cat "$applog" >&2
    die "applying $rbac failed"
  }
  "${KC[@]}" -n "$ns" get serviceaccount "$sa" >/dev/null 2>&1 ||
    "${KC[@]}" -n "$ns" create serviceaccount "$sa" >/dev/null
  (umask 077 && "${KC[@]}" -n "$ns" create token "$sa" --duration=24h >"$dir/token") ||
    die "could not create a token for ServiceAccount $ns/$sa"
  local kc=$DIR/kubeconfigs/$sa.kubeconfig
  "$BIN/clusterutil" kubeconfig -out "$kc" -server "https://127.0.0.1:$APISERVER_PORT" \
    -ca "$PKI/ca.crt" -token-file "$dir/token" -user "system:serviceaccount:$ns:$sa" >&2
  printf '%s' "$kc"
}

start_autoscaler() {
  local dir=$DIR/autoscaler
  mkdir -p "$dir"
  "${KC[@]}" apply --server-side -f "$REPO_ROOT/manifests/autoscaler/crd.yaml" >"$LOGS/autoscaler-crd.log" 2>&1 || {
    cat "$LOGS/autoscaler-crd.log" >&2
    die "applying manifests/autoscaler/crd.yaml failed"
  }
  "${KC[@]}" wait --for=condition=Established --timeout=30s crd/metricautoscalers.autoscaling.metricscale.dev >/dev/null ||
    die "the MetricAutoscaler CRD did not become Established"
  local kc
  kc=$(serviceaccount_kubeconfig metricscale metricscale-autoscaler manifests/autoscaler/rbac.yaml "$dir")
  # Recording (autoscaler record): its delegated authentication and RBAC, as manifests/record.
  "${KC[@]}" apply -f "$REPO_ROOT/manifests/record/rbac.yaml" >>"$LOGS/metricscale-autoscaler-rbac.log" 2>&1 ||
    die "applying manifests/record/rbac.yaml failed (see $LOGS/metricscale-autoscaler-rbac.log)"
  local extra=()
  # Without kube-controller-manager's HPA controller, ours reconciles the native HPAs too.
  [[ $HPA_CONTROLLER == false ]] && extra+=(--hpa-objects --hpa-sync-period="$HPA_SYNC_PERIOD")
  # The adapter's change feed, on its secure port, whose certificate the adapter generated
  # (apiserver.crt holds it and its CA); the autoscaler's ServiceAccount token authenticates.
  if [[ $CHANGE_FEED_URL != none ]]; then
    extra+=(--change-feed-url="${CHANGE_FEED_URL:-https://127.0.0.1:$ADAPTER_PORT}" --change-feed-ca-file="$DIR/adapter/apiserver.crt")
  fi
  # --record serves recordings on 127.0.0.1:$AUTOSCALER_RECORD_PORT, with a certificate kept in
  # $dir (record.crt is its own CA: autoscaler record --certificate-authority); --no-record runs the
  # autoscaler as shipped (recording off), for the controller benchmark.
  [[ $RECORD == true ]] && extra+=(--record --secure-bind-address="127.0.0.1:$AUTOSCALER_RECORD_PORT" --cert-dir="$dir")
  start metricscale-autoscaler "$DIR/bin/metricscale-autoscaler" \
    --kubeconfig="$kc" --bind-address="127.0.0.1:$AUTOSCALER_PORT" \
    --leader-elect=true --leader-elect-namespace=metricscale --profiling "${extra[@]}" \
    -v=2
  wait_healthy metricscale-autoscaler 60 healthy health metricscale-autoscaler
}

start_adapter() {
  local adapter_dir=$DIR/adapter
  mkdir -p "$adapter_dir"
  if [[ ! -s $DIR/push-token ]]; then
    (umask 077 && "$BIN/clusterutil" token >"$DIR/push-token")
  fi
  local ns=metricscale sa=metricscale-adapter
  printf 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n' "$ns" | apply || die "creating namespace $ns failed"
  local adapter_kubeconfig
  adapter_kubeconfig=$(serviceaccount_kubeconfig "$ns" "$sa" manifests/adapter/rbac.yaml "$adapter_dir")
  if [[ $PROMETHEUS == true ]]; then
    # hack/adapter-config.yaml serves metrics.k8s.io: the adapter also watches nodes.
    "${KC[@]}" apply -f "$REPO_ROOT/manifests/metrics-api/rbac.yaml" >>"$LOGS/$sa-rbac.log" 2>&1 ||
      die "applying manifests/metrics-api/rbac.yaml failed (see $LOGS/$sa-rbac.log)"
  fi
  # With Prometheus: hack/adapter-config.yaml, the memory provider (push, every name) and a
  # prometheus provider for the prom_* names; copied, so that the running config stays as read
  # until something rewrites the copy: the adapter reloads it (TestConfigReload does).
  local config=()
  if [[ $PROMETHEUS == true ]]; then
    [[ -f $REPO_ROOT/hack/adapter-config.yaml ]] || die "hack/adapter-config.yaml is missing"
    local fragments=() b
    for b in "${RUNNING_BACKENDS[@]}"; do fragments+=("$BACKENDS_DIR/$b.yaml"); done
    # A fragment names files its backend's script wrote under the state folder as @CLUSTER_DIR@.
    merge_adapter_config "$REPO_ROOT/hack/adapter-config.yaml" "${fragments[@]}" |
      sed "s|@CLUSTER_DIR@|$DIR|g" >"$adapter_dir/config.yaml.tmp"
    mv "$adapter_dir/config.yaml.tmp" "$adapter_dir/config.yaml"
    config=(--config="$adapter_dir/config.yaml")
    log "    adapter config: $adapter_dir/config.yaml (memory + prometheus at 127.0.0.1:$PROMETHEUS_PORT${RUNNING_BACKENDS[*]:+ + ${RUNNING_BACKENDS[*]}})"
  fi
  # No pod runs the adapter here: it names one, so its config reload events (which the
  # API server accepts for a pod that does not exist) are emitted with its real RBAC.
  POD_NAMESPACE=$ns POD_NAME=metricscale-adapter-local \
    start metricscale-adapter "$DIR/bin/metricscale-adapter" \
    --secure-port="$ADAPTER_PORT" --bind-address=127.0.0.1 --cert-dir="$adapter_dir" \
    --kubeconfig="$adapter_kubeconfig" --authentication-kubeconfig="$adapter_kubeconfig" \
    --authorization-kubeconfig="$adapter_kubeconfig" "${config[@]}" \
    --push-bind-address=127.0.0.1 --push-port="$PUSH_PORT" --push-token-file="$DIR/push-token" -v=2
  wait_healthy metricscale-adapter 90 healthy health metricscale-adapter
  {
    external_name_service_yaml "$ns" metricscale-adapter
    apiservice_yaml v1beta2.custom.metrics.k8s.io custom.metrics.k8s.io v1beta2 "$ns" metricscale-adapter "$ADAPTER_PORT" 200
    apiservice_yaml v1beta1.custom.metrics.k8s.io custom.metrics.k8s.io v1beta1 "$ns" metricscale-adapter "$ADAPTER_PORT" 100
    apiservice_yaml v1beta1.external.metrics.k8s.io external.metrics.k8s.io v1beta1 "$ns" metricscale-adapter "$ADAPTER_PORT" 100
  } | apply || die "registering the adapter's APIServices failed"
  wait_apiservices metricscale-adapter 60 v1beta2.custom.metrics.k8s.io v1beta1.custom.metrics.k8s.io v1beta1.external.metrics.k8s.io
}

# ---------------------------------------------------------------- down

cmd_down() {
  if [[ ! -d $DIR ]]; then
    log "cluster in $DIR is not running (no state folder)"
    return 0
  fi
  if command -v flock >/dev/null 2>&1; then
    exec 8>"$DIR/.lock"
    flock -w 600 8 || die "another 'hack/cluster.sh' holds $DIR/.lock"
  fi
  local any=false c i
  for c in "${ALL_COMPONENTS[@]}"; do alive "$c" && any=true; done
  if [[ $any == false ]]; then
    log "cluster in $DIR is not running"
  else
    log "stopping the cluster in $DIR"
    for ((i = ${#ALL_COMPONENTS[@]} - 1; i >= 0; i--)); do stop "${ALL_COMPONENTS[i]}"; done
  fi
  # Every backend knows whether its server runs from DIR: stopping one that does not
  # is a no-op, so a state file lost by a failed `up` leaves nothing behind.
  # (An array, not `while read`: rabbitmqctl reads stdin and would eat the names after it.)
  local b names
  mapfile -t names < <(backend_names)
  for b in "${names[@]}"; do backend "$b" stop </dev/null; done
  # Nothing of ours may be left listening.
  local ports=("$ETCD_PORT" "$ETCD_PEER_PORT" "$APISERVER_PORT" "$KCM_PORT" "$SCHEDULER_PORT" "$KWOK_PORT" "$METRICS_SERVER_PORT" "$ADAPTER_PORT" "$PUSH_PORT" "$PROMETHEUS_PORT" "$EXPORTER_PORT")
  if [[ $any == true && -x $BIN/clusterutil ]]; then
    local busy=''
    for ((i = 0; i < 50; i++)); do
      busy=$("$BIN/clusterutil" ports-free "${ports[@]}" 2>/dev/null) && break
      sleep 0.2
    done
    [[ -z $busy ]] || warn "port(s) $busy are still in use after stopping the cluster (by another program?)"
  fi
  rm -rf "$RUN" "$DIR/etcd" "$DIR/prometheus/data" "$STATE_FILE" "$DIR/.lock"
  if [[ $PURGE == true ]]; then
    rm -rf "$DIR"
    log "removed the state folder $DIR"
  elif [[ $any == true ]]; then
    log "cluster stopped (logs kept in $LOGS; 'down --purge' removes $DIR)"
  fi
}

# ---------------------------------------------------------------- status and env

cmd_status() {
  local state
  state=$(cluster_state)
  if [[ $state == stopped ]]; then
    log "cluster in $DIR is not running"
    return 3
  fi
  load_state || true
  log "${BOLD}metricscale local cluster${RESET} — kubernetes ${STATE_VERSION:-?}, state folder $DIR"
  log "started ${STATE_STARTED_AT:-?} from ${STATE_REPO_ROOT:-?}; nodes: ${STATE_NODES:-?}; HPA controller: $(hpa_controller_mode "${STATE_HPA_CONTROLLER:-true}" "${STATE_HPA_SYNC_PERIOD:-?}"); Prometheus: $([[ ${STATE_PROMETHEUS:-false} == true ]] && echo on || echo off)$([[ ${STATE_POD_STAGES:-true} == true ]] || echo "; kwok: node stages only")"
  printf '%-26s %-8s %-11s %-10s %s\n' COMPONENT PID PORT RSS HEALTH
  local c pid h rc=0 rss
  local comps=()
  read -r -a comps <<<"${STATE_COMPONENTS:-${ALL_COMPONENTS[*]}}"
  for c in "${comps[@]}"; do
    if pid=$(pid_of "$c"); then
      rss=$(awk '/^VmRSS:/ { printf "%dMiB", $2 / 1024 }' "/proc/$pid/status" 2>/dev/null || echo -)
      if h=$(health "$c" 2>&1); then
        h="${GREEN}ok${RESET}"
      elif [[ $c == metrics-server ]] && probe -insecure "https://127.0.0.1:$METRICS_SERVER_PORT/livez" 2>/dev/null; then
        # Ready only after its first scrape of the nodes (--metric-resolution).
        h="${GREEN}ok${RESET} (live; no metrics scraped yet)"
      else
        h="${RED}unhealthy${RESET}: $(head -c 200 <<<"$h" | tr '\n' ' ')"
        rc=1
      fi
    elif paused "$c"; then
      pid=- rss=- h="${YELLOW}stopped${RESET} by hack/cluster.sh stop-prometheus (start-prometheus starts it again)"
    else
      pid=- rss=- h="${RED}not running${RESET} (log: $LOGS/$c.log)"
      rc=1
    fi
    printf '%-26s %-8s %-11s %-10s %s\n' "$c" "$pid" "$(port_of "$c")" "$rss" "$h"
  done
  if alive kube-apiserver; then
    log ""
    "${KUBECTL[@]}" get nodes --request-timeout=5s 2>&1 | sed 's/^/    /' || true
  fi
  log ""
  log "KUBECONFIG=$KUBECONFIG_ADMIN"
  return "$rc"
}

# sq quotes a value for the shell with single quotes (also easy for programs to parse).
sq() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

cmd_env() {
  if ! alive kube-apiserver; then
    echo "# the cluster in $DIR is not running; start it with: hack/cluster.sh up" >&2
    return 1
  fi
  echo "export KUBECONFIG=$(sq "$KUBECONFIG_ADMIN")"
  echo "export METRICSCALE_CLUSTER_DIR=$(sq "$DIR")"
  echo "export METRICSCALE_KUBECTL=$(sq "$BIN/kubectl")"
  if load_state 2>/dev/null; then
    echo "export METRICSCALE_HPA_CONTROLLER=$(sq "$STATE_HPA_CONTROLLER")"
    echo "export METRICSCALE_HPA_SYNC_PERIOD=$(sq "$STATE_HPA_SYNC_PERIOD")"
    echo "export METRICSCALE_CLUSTER_REPO=$(sq "${STATE_REPO_ROOT:-}")"
    echo "export METRICSCALE_POD_STAGES=$(sq "${STATE_POD_STAGES:-true}")"
  fi
  if alive metricscale-adapter; then
    echo "export METRICSCALE_PUSH_URL=$(sq "http://127.0.0.1:$PUSH_PORT/push")"
    echo "export METRICSCALE_PUSH_TOKEN=$(sq "$(cat "$DIR/push-token")")"
  fi
  if alive metricscale-autoscaler; then
    echo "export METRICSCALE_AUTOSCALER_METRICS=$(sq "http://127.0.0.1:$AUTOSCALER_PORT/metrics")"
    if [[ ${STATE_RECORD:-true} == true ]]; then
      # autoscaler record --server "$METRICSCALE_RECORD_SERVER" --certificate-authority "$METRICSCALE_RECORD_CA"
      echo "export METRICSCALE_RECORD_SERVER=$(sq "https://127.0.0.1:$AUTOSCALER_RECORD_PORT")"
      echo "export METRICSCALE_RECORD_CA=$(sq "$DIR/autoscaler/record.crt")"
    fi
  fi
  # Also while Prometheus is stopped by stop-prometheus: that outage is meant to be seen.
  if alive prometheus || paused prometheus; then
    echo "export METRICSCALE_PROMETHEUS_URL=$(sq "http://127.0.0.1:$PROMETHEUS_PORT")"
  fi
  if alive exporter; then
    echo "export METRICSCALE_EXPORTER_URL=$(sq "http://127.0.0.1:$EXPORTER_PORT")"
  fi
  local b
  [[ -z ${STATE_BACKENDS:-} ]] || backends_tool names >/dev/null # built once, not per backend
  for b in ${STATE_BACKENDS:-}; do
    echo "export METRICSCALE_BACKENDS=$(sq "${STATE_BACKENDS:-}")"
    backends_tool "$b" env "$DIR"
  done | awk '!seen[$0]++'
}

# ---------------------------------------------------------------- queue backends

# backends_tool ARGS... — the Go backends of hack/backends (hack/backends/cmd/backend), built
# into the cache once per run of this script.
backends_tool() {
  local tool=$CACHE_ROOT/bin/backend
  if [[ -z ${BACKENDS_TOOL_BUILT:-} ]]; then
    mkdir -p "$CACHE_ROOT/bin"
    (cd "$REPO_ROOT" && go build -o "$tool.$$" ./hack/backends/cmd/backend && mv -f "$tool.$$" "$tool") ||
      die "building hack/backends/cmd/backend failed"
    BACKENDS_TOOL_BUILT=1
  fi
  (cd "$REPO_ROOT" && "$tool" "$@")
}

# backend_names — the queue backends: one hack/backends/NAME.go with its NAME.yaml each.
backend_names() {
  local f
  for f in "$BACKENDS_DIR"/*.yaml; do
    [[ -f $f && -f ${f%.yaml}.go ]] && basename "${f%.yaml}"
  done
}

# backend NAME start|stop|install — runs the backend for this cluster's folder.
backend() {
  local name=$1 action=$2 t0
  t0=$(now_ms)
  if [[ $action == install ]]; then
    backends_tool "$name" install || die "installing the $name backend failed"
  else
    # 8>&-: the servers it starts must not hold the state folder's lock (stop-prometheus, down).
    backends_tool "$name" "$action" "$DIR" 8>&- || die "$action of the $name backend failed (logs in $DIR/$name)"
  fi
  log "    $name: $action done in $(secs $(($(now_ms) - t0)))"
}

# merge_adapter_config BASE FRAGMENT... — BASE's top-level settings and providers, then each
# fragment's providers; each fragment's routes before BASE's (first match wins, and BASE ends
# with the memory provider's '*' catch-all).
merge_adapter_config() {
  awk '
    FNR == 1 { f++; sect = "" }
    /^providers:/ { sect = "p"; next }
    /^routes:/ { sect = "r"; next }
    /^[^ #-]/ { sect = "o" }
    sect == "o" && f == 1 { other = other $0 "\n" }
    sect == "p" { prov[f] = prov[f] $0 "\n" }
    sect == "r" { rout[f] = rout[f] $0 "\n" }
    END {
      printf "%s", other
      printf "providers:\n"; for (i = 1; i <= f; i++) printf "%s", prov[i]
      printf "routes:\n"; for (i = 2; i <= f; i++) printf "%s", rout[i]; printf "%s", rout[1]
    }' "$@"
}

cmd_backend() {
  [[ ${#PASSTHROUGH[@]} -eq 1 ]] || die "usage: hack/cluster.sh $CMD NAME"
  load_state || die "no cluster state in $DIR; start it with: hack/cluster.sh up"
  [[ " ${STATE_BACKENDS:-} " == *" ${PASSTHROUGH[0]} "* ]] || die "the cluster in $DIR runs no '${PASSTHROUGH[0]}' backend (it runs: ${STATE_BACKENDS:-none})"
  backend "${PASSTHROUGH[0]}" "${CMD%-backend}"
}

cmd_install_backends() {
  local b names
  mapfile -t names < <(backend_names)
  for b in "${names[@]}"; do backend "$b" install </dev/null; done
}

# stop-prometheus and start-prometheus: an outage of Prometheus for the e2e tests. The
# state folder remembers the stop (run/prometheus.paused), so that status and up see a
# paused component, not a failed one; start-prometheus reuses Prometheus' data folder
# (the samples from before the outage stay).
prometheus_command_setup() {
  load_state || die "no cluster state in $DIR; start it with: hack/cluster.sh up"
  [[ ${STATE_PROMETHEUS:-false} == true ]] || die "the cluster in $DIR runs no Prometheus (started with --no-prometheus?)"
  if command -v flock >/dev/null 2>&1; then
    exec 8>"$DIR/.lock"
    flock -w 120 8 || die "another 'hack/cluster.sh' holds $DIR/.lock"
  fi
}

cmd_stop_prometheus() {
  prometheus_command_setup
  if alive prometheus; then
    stop prometheus
  else
    log "prometheus is not running"
  fi
  : >"$RUN/prometheus.paused"
}

cmd_start_prometheus() {
  prometheus_command_setup
  if alive prometheus; then
    rm -f "$RUN/prometheus.paused"
    log "prometheus is already running (pid $(pid_of prometheus))"
    return 0
  fi
  local t0 since=$EPOCHREALTIME
  t0=$(now_ms)
  [[ -f $DIR/prometheus/prometheus.yml ]] || write_prometheus_config
  # start truncates the log: keep the one of the run before the outage.
  [[ -f $LOGS/prometheus.log ]] && mv -f "$LOGS/prometheus.log" "$LOGS/prometheus.before-restart.log"
  start_prometheus
  wait_prometheus "$since"
  log "    prometheus ready in $(secs $(($(now_ms) - t0)))"
}

# restart-autoscaler: stops the autoscaler if it runs (e.g. an e2e test killed it) and
# starts it again with the cluster's settings, as its Deployment would restart it.
cmd_restart_autoscaler() {
  load_state || die "no cluster state in $DIR; start it with: hack/cluster.sh up"
  [[ $STATE_COMPONENTS == *metricscale-autoscaler* ]] || die "the cluster in $DIR runs no metricscale-autoscaler"
  HPA_CONTROLLER=$STATE_HPA_CONTROLLER
  HPA_SYNC_PERIOD=$STATE_HPA_SYNC_PERIOD
  RECORD=${STATE_RECORD:-true}
  if alive metricscale-autoscaler; then stop metricscale-autoscaler; fi
  start_autoscaler
}

cmd_kubectl() {
  [[ -x $BIN/kubectl ]] || die "kubectl is not built yet; run hack/cluster.sh up"
  exec "${KUBECTL[@]}" "${PASSTHROUGH[@]}"
}

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'
}

case $CMD in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  env) cmd_env ;;
  kubectl) cmd_kubectl ;;
  restart-autoscaler) cmd_restart_autoscaler ;;
  install-prometheus) install_prometheus ;;
  stop-prometheus) cmd_stop_prometheus ;;
  start-prometheus) cmd_start_prometheus ;;
  stop-backend | start-backend) cmd_backend ;;
  install-backends) cmd_install_backends ;;
  build)
    UP_START=$(now_ms)
    phase_begin "build binaries (cache: $BIN)"
    mkdir -p "$CACHE_DIR"
    with_lock "$CACHE_DIR/.build.lock" build_all
    phase_end build
    ;;
  help | -h | --help) usage ;;
  '') usage >&2; exit 2 ;;
  *) usage >&2; die "unknown command: $CMD" ;;
esac
