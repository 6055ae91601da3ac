#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU, build with CUDA, run the
# CUDA tests and the GPU benchmarks, and print a summary. Whoever has a GPU
# runs exactly this and records the figures in docs/performance.md.
#
#   tests/gpu/prepare.sh          # first, on a machine with apt (carries Check)
#   tests/gpu/run.sh              # then, on the GPU machine (under 5 minutes on an H200)
#
# The GPU machine has the CUDA toolkit, meson and ninja but none of our
# Debian -dev packages: only the runtime (core, backend, cache, functions,
# worker) is built there (-Dgateway=disabled), with Check from
# third_party/deps. Benchmark output goes to tests/gpu/out/ (and to $OUT when
# the device tool sets it).
set -uo pipefail
cd "$(dirname "$0")/../.."
say() { printf '==> %s\n' "$*"; }
start=$(date +%s)
out=${OUT:-tests/gpu/out}
mkdir -p "$out"
export PATH="$PATH:/usr/local/cuda/bin"

say "GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo 'nvidia-smi not found')"
if ! command -v nvcc >/dev/null; then
  say "nvcc not found: cannot build the CUDA backend"; exit 1
fi
deps=$PWD/third_party/deps
[ -d "$deps" ] || say "warning: $deps missing (run tests/gpu/prepare.sh first); tests need Check"

builddir=build-gpu
if [ ! -f $builddir/build.ninja ]; then
  say "configuring $builddir (CUDA enabled, runtime only)"
  meson setup $builddir -Dcuda=enabled -Dgateway=disabled -Dtests=enabled \
        -Ddeps_root="$deps" -Dbuildtype=release -Db_ndebug=false > "$out/configure.log" 2>&1 \
    || { tail -30 "$out/configure.log"; exit 1; }
fi
say "building"
ninja -C $builddir -j "$(nproc)" > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }

status=0
say "tests: every suite (the cuda ones run for real here)"
meson test -C $builddir --print-errorlogs --num-processes 4 > "$out/tests.log" 2>&1 || status=1
grep -E "^ *[0-9]+/[0-9]+ " "$out/tests.log"
tail -8 "$out/tests.log"

say "the built-in kinds on cuda:0 against the numpy reference"
GF_TEST_DEVICE=cuda:0 meson test -C $builddir functions_kinds --print-errorlogs \
  > "$out/kinds_cuda.log" 2>&1 || status=1
grep -E "err/scale|^ *[0-9]+/[0-9]+ " "$out/kinds_cuda.log"

bench() { # name, executable, args...
  local name=$1; shift
  say "benchmark $name $*"
  if [ -x "$1" ]; then
    timeout 120 "$@" > "$out/$name.txt" 2>&1 || { echo "(exit $?)" >> "$out/$name.txt"; }
    cat "$out/$name.txt"
  else
    echo "(not built)"
  fi
}
bench copy_cuda  $builddir/tests/bench/bench_copy cuda:0
bench gemm_cuda  $builddir/tests/bench/bench_gemm cuda:0
bench cache_cuda $builddir/tests/bench/bench_cache cuda:0
bench ipc_cuda   $builddir/tests/bench/bench_ipc cuda:0 $builddir/runtime/worker/gpufaas-worker

say "summary ($(( $(date +%s) - start ))s): tests $([ $status = 0 ] && echo passed || echo FAILED)"
grep -hE "^[a-z_0-9]+=" "$out"/*.txt 2>/dev/null | sort -u
exit $status
