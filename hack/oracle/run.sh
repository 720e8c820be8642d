#!/usr/bin/env bash
# Runs kube-controller-manager's HPA controller (upstream, unmodified) on
# scenario files and writes its answers beside them.
#
#   hack/oracle/run.sh [-k 1.37.2|1.36.3] -o OUTDIR SCENARIO.yaml...
#
# OUTDIR gets NAME.expected.jsonl per scenario. The module pins v1.37.2;
# -k 1.36.3 builds a copy of it against v1.36.3 (go mod tidy, in a
# temporary directory). Built with the faketime tag (virtual clock); see
# README.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version=1.37.2
out=
while getopts k:o: opt; do
  case $opt in
    k) version=$OPTARG ;;
    o) out=$OPTARG ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ -n "$out" ] && [ $# -gt 0 ] || { echo "usage: $0 [-k VERSION] -o OUTDIR SCENARIO..." >&2; exit 2; }
export CGO_ENABLED=0 GOFLAGS=-trimpath
mkdir -p "$out"
out=$(cd "$out" && pwd)
files=()
for f in "$@"; do files+=("$(cd "$(dirname "$f")" && pwd)/$(basename "$f")"); done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$here/go.mod" "$here/go.sum" "$here"/*.go "$work/"
cd "$work"
if [ "$version" != 1.37.2 ]; then
  staging=v0.${version#1.}
  go mod edit -require "k8s.io/kubernetes@v$version"
  sed -i "s#^replace \(k8s.io/[a-z-]*\) => \(k8s.io/[a-z-]*\) v0.37.2#replace \1 => \2 $staging#" go.mod
  go mod tidy >/dev/null
fi
# -checklinkname=0: linkname.go reaches two unexported methods of the
# controller (the module cache cannot be overlaid).
nice -n 10 go build -tags faketime -ldflags=-checklinkname=0 -o oracle .
for f in "${files[@]}"; do
  # Standard error is framed under faketime; the answers go to a file.
  ./oracle -f "$f" -o "$out/$(basename "$f" .yaml).expected.jsonl" 2>"$work/stderr" || { cat "$work/stderr" >&2; exit 1; }
done
