#!/usr/bin/env bash
# Runs bench_state's three benchmarks, the restart and upload ones against this
# build and against the commit before issue 15's change (which re-hashed every weights
# file at start), built here in a folder of its own for the ratio.
#
#   tests/bench/bench_state.sh BUILD_DIR [OLD_REV]
#
# OLD_REV defaults to the parent of the commit that removed the hand-written
# SHA-256 (runtime/core/sha256.c). Its build is kept in
# BUILD_DIR/bench-before-<rev> (made once, a few minutes on 2 cores). Prints
# key=value lines; the files it writes go under $TMPDIR and are removed.
set -euo pipefail
build=$(cd "${1:?usage: bench_state.sh BUILD_DIR [OLD_REV]}" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
rev=${2:-}
if [ -z "$rev" ]; then
  change=$(git -C "$src" log -1 --format=%H --diff-filter=D -- runtime/core/sha256.c)
  [ -n "$change" ] || { echo "bench_state.sh: give OLD_REV (no commit removed runtime/core/sha256.c)" >&2; exit 2; }
  rev=$(git -C "$src" rev-parse "$change^")
fi
short=$(git -C "$src" rev-parse --short "$rev")
old=$build/bench-before-$short
if [ ! -x "$old/build/gateway/gpufaas" ] || [ ! -x "$old/build/runtime/worker/gpufaas-worker" ]; then
  echo "building $short (the commit before the change) in $old ..." >&2
  rm -rf "$old"
  mkdir -p "$old/src"
  git -C "$src" archive "$rev" | tar -x -C "$old/src"
  meson setup "$old/build" "$old/src" -Dcuda=disabled -Dtests=disabled >/dev/null
  ninja -C "$old/build" -j2 gateway/gpufaas runtime/worker/gpufaas-worker >/dev/null
fi
bench=$build/tests/bench/bench_state
echo "before=$short"
"$bench" upload "$build/gateway/gpufaas" "$build/runtime/worker/gpufaas-worker" \
  "$old/build/gateway/gpufaas" "$old/build/runtime/worker/gpufaas-worker"
"$bench" store "$build/gateway/gpufaas" "$build/runtime/worker/gpufaas-worker"
"$bench" restart "$build/gateway/gpufaas" "$build/runtime/worker/gpufaas-worker" \
  "$old/build/gateway/gpufaas" "$old/build/runtime/worker/gpufaas-worker"
