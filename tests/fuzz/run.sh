#!/usr/bin/env bash
# Build the libFuzzer targets (clang, ASan + UBSan, -Dfuzz=true) in
# build-fuzz and run each from its seed corpus for SECONDS (default 30):
#
#   tests/fuzz/run.sh [SECONDS] [TARGET...]     e.g. tests/fuzz/run.sh 3600 fuzz_onnx
#
# Inputs that reach new code are kept in build-fuzz/corpus/TARGET (the
# committed seeds in tests/fuzz/corpus/TARGET are only read); a crash, leak,
# timeout (10 s) or more than 2 GB of memory on one input stops that target,
# leaves the input in build-fuzz/crashes/ and makes the script exit 1. One
# line per target: "fuzz=NAME status=pass|FAIL secs=S runs=N".
# Exits 77 when clang's libFuzzer is not there.
set -uo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-30}
shift || true
dir=${GF_FUZZ_BUILD:-build-fuzz}
if ! command -v clang >/dev/null; then
  echo "fuzz: clang not found (deploy/install-deps.sh --test installs it)"; exit 77
fi
if ! echo 'int LLVMFuzzerTestOneInput(const char *d, long n){return 0;}' |
     clang -x c -fsanitize=fuzzer -o /dev/null - 2>/dev/null; then
  echo "fuzz: clang has no libFuzzer (libclang-rt-dev)"; exit 77
fi
if [ ! -f "$dir/build.ninja" ]; then
  CC=clang meson setup "$dir" -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false \
    -Dbuildtype=debugoptimized -Dwerror=false -Dcuda=disabled -Dtests=disabled >/dev/null ||
    { echo "fuzz: meson setup failed"; exit 1; }
fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for c in tests/fuzz/corpus/*/; do targets+=("$(basename "$c")"); done
fi
ninja -C "$dir" build.ninja >/dev/null 2>&1 # regenerate after a meson.build change
known=$(ninja -C "$dir" -t targets all 2>/dev/null)
built=()
for t in "${targets[@]}"; do
  if grep -q "^tests/fuzz/$t:" <<<"$known"; then
    built+=("tests/fuzz/$t")
  else
    echo "fuzz=$t status=SKIP (not built here: its parser is not in this configuration)"
  fi
done
[ ${#built[@]} -gt 0 ] || exit 77
ninja -C "$dir" -j "${GF_FUZZ_JOBS:-2}" "${built[@]}" >/dev/null || { echo "fuzz: build failed"; exit 1; }
mkdir -p "$dir/crashes"
status=0
for b in "${built[@]}"; do
  t=$(basename "$b")
  mkdir -p "$dir/corpus/$t"
  start=$(date +%s)
  log="$dir/crashes/$t.log"
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=detect_leaks=1 \
    "$dir/$b" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=1048576 \
    -print_final_stats=1 -artifact_prefix="$dir/crashes/$t-" \
    "$dir/corpus/$t" "tests/fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  if [ $rc -eq 0 ]; then
    echo "fuzz=$t status=pass secs=$(( $(date +%s) - start )) runs=${runs:-0}"
  else
    echo "fuzz=$t status=FAIL secs=$(( $(date +%s) - start )) (log: $log)"
    grep -m3 -E "ERROR|SUMMARY|Test unit written" "$log" | sed 's/^/  /'
    status=1
  fi
done
exit $status
