#!/usr/bin/env bash
# bench_http on this tree and on an earlier commit, in one run, on one machine.
#
#   tests/bench/compare_http.sh REV [SECONDS] [BUILD]
#
# Exports REV (git archive) into build-prev-src/, builds its gpufaas and
# gpufaas-worker in build-prev/ (cuda off), then runs this tree's bench_http
# (BUILD, default build/) against REV's binaries and against BUILD's, one after
# the other, SECONDS (default 3) per concurrency each. Prints each run's
# key=value lines (REV's prefixed prev_) and the ratios the request path is
# judged by (new / previous):
#   rps_c64_ratio, p99_ms_c64_ratio, p50_us_c1_ratio
# REV's workers predate the device counters in STATS, so its
# device_allocs_per_request is not shown. Never fails on speed.
set -euo pipefail
cd "$(dirname "$0")/../.."
rev=${1:?usage: tests/bench/compare_http.sh REV [SECONDS] [BUILD]}
secs=${2:-3}
b=${3:-build}
src=build-prev-src
out=build-prev
commit=$(git rev-parse --verify "$rev^{commit}")
if [ ! -f "$src/.gf_commit" ] || [ "$(cat "$src/.gf_commit")" != "$commit" ]; then
  rm -rf "$src" "$out"
  mkdir -p "$src"
  git archive "$commit" | tar -x -C "$src"
  echo "$commit" > "$src/.gf_commit"
fi
if [ ! -f "$out/build.ninja" ]; then
  meson setup "$out" "$src" -Dcuda=disabled -Dtests=disabled >/dev/null
fi
ninja -C "$out" gateway/gpufaas runtime/worker/gpufaas-worker >/dev/null
ninja -C "$b" tests/bench/bench_http gateway/gpufaas runtime/worker/gpufaas-worker >/dev/null

echo "previous=$(git rev-parse --short "$commit") current=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!docs' || echo '+changes')"
prev=$("$b/tests/bench/bench_http" "$out/gateway/gpufaas" "$out/runtime/worker/gpufaas-worker" "$secs")
cur=$("$b/tests/bench/bench_http" "$b/gateway/gpufaas" "$b/runtime/worker/gpufaas-worker" "$secs")
printf '%s\n' "$prev" | grep -v '^device_\(allocs\|frees\)_per_request=' | sed 's/^/prev_/'
printf '%s\n' "$cur"
get() { printf '%s\n' "$1" | sed -n "s/^$2=\([0-9.]*\).*/\1/p" | head -1; }
for k in rps_c64 p99_ms_c64 p50_us_c1; do
  p=$(get "$prev" "$k")
  c=$(get "$cur" "$k")
  if [ -n "$p" ] && [ -n "$c" ]; then
    awk -v k="$k" -v p="$p" -v c="$c" 'BEGIN { if (p > 0) printf "%s_ratio=%.2f\n", k, c / p }'
  fi
done
