#!/usr/bin/env bash
# hack/bench-adapter.sh — the adapter's benchmark of issue 9 §5 on the local cluster.
#
#   hack/cluster.sh up                 # first, with Prometheus (the default)
#   hack/bench-adapter.sh [--duration 30s] [--clients 8] [--series 10000] [--pods 20]
#                         [--selectors 1000] [--cache-ttl 2s] [--no-cache-on]
#                         [--no-prometheus-adapter] [--second-adapter-arg ARG]... [--profile DIR] [--keep]
#
# It sets N queue series queue_messages_ready{namespace="metricscale-bench",queue="q-I"} in
# hack/exporter (POST /set), runs a Deployment of 20 pods on the fake nodes in namespace
# metricscale-bench, and runs hack/loadgen (8 clients, 30 s per case) against the Prometheus
# metrics of hack/adapter-config.yaml:
#   selector    external prom_queue_messages_ready?labelSelector=queue=q-I, rotating over 1,000 I
#   all-series  external prom_queue_messages_ready, every series
#   pods        custom pods/*/prom_container_cpu_usage?labelSelector=app=bench-web
# each direct to the adapter's port (6444) and through the kube-apiserver (6443, the aggregation
# layer), with a bearer token of a service account allowed to read the metrics APIs.
#
# Result cache: "off" is the running adapter (hack/adapter-config.yaml sets no queryCacheTTL).
# Unless --no-cache-on, "on" is a second adapter process this script starts with the running
# one's arguments, another port and the same config plus queryCacheTTL (--cache-ttl). For its
# aggregator cases the script points the v1beta1.external and v1beta2.custom APIServices at it
# for the run, and back at the cluster's adapter on exit. --second-adapter-arg (repeatable) adds
# an argument to that second adapter only, e.g. --disable-http2-serving, to compare a setting.
#
# prometheus-adapter: unless --no-prometheus-adapter, prometheus-adapter v0.12.0 (built by
# hack/cluster.sh build) runs on port 6457 with the same rules (the prom provider's rules, cut
# out of hack/adapter-config.yaml) on the same Prometheus, and answers the same three cases
# direct in the same run; a last table gives each of our cases as a ratio to it.
#
# Per case it prints q/s, p50/p99 and errors (from the clients), the adapter process' CPU-seconds
# per 1,000 queries and RSS (from /proc), PromQL queries per API query (Prometheus' own
# request counter: other clients of that Prometheus, such as the autoscaler, add to it), and for
# our adapter the share of the requests its fast path served (its /metrics, which the reader
# service account may get); then the load generator's and the kube-apiserver's CPU-seconds per
# 1,000 queries and how busy the host was (/proc/stat); under each case, the three busiest other
# processes (what else competed for the cores).
# --profile DIR saves our adapter's CPU profile over each of its cases (DIR/CASE-VIA-CACHE.pprof,
# for go tool pprof; from its /debug/pprof, with the cluster's admin certificate).
# Direct requests skip verifying the adapter's serving certificate (loopback; only measured).
#
# It fails at once if no local cluster is up. It removes what it created (namespace, RBAC, the
# second adapter) unless --keep; the queue series stay in hack/exporter (its POST /reset would
# also remove other tests' series).
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DURATION=30s CLIENTS=8 SERIES=10000 PODS=20 SELECTORS=1000 CACHE_TTL=2s CACHE_ON=true KEEP=false
PROMETHEUS_ADAPTER=true SECOND_ARGS=() PROFILE_DIR=''
NS=metricscale-bench
APISERVER_PORT=${METRICSCALE_APISERVER_PORT:-6443}
ADAPTER_PORT=${METRICSCALE_ADAPTER_PORT:-6444}
CACHED_PORT=${METRICSCALE_BENCH_ADAPTER_PORT:-6454}
CACHED_PUSH_PORT=${METRICSCALE_BENCH_PUSH_PORT:-6455}
PA_PORT=${METRICSCALE_BENCH_PROMETHEUS_ADAPTER_PORT:-6457}
# The APIServices the aggregator cases go through (selector and all-series: external; pods: custom).
BENCH_APISERVICES=(v1beta1.external.metrics.k8s.io v1beta2.custom.metrics.k8s.io)

