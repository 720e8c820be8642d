#!/usr/bin/env bash
# hack/lowprio.sh [-n NICE] COMMAND [ARG...]: runs COMMAND at a low CPU priority,
# so that it takes the cores only when the rest leaves them idle (.ci/run and
# make test run the unit tests, vet and a build this way beside the e2e suite).
# nice alone is not enough where the kernel groups processes by session
# (autogroups): a nice value then ranks a process only within its session, and the
# local cluster's processes each run in a session of their own. So COMMAND gets a
# session of its own whose autogroup takes the same nice value. Default NICE: 19.
set -euo pipefail
n=19
if [ "${1:-}" = "-n" ]; then
  n=$2
  shift 2
fi
[ $# -gt 0 ] || { echo "usage: hack/lowprio.sh [-n NICE] COMMAND [ARG...]" >&2; exit 2; }
# Not a process group leader when started with &, so setsid makes this process the
# new session's leader without forking: kill -- -PID stops all of COMMAND.
exec setsid -w bash -c 'n=$1; shift; echo "$n" >/proc/self/autogroup 2>/dev/null || true; exec nice -n "$n" "$@"' lowprio "$n" "$@"
