#!/usr/bin/env bash
# bench_http on this tree and on an earlier commit, in one run, on one machine,
# alternating between the two.
#
#   tests/bench/compare_http.sh REV [SECONDS] [BUILD] [PAIRS]
#
# Exports REV (git archive) into build-prev-src/, builds its gpufaas and
# gpufaas-worker in build-prev/ (cuda off), then runs this tree's bench_http
# (BUILD, default build/) PAIRS times (default 5) against REV's binaries and
# against BUILD's, alternating which goes first (prev cur, cur prev, ...) so
# that a drift in the machine's load falls on both; SECONDS (default 3) per
# concurrency each, at concurrencies 1 and 64 (LEVELS=1,16,64 in the
# environment to add 16).
#
# Where the machine has 2 or more cores and taskset exists (PIN=0 turns it
# off), the server under test (gpufaas serve and the worker it starts) runs on
# CPU 0 and the load generator on CPU 1: at concurrency 64 the server's core is
# saturated, so rps_c64 is 1 / (the server's CPU time per request, kernel time
# included), and the load generator does not take cycles from it.
#
# Prints one line per pair (each build's rps_c64, p99_ms_c64, p50_us_c1,
# gateway and worker CPU per request at 64, batch_mean_c64 and steal=, the
# hypervisor's share of the machine's CPU time during the run (/proc/stat; a
# shared VM's stalls), and their ratios), the last run's key=value
# lines of each build (REV's prefixed prev_), and the medians over the pairs
# of the ratios the request path is judged by (new / previous):
#   rps_c64_ratio, p99_ms_c64_ratio, p50_us_c1_ratio,
#   gateway_cpu_us_per_req_c64_ratio
# REV's workers predate the device counters in STATS, so its
# device_allocs_per_request is not shown. Never fails on speed.
set -euo pipefail
cd "$(dirname "$0")/../.."
rev=${1:?usage: tests/bench/compare_http.sh REV [SECONDS] [BUILD] [PAIRS]}
secs=${2:-3}
b=${3:-build}
pairs=${4:-5}
levels=${LEVELS:-1,64}
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

tmp=$(mktemp -d /tmp/gfcompare.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
root=$PWD
load=()
pin=no
if [ "${PIN:-1}" != 0 ] && [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
  pin=yes
  load=(taskset -c 1)
fi
# build DIR's gateway on CPU 0 and its worker on CPU 1 when pinned
for d in prev cur; do
  dir=$out
  [ "$d" = cur ] && dir=$b
  gw=(); wk=()
  [ "$pin" = yes ] && gw=(taskset -c 0) && wk=(taskset -c 1)
  printf '#!/bin/sh\nexec %s "%s/%s/gateway/gpufaas" "$@"\n' "${gw[*]}" "$root" "$dir" > "$tmp/gw-$d"
  printf '#!/bin/sh\nexec %s "%s/%s/runtime/worker/gpufaas-worker" "$@"\n' "${wk[*]}" "$root" "$dir" > "$tmp/wk-$d"
  chmod +x "$tmp/gw-$d" "$tmp/wk-$d"
done

echo "previous=$(git rev-parse --short "$commit") current=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!docs' || echo '+changes') pairs=$pairs seconds=$secs levels=$levels pinned=$pin"
get() { sed -n "s/^$2=\([0-9.]*\).*/\1/p" "$1" | head -1; }
# the hypervisor's share of the machine's CPU time (/proc/stat steal) meanwhile: on a
# shared VM it stalls the run, whichever build it is (pairs with a high one are suspect)
cpu_times() { awk '/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i; print t, $9 }' /proc/stat; }
run() { # run BUILD(prev|cur) OUTFILE
  local t0 s0 t1 s1
  read -r t0 s0 < <(cpu_times)
  "${load[@]}" "$b/tests/bench/bench_http" "$tmp/gw-$1" "$tmp/wk-$1" "$secs" "$levels" > "$2"
  read -r t1 s1 < <(cpu_times)
  awk -v t="$((t1 - t0))" -v s="$((s1 - s0))" 'BEGIN { printf "steal=%.3f\n", (t > 0 ? s / t : 0) }' >> "$2"
}
keys="rps_c64 p99_ms_c64 p50_us_c1 gateway_cpu_us_per_req_c64 worker_cpu_us_per_req_c64 batch_mean_c64"
for i in $(seq "$pairs"); do
  if [ $((i % 2)) = 1 ]; then
    run prev "$tmp/prev.$i"; run cur "$tmp/cur.$i"
  else
    run cur "$tmp/cur.$i"; run prev "$tmp/prev.$i"
  fi
  line="pair=$i"
  for k in $keys; do
    p=$(get "$tmp/prev.$i" "$k")
    c=$(get "$tmp/cur.$i" "$k")
    [ -n "$p" ] && [ -n "$c" ] || continue
    r=$(awk -v p="$p" -v c="$c" 'BEGIN { if (p > 0) printf "%.3f", c / p }')
    echo "$r" >> "$tmp/ratio.$k"
    line="$line $k=$p->$c (${r})"
  done
  echo "$line steal=$(get "$tmp/prev.$i" steal),$(get "$tmp/cur.$i" steal)"
done
grep -v '^device_\(allocs\|frees\)_per_request=' "$tmp/prev.$pairs" | sed 's/^/prev_/'
cat "$tmp/cur.$pairs"
for k in $keys; do
  [ -s "$tmp/ratio.$k" ] || continue
  sort -n "$tmp/ratio.$k" | awk -v k="$k" '{ v[NR] = $1 }
    END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
          printf "%s_ratio=%.2f (median of %d; min %.2f, max %.2f)\n", k, m, NR, v[1], v[NR] }'
done