die() {
  printf 'bench-adapter: error: %s\n' "$*" >&2
  exit 1
}
log() { printf '%s\n' "$*" >&2; }

while [[ $# -gt 0 ]]; do
  case $1 in
    --duration) DURATION=$2; shift 2 ;;
    --clients) CLIENTS=$2; shift 2 ;;
    --series) SERIES=$2; shift 2 ;;
    --pods) PODS=$2; shift 2 ;;
    --selectors) SELECTORS=$2; shift 2 ;;
    --cache-ttl) CACHE_TTL=$2; shift 2 ;;
    --no-cache-on) CACHE_ON=false; shift ;;
    --no-prometheus-adapter) PROMETHEUS_ADAPTER=false; shift ;;
    --second-adapter-arg) SECOND_ARGS+=("$2"); shift 2 ;;
    --profile) PROFILE_DIR=$2; shift 2 ;;
    --keep) KEEP=true; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
if [[ -n $PROFILE_DIR ]]; then
  mkdir -p "$PROFILE_DIR" || die "cannot create --profile $PROFILE_DIR"
  PROFILE_DIR=$(cd "$PROFILE_DIR" && pwd)
fi
((SELECTORS <= SERIES)) || die "--selectors ($SELECTORS) must not exceed --series ($SERIES)"

# ---------------------------------------------------------------- the cluster

ENV_OUT=$("$REPO_ROOT/hack/cluster.sh" env 2>&1) ||
  die "no local cluster is up (hack/cluster.sh env: ${ENV_OUT//$'\n'/ }); start one with: hack/cluster.sh up"
eval "$ENV_OUT"
[[ -n ${METRICSCALE_PROMETHEUS_URL:-} && -n ${METRICSCALE_EXPORTER_URL:-} ]] ||
  die "the local cluster runs without Prometheus or hack/exporter; start it with: hack/cluster.sh up (not --no-prometheus)"
curl -fsS -o /dev/null "$METRICSCALE_PROMETHEUS_URL/-/ready" ||
  die "Prometheus at $METRICSCALE_PROMETHEUS_URL is not ready (stopped with hack/cluster.sh stop-prometheus?)"
ADAPTER_PIDFILE=$METRICSCALE_CLUSTER_DIR/run/metricscale-adapter.pid
ADAPTER_PID=$(head -n 1 "$ADAPTER_PIDFILE" 2>/dev/null) && [[ -d /proc/$ADAPTER_PID ]] ||
  die "the adapter of the local cluster is not running (no live pid in $ADAPTER_PIDFILE)"
APISERVER_PID=$(head -n 1 "$METRICSCALE_CLUSTER_DIR/run/kube-apiserver.pid" 2>/dev/null) && [[ -d /proc/$APISERVER_PID ]] ||
  die "the kube-apiserver of the local cluster is not running (no live pid in $METRICSCALE_CLUSTER_DIR/run/kube-apiserver.pid)"
KUBECTL=("$METRICSCALE_KUBECTL" --kubeconfig "$KUBECONFIG")
PKI=$METRICSCALE_CLUSTER_DIR/pki

WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench-adapter.XXXXXX")
CACHED_PID='' PA_PID='' REPOINTED=false
cleanup() {
  local rc=$?
  if [[ $REPOINTED == true ]]; then
    point_apiservices "$ADAPTER_PORT" || log "could not point the APIServices back at port $ADAPTER_PORT: fix with hack/cluster.sh restart"
  fi
  local p
  for p in $CACHED_PID $PA_PID; do
    kill "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  if [[ $KEEP == false ]]; then
    "${KUBECTL[@]}" delete namespace "$NS" --wait=false --ignore-not-found >/dev/null 2>&1 || true
    "${KUBECTL[@]}" delete clusterrolebinding,clusterrole metricscale-bench --ignore-not-found >/dev/null 2>&1 || true
    rm -rf "$WORK"
  else
    log "kept: namespace $NS, clusterrole(binding) metricscale-bench, $WORK"
  fi
  exit "$rc"
}
trap cleanup EXIT

