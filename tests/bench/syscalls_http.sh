#!/usr/bin/env bash
# System calls the gateway makes per request, by call and by thread, at one
# concurrency, for one or more builds: the kernel's share of a request's cost,
# which callgrind (instr_http.sh) does not see.
#
#   tests/bench/syscalls_http.sh LEVEL [BUILD_DIR...]      (default: build)
#
# For each BUILD_DIR, this tree's bench_http (build/) drives BUILD_DIR's
# gpufaas and worker at concurrency LEVEL; once warm, `perf trace -s` counts
# the gateway's system calls for 2 s, and the requests sent to workers in the
# same window come from /metrics (gpufaas_batch_size_sum, with or without
# labels). Prints, per build:
#   requests_<dir>=, batches_<dir>=        in the traced window
#   syscalls_per_req_<dir>=                all of them
#   <dir> <thread> <call> <per request>    each call of each thread (>= 0.01)
# perf trace slows the gateway (counts per request hold; times do not).
# Needs perf (with syscall tracepoints: root) and curl. Never fails on speed.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
level=${1:?usage: tests/bench/syscalls_http.sh LEVEL [BUILD_DIR...]}
shift
dirs=("$@")
[ ${#dirs[@]} -gt 0 ] || dirs=(build)
bench=$root/build/tests/bench/bench_http
command -v perf >/dev/null || { echo "syscalls_http: perf is not installed" >&2; exit 1; }
tmp=$(mktemp -d /tmp/gfsyscalls.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
for d in "${dirs[@]}"; do
  dir=$(cd "$d" && pwd)
  name=$(basename "$d" | tr -c 'A-Za-z0-9_\n' '_')
  "$bench" "$dir/gateway/gpufaas" "$dir/runtime/worker/gpufaas-worker" 6 "$level" > "$tmp/out" 2>&1 &
  bp=$!
  for _ in $(seq 600); do grep -q '^worker_pid=' "$tmp/out" 2>/dev/null && break; sleep 0.1; done
  gp=$(sed -n 's/^gateway_pid=//p' "$tmp/out")
  url=$(ss -ltnp 2>/dev/null | grep "pid=$gp," | awk '{print $4}' | head -1)
  sleep 1.5 # warm
  # the window is perf's own: /metrics is read inside it, at both ends
  cat > "$tmp/window.sh" <<WIN
#!/bin/sh
m() { curl -s "http://$url/metrics" | sed -n 's/^gpufaas_batch_size_\(sum\|count\)\({[^}]*}\)\{0,1\} //p' | tr '\n' ' '; }
m > "$tmp/m0"; sleep 2; m > "$tmp/m1"
WIN
  chmod +x "$tmp/window.sh"
  perf trace -s -p "$gp" -o "$tmp/trace" -- "$tmp/window.sh" >/dev/null 2>&1
  wait "$bp" || true
  read -r s0 c0 _ < "$tmp/m0" || true # one line, no newline
  read -r s1 c1 _ < "$tmp/m1" || true
  reqs=$(awk -v a="$s0" -v b="$s1" 'BEGIN { print b - a }')
  echo "requests_$name=$reqs"
  echo "batches_$name=$(awk -v a="$c0" -v b="$c1" 'BEGIN { print b - a }')"
  awk -v r="$reqs" -v k="$name" '
    /events,/ { t = $1 $2; sub(/,$/, "", t) }
    /^ +[a-z_0-9]+ +[0-9]+ / { n[t " " $1] += $2; all += $2 }
    END { if (r <= 0) exit
          printf "syscalls_per_req_%s=%.2f\n", k, all / r
          for (x in n) if (n[x] / r >= 0.01) printf "%s %s %.2f\n", k, x, n[x] / r }' \
    "$tmp/trace" | sort -k1,1 -k4,4nr
done
