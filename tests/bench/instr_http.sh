#!/usr/bin/env bash
# Instructions the gateway executes per request at concurrency 64, for one or
# more builds, in one run: a figure the scheduling of a shared machine does not
# move (requests/s on 2 shared cores vary by 1.5x between runs of one binary).
#
#   tests/bench/instr_http.sh [BUILD_DIR...]      (default: build)
#
# For each BUILD_DIR, this tree's bench_http (build/) drives BUILD_DIR's
# gpufaas, run under valgrind's callgrind with instrumentation off until the
# concurrency-64 phase is warm, and BUILD_DIR's worker (not instrumented).
# Instrumentation is then on for 4 s; the requests answered meanwhile come from
# /metrics (gpufaas_requests_total). Prints, per build:
#   instr_per_req_<dir>=  callgrind's instructions (Ir) / requests answered
#   requests_<dir>=       how many requests that is (under valgrind ~1000)
# Under callgrind the gateway runs ~30x slower, so batches are larger than
# natively; the figure counts the work per request, not the hand-offs' cost.
# Use compare_http.sh's build-prev/ for the previous commit. Needs valgrind
# and curl. Never fails on speed.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
dirs=("$@")
[ ${#dirs[@]} -gt 0 ] || dirs=(build)
bench=$root/build/tests/bench/bench_http
command -v valgrind >/dev/null || { echo "instr_http: valgrind is not installed" >&2; exit 1; }
tmp=$(mktemp -d /tmp/gfinstr.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
for d in "${dirs[@]}"; do
  dir=$(cd "$d" && pwd)
  name=$(basename "$d" | tr -c 'A-Za-z0-9_\n' '_')
  cat > "$tmp/gw.sh" <<WRAP
#!/bin/sh
exec valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=$tmp/cg.%p \
  "$dir/gateway/gpufaas" "\$@"
WRAP
  chmod +x "$tmp/gw.sh"
  rm -f "$tmp"/cg.* "$tmp/out"
  "$bench" "$tmp/gw.sh" "$dir/runtime/worker/gpufaas-worker" 8 64 > "$tmp/out" 2>&1 &
  bp=$!
  for _ in $(seq 600); do grep -q '^worker_pid=' "$tmp/out" 2>/dev/null && break; sleep 0.1; done
  gp=$(sed -n 's/^gateway_pid=//p' "$tmp/out")
  url=$(ss -ltnp 2>/dev/null | grep "pid=$gp," | awk '{print $4}' | head -1)
  reqs() { curl -s "http://$url/metrics" | awk '/^gpufaas_requests_total\{/ {s += $2} END {print s + 0}'; }
  sleep 2 # warm, at concurrency 64
  callgrind_control -i on "$gp" >/dev/null 2>&1
  a=$(reqs)
  sleep 4
  b=$(reqs)
  callgrind_control -i off "$gp" >/dev/null 2>&1
  callgrind_control -d "$gp" >/dev/null 2>&1
  wait "$bp" || true
  ir=$(callgrind_annotate "$(ls "$tmp"/cg.*.1 | head -1)" 2>/dev/null |
       awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  n=$((b - a))
  echo "requests_$name=$n"
  awk -v i="$ir" -v n="$n" -v k="$name" 'BEGIN { if (n > 0) printf "instr_per_req_%s=%.0f\n", k, i / n }'
done