# point_apiservices PORT — the bench APIServices route to the adapter on PORT once Available.
point_apiservices() {
  local s
  for s in "${BENCH_APISERVICES[@]}"; do
    "${KUBECTL[@]}" patch apiservice "$s" --type=merge -p "{\"spec\":{\"service\":{\"port\":$1}}}" >/dev/null || return 1
  done
  for s in "${BENCH_APISERVICES[@]}"; do
    "${KUBECTL[@]}" wait --for=condition=Available "apiservice/$s" --timeout=60s >/dev/null || return 1
  done
}
trap 'exit 130' INT TERM

log "==> building hack/loadgen"
(cd "$REPO_ROOT" && go build -o "$WORK/loadgen" ./hack/loadgen) || die "building hack/loadgen failed"

log "==> namespace $NS, a reader service account, $PODS pods on the fake nodes"
"${KUBECTL[@]}" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: $NS}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: reader, namespace: $NS}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: metricscale-bench}
rules:
- apiGroups: [custom.metrics.k8s.io, external.metrics.k8s.io]
  resources: ["*"]
  verbs: [get, list]
- nonResourceURLs: [/metrics]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: metricscale-bench}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: metricscale-bench}
subjects:
- {kind: ServiceAccount, name: reader, namespace: $NS}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: bench-web, namespace: $NS}
spec:
  replicas: $PODS
  selector: {matchLabels: {app: bench-web}}
  template:
    metadata:
      labels: {app: bench-web}
      annotations: {kwok.x-k8s.io/usage-cpu: 100m}
    spec:
      nodeSelector: {type: kwok}
      tolerations: [{key: kwok.x-k8s.io/node, operator: Equal, value: fake, effect: NoSchedule}]
      terminationGracePeriodSeconds: 0
      containers:
      - name: app
        image: registry.k8s.io/pause:3.10
        resources: {requests: {cpu: 10m, memory: 16Mi}}
EOF
"${KUBECTL[@]}" -n "$NS" rollout status deployment/bench-web --timeout=120s >/dev/null ||
  die "the $PODS pods of deployment $NS/bench-web did not become ready"
"${KUBECTL[@]}" -n "$NS" create token reader --duration=2h >"$WORK/token"
"${KUBECTL[@]}" config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}' |
  base64 -d >"$WORK/apiserver-ca.crt"

log "==> $SERIES queue series into hack/exporter"
awk -v n="$SERIES" -v ns="$NS" 'BEGIN { for (i = 0; i < n; i++) printf "queue_messages_ready{namespace=\"%s\",queue=\"q-%d\"} %d\n", ns, i, i }' >"$WORK/series.txt"
curl -fsS -X POST --data-binary @"$WORK/series.txt" "$METRICSCALE_EXPORTER_URL/set" ||
  die "POST $METRICSCALE_EXPORTER_URL/set failed"

EXT=/apis/external.metrics.k8s.io/v1beta1/namespaces/$NS/prom_queue_messages_ready
PODS_PATH="/apis/custom.metrics.k8s.io/v1beta2/namespaces/$NS/pods/*/prom_container_cpu_usage?labelSelector=app%3Dbench-web"

# items BASE PATH — the number of items the adapter (or aggregator) at BASE answers, or 0.
items() {
  curl -sS -k -H "Authorization: Bearer $(cat "$WORK/token")" "$1$2" 2>/dev/null | jq -r '(.items // []) | length' 2>/dev/null || echo 0
}

# wait_items BASE PATH WANT WHAT — until the answer has WANT items (relist, scrapes, rate window).
wait_items() {
  local i n=0
  for ((i = 0; i < 120; i++)); do
    n=$(items "$1" "$2")
    [[ $n == "$3" ]] && return 0
    sleep 1
  done
  die "$4: $n items after 120s, want $3 (GET $1$2)"
}

# wait_serving BASE PID WHAT LOG — an adapter this script started is ready and serves the
# bench's series and pods.
wait_serving() {
  local i
  for ((i = 0; i < 60; i++)); do
    curl -fsS -k -o /dev/null "$1/readyz" 2>/dev/null && break
    [[ -d /proc/$2 ]] || die "$3 exited; see $4 (--keep keeps it)"
    sleep 1
  done
  wait_items "$1" "$EXT" "$SERIES" "$EXT from $3"
  wait_items "$1" "$PODS_PATH" "$PODS" "pods metric from $3"
}

# ---------------------------------------------------------------- measuring

promql_count() {
  curl -fsS "$METRICSCALE_PROMETHEUS_URL/metrics" |
    awk '/^prometheus_http_requests_total\{/ && /handler="\/api\/v1\/query"/ { s += $NF } END { printf "%.0f\n", s }'
}
cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
# host_ticks — the machine's busy and total CPU ticks ("BUSY TOTAL", /proc/stat).
host_ticks() { awk '/^cpu / { t = 0; for (i = 2; i <= 9 && i <= NF; i++) t += $i; print t - $5 - $6, t; exit }' /proc/stat; }
# proc_ticks — every process' CPU ticks, "PID COMM TICKS" a line (processes may come and go).
proc_ticks() {
  cat /proc/[0-9]*/stat 2>/dev/null |
    awk '{ i = index($0, " ("); j = match($0, /\) [A-Za-z] /); if (!i || !j) next
           comm = substr($0, i + 2, j - i - 2); rest = substr($0, j + 2); split(rest, f, " ")
           gsub(/ /, "_", comm); print $1, comm, f[12] + f[13] }'
}
# busiest_others BEFORE AFTER SECONDS PID... — the three busiest processes between two
# proc_ticks snapshots, but the PIDs given, in % of a core ("kube-apiserver 41%, ...").
busiest_others() {
  local before=$1 after=$2 secs=$3
  shift 3
  awk -v secs="$secs" -v hz="$CLK_TCK" -v skip=" $* " '
    FNR == NR { t0[$1] = $3; next }
    !index(skip, " " $1 " ") && ($1 in t0) { d = ($3 - t0[$1]) / hz / secs * 100; if (d >= 1) printf "%.0f %s\n", d, $2 }
  ' "$before" "$after" | sort -rn | head -n 3 | awk '{ printf "%s%s %d%%", (NR > 1 ? ", " : ""), $2, $1 } END { print "" }'
}
rss_mb() { awk '/^VmRSS:/ { printf "%.0f\n", $2 / 1024 }' "/proc/$1/status"; }
CLK_TCK=$(getconf CLK_TCK)

# fast_count ADAPTER — requests the adapter at ADAPTER served on its fast path (its /metrics).
fast_count() {
  curl -sS -k -H "Authorization: Bearer $(cat "$WORK/token")" "$1/metrics" 2>/dev/null |
    awk '/^metricscale_adapter_fast_path_requests_total\{served_by="fast"\}/ { v = $NF } END { printf "%.0f\n", v + 0 }'
}

printf '%-11s %-10s %-5s %8s %8s %8s %7s %9s %12s %7s %6s %12s %13s %6s\n' \
  case via cache "q/s" "p50-ms" "p99-ms" errors promql/q cpu-s/1000q rss-MB fast% client-cpu-s apiserver-cpu host% >"$WORK/table"

# run CASE VIA CACHE PID BASE URLFILE [ADAPTER] — one 30 s run of loadgen, one line of the
# table; with ADAPTER (one of ours, direct), the share of the requests its fast path served.
run() {
  local name=$1 via=$2 cache=$3 pid=$4 base=$5 urls=$6 adapter=${7:-} ca=()
  [[ $via == aggregator ]] && ca=(-cacert "$WORK/apiserver-ca.crt") || ca=(-insecure)
  sed "s|^|$base|" "$urls" >"$WORK/urls.run"
  local q0 c0 f0=0 out prof=''
  [[ -n $adapter ]] && f0=$(fast_count "$adapter")
  if [[ -n $adapter && -n $PROFILE_DIR ]]; then
    # over all but the run's last 2 s, so that the profile ends before the CPU counter is read
    local secs
    secs=$(awk -v d="$DURATION" 'BEGIN { n = d + 0; if (d ~ /m$/) n *= 60; n -= 2; if (n < 1) n = 1; printf "%d", n }')
    curl -fsS -k --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
      -o "$PROFILE_DIR/$name-$via-$cache.pprof" "$adapter/debug/pprof/profile?seconds=$secs" &
    prof=$!
  fi
  local h0 a0
  q0=$(promql_count) c0=$(cpu_ticks "$pid") h0=$(host_ticks) a0=$(cpu_ticks "$APISERVER_PID")
  proc_ticks >"$WORK/ticks.0"
  local t0=$EPOCHREALTIME
  out=$("$WORK/loadgen" -c "$CLIENTS" -d "$DURATION" -token-file "$WORK/token" "${ca[@]}" -urls-file "$WORK/urls.run" -json) ||
    die "loadgen failed for $name via $via"
  if [[ -n $prof ]]; then
    wait "$prof" || log "    no CPU profile for $name via $via ($adapter/debug/pprof/profile)"
  fi
  local q1 c1 h1 a1 fast=-
  q1=$(promql_count) c1=$(cpu_ticks "$pid") h1=$(host_ticks) a1=$(cpu_ticks "$APISERVER_PID")
  proc_ticks >"$WORK/ticks.1"
  local others
  others=$(busiest_others "$WORK/ticks.0" "$WORK/ticks.1" "$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { print b - a }')" "$pid" "$APISERVER_PID")
  local n
  n=$(jq -r .requests <<<"$out")
  ((n > 0)) || die "$name via $via: no answers ($(jq -r '.firstError // ""' <<<"$out"))"
  # (the loadgen's own requests only: the counter is read before and after)
  [[ -n $adapter ]] && fast=$(awk -v a="$f0" -v b="$(fast_count "$adapter")" -v n="$n" 'BEGIN { printf "%.0f", (b - a) / n * 100 }')
  printf '%-11s %-10s %-5s %8.0f %8.2f %8.2f %7d %9.3f %12.3f %7s %6s %12.3f %13.3f %6.0f\n' "$name" "$via" "$cache" \
    "$(jq -r .qps <<<"$out")" "$(jq -r '.p50 / 1e6' <<<"$out")" "$(jq -r '.p99 / 1e6' <<<"$out")" \
    "$(jq -r .errors <<<"$out")" "$(awk -v a="$q0" -v b="$q1" -v n="$n" 'BEGIN { print (b - a) / n }')" \
    "$(awk -v a="$c0" -v b="$c1" -v n="$n" -v hz="$CLK_TCK" 'BEGIN { print (b - a) / hz / n * 1000 }')" \
    "$(rss_mb "$pid")" "$fast" "$(jq -r --argjson n "$n" '.cpuSeconds / $n * 1000' <<<"$out")" \
    "$(awk -v a="$a0" -v b="$a1" -v n="$n" -v hz="$CLK_TCK" 'BEGIN { print (b - a) / hz / n * 1000 }')" \
    "$(awk -v a="$h0" -v b="$h1" 'BEGIN { split(a, x, " "); split(b, y, " "); if (y[2] > x[2]) printf "%.0f", (y[1] - x[1]) / (y[2] - x[2]) * 100; else print 0 }')" |
    tee -a "$WORK/table" >&2
  if [[ $(jq -r .errors <<<"$out") != 0 ]]; then
    log "    first error: $(jq -r '.firstError // ""' <<<"$out")"
  fi
  # (loadgen is gone by now: its CPU is the client-cpu-s column)
  [[ -n $others ]] && log "    also busy (% of a core): $others"
}

awk -v n="$SELECTORS" -v p="$EXT" 'BEGIN { for (i = 0; i < n; i++) printf "%s?labelSelector=queue%%3Dq-%d\n", p, (i * 7919) % n }' >"$WORK/selector.urls"
echo "$EXT" >"$WORK/all-series.urls"
echo "$PODS_PATH" >"$WORK/pods.urls"

DIRECT=https://127.0.0.1:$ADAPTER_PORT
AGGREGATOR=https://127.0.0.1:$APISERVER_PORT
log "==> waiting for the adapter to serve $SERIES series and $PODS pods"
wait_items "$DIRECT" "$EXT" "$SERIES" "$EXT (relist, then Prometheus' scrape)"
wait_items "$DIRECT" "$PODS_PATH" "$PODS" "pods metric (cAdvisor series of the pods, a 20s rate)"
wait_items "$AGGREGATOR" "$EXT" "$SERIES" "$EXT through the aggregator"

if [[ $PROMETHEUS_ADAPTER == true ]]; then
  PA_BIN=$(dirname "$METRICSCALE_KUBECTL")/prometheus-adapter
  [[ -x $PA_BIN ]] || die "prometheus-adapter is not built ($PA_BIN; hack/cluster.sh build builds it), or pass --no-prometheus-adapter"
  log "==> prometheus-adapter v0.12.0 on port $PA_PORT, the prom provider's rules, direct (each case right after ours, so both see the same load)"
  # The prom provider's rules/externalRules/resourceRules keys of hack/adapter-config.yaml,
  # un-indented into a prometheus-adapter rules file (block YAML; comments dropped).
  awk '
    /^- name: / { inprom = ($3 == "prom"); inopts = 0; next }
    inprom && /^  options:/ { inopts = 1; next }
    !inopts || /^[[:space:]]*#/ || /^[[:space:]]*$/ { next }
    { match($0, /^ */) } RLENGTH < 4 { inopts = 0; next }
    /^    [A-Za-z]+:/ { key = $1; sub(/:.*/, "", key); keep = (key == "rules" || key == "externalRules" || key == "resourceRules") }
    keep { print substr($0, 5) }
  ' "$REPO_ROOT/hack/adapter-config.yaml" >"$WORK/prometheus-adapter-rules.yaml"
  grep -q '^rules:' "$WORK/prometheus-adapter-rules.yaml" || die "no prom provider rules found in hack/adapter-config.yaml"
  mkdir -p "$WORK/pa-certs"
  "$PA_BIN" --prometheus-url="$METRICSCALE_PROMETHEUS_URL" --config="$WORK/prometheus-adapter-rules.yaml" \
    --metrics-relist-interval=10s --metrics-max-age=1m --secure-port="$PA_PORT" --bind-address=127.0.0.1 \
    --cert-dir="$WORK/pa-certs" --lister-kubeconfig="$KUBECONFIG" --authentication-kubeconfig="$KUBECONFIG" \
    --authorization-kubeconfig="$KUBECONFIG" -v=1 >"$WORK/prometheus-adapter.log" 2>&1 &
  PA_PID=$!
  PA=https://127.0.0.1:$PA_PORT
  wait_serving "$PA" "$PA_PID" prometheus-adapter "$WORK/prometheus-adapter.log"
fi

log "==> cache off: the running adapter (pid $ADAPTER_PID), $CLIENTS clients, $DURATION per case"
for via in direct aggregator; do
  base=$DIRECT
  [[ $via == aggregator ]] && base=$AGGREGATOR
  for c in selector all-series pods; do
    run "$c" "$via" off "$ADAPTER_PID" "$base" "$WORK/$c.urls" "$DIRECT"
    if [[ $via == direct && $PROMETHEUS_ADAPTER == true ]]; then
      run "$c" direct "p-a" "$PA_PID" "$PA" "$WORK/$c.urls"
    fi
  done
done

if [[ $CACHE_ON == true ]]; then
  log "==> cache on: a second adapter with queryCacheTTL $CACHE_TTL on port $CACHED_PORT${SECOND_ARGS[*]:+, also ${SECOND_ARGS[*]}}"
  mapfile -d '' ARGS <"/proc/$ADAPTER_PID/cmdline"
  CONFIG=''
  NEWARGS=()
  for a in "${ARGS[@]:1}"; do
    case $a in
      --secure-port=*) NEWARGS+=("--secure-port=$CACHED_PORT") ;;
      --push-port=*) NEWARGS+=("--push-port=$CACHED_PUSH_PORT") ;;
      --config=*) CONFIG=${a#--config=}; NEWARGS+=("--config=$WORK/config-cached.yaml") ;;
      *) NEWARGS+=("$a") ;;
    esac
  done
  [[ -n $CONFIG ]] || die "the running adapter has no --config: no Prometheus provider to cache"
  # queryCacheTTL next to every prometheus provider's url (replacing one already set).
  awk -v ttl="$CACHE_TTL" '
    /^ *queryCacheTTL:/ { next }
    /^ *- *name:/ { prom = 0 }
    /^ *type: *prometheus *$/ { prom = 1 }
    { print }
    prom && /^ *url:/ { match($0, /^ */); printf "%squeryCacheTTL: %s\n", substr($0, 1, RLENGTH), ttl; prom = 0 }
  ' "$CONFIG" >"$WORK/config-cached.yaml"
  grep -q "queryCacheTTL: $CACHE_TTL" "$WORK/config-cached.yaml" || die "could not set queryCacheTTL in a copy of $CONFIG"
  "${ARGS[0]}" "${NEWARGS[@]}" "${SECOND_ARGS[@]}" >"$WORK/adapter-cached.log" 2>&1 &
  CACHED_PID=$!
  CACHED=https://127.0.0.1:$CACHED_PORT
  wait_serving "$CACHED" "$CACHED_PID" "the second adapter" "$WORK/adapter-cached.log"
  for c in selector all-series pods; do
    run "$c" direct "on" "$CACHED_PID" "$CACHED" "$WORK/$c.urls" "$CACHED"
  done
  log "==> cache on through the aggregator: ${BENCH_APISERVICES[*]} point at port $CACHED_PORT for these cases"
  REPOINTED=true
  point_apiservices "$CACHED_PORT" || die "the APIServices did not become Available on port $CACHED_PORT"
  wait_items "$AGGREGATOR" "$EXT" "$SERIES" "$EXT through the aggregator from the second adapter"
  for c in selector all-series pods; do
    run "$c" aggregator "on" "$CACHED_PID" "$AGGREGATOR" "$WORK/$c.urls" "$CACHED"
  done
  point_apiservices "$ADAPTER_PORT" || die "could not point the APIServices back at port $ADAPTER_PORT"
  REPOINTED=false
fi


echo
cat "$WORK/table"
if [[ $PROMETHEUS_ADAPTER == true ]]; then
  echo
  echo "q/s as a ratio to prometheus-adapter v0.12.0 direct (cache p-a rows above), same run:"
  awk 'NR > 1 && $3 == "p-a" { pa[$1] = $4 }
       NR > 1 && $3 != "p-a" { rows[++n] = $0; c[n] = $1; v[n] = $2; k[n] = $3; q[n] = $4 }
       END { printf "%-11s %-10s %-5s %8s\n", "case", "via", "cache", "x p-a"
             for (i = 1; i <= n; i++) if (pa[c[i]] > 0) printf "%-11s %-10s %-5s %8.1f\n", c[i], v[i], k[i], q[i] / pa[c[i]] }' "$WORK/table"
fi
echo
echo "cpu-s/1000q and rss-MB: the adapter process serving the case (/proc); client-cpu-s: the load generator's"
echo "CPU-seconds per 1,000 queries; apiserver-cpu: the kube-apiserver's (the aggregator's proxying; direct, the"
echo "adapter's TokenReviews and SubjectAccessReviews); host%: the machine's CPU busy during the case (/proc/stat, every core: when"
echo "it nears 100, q/s is bound by CPU and the CPU columns say who takes it); fast%: the share of the case's"
echo "requests that adapter served on its fast path (metricscale_adapter_fast_path_requests_total); promql/q: Prometheus' /api/v1/query"
echo "requests per API query, from every client of that Prometheus. Goals (issue 9 §5): selector ≥ 8,000 q/s"
echo "direct and ≥ 2,000 through the aggregator, pods ≥ 5,000 q/s, all-series ≥ 200 q/s, or as ratios to"
echo "prometheus-adapter in the same run: selector ≥ 5x, pods ≥ 40x, all-series ≥ 15x."
