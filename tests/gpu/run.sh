#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU, build what changed since
# tests/gpu/prepare.sh built it here, run the CUDA checks and the GPU
# benchmarks, and report, all under one deadline.
#
#   tests/gpu/prepare.sh     here first: Check as unpacked .deb files, and
#                            build-gpu configured and built with the device's
#                            options (tests/gpu/config.sh)
#   tests/gpu/run.sh         there, carrying third_party/deps and build-gpu
#                            (docs/development.md, "The GPU check")
#
# One line per check as it finishes, figures prefixed by their benchmark:
#     check=backend_cuda status=pass secs=12
#     cache.swap_efficiency=0.931
# status is pass, FAIL or SKIP; on a machine with a GPU a SKIP counts as a
# failure. The checks are listed in tests/gpu/checks.sh (add yours there).
#
# Deadline: GF_GPU_DEADLINE seconds in all (default 300), the build included;
# every step runs under `timeout` of what is left, so the script returns in
# time with its logs even when a step hangs. Output goes to $OUT (the device
# tool's folder; tests/gpu/out elsewhere) as it is written, five files:
#   summary.txt  the result lines and figures      figures.txt  figures alone
#   checks.log   every check's output              build.log    configure + ninja
#   env.txt      the machine, the toolkit, the tree
# Exit status: 0 every check passed, 1 something failed (or was skipped on a
# GPU machine), 77 no GPU here (the GPU checks were skipped).
#
# Environment: GF_GPU_DEADLINE; GF_GPU_BUILDDIR (default build-gpu);
# GF_GPU_CHECKS_FILE (default tests/gpu/checks.sh, for testing the script);
# GF_GPU_ONLY="name ..." to run some checks only.
# shellcheck disable=SC2317 # the check functions run in their own bash (export -f)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
GF_ROOT=$PWD
GF_T0=$(date +%s)
GF_DEADLINE=${GF_GPU_DEADLINE:-300}
GF_RESERVE=5 # seconds kept for the summary
OUT=${OUT:-$GF_ROOT/tests/gpu/out}
mkdir -p "$OUT"
: > "$OUT/summary.txt"
: > "$OUT/figures.txt"
: > "$OUT/checks.log"
: > "$OUT/build.log"
export OUT GF_ROOT
export PATH="$PATH:/usr/local/cuda/bin"
# shellcheck source=tests/gpu/config.sh
. tests/gpu/config.sh

gf_left() { echo $((GF_T0 + GF_DEADLINE - $(date +%s))); }
gf_now() { date +%s; }

# A result line: to the terminal and to summary.txt as it happens.
gf_emit() { printf '%s\n' "$*" | tee -a "$OUT/summary.txt"; }

# ---- the checks' registry (filled by checks.sh) ------------------------------
GF_NAMES=()
declare -A GF_SECS GF_NEEDS GF_TARGETS
gf_check() { # NAME SECONDS NEEDS TARGET...
  local name=$1 secs=$2 needs=$3
  shift 3
  GF_NAMES+=("$name")
  GF_SECS[$name]=$secs
  GF_NEEDS[$name]=$needs
  GF_TARGETS[$name]="$*"
}

# ---- helpers the checks use (exported into each check's bash) -----------------
gf_note() { printf 'gf_note: %s\n' "$*"; }

# The environment a Check suite gets from meson (tests/meson.build), here
# with the machine's own python3 and CUDA libraries.
gf_test_env() {
  export CK_DEFAULT_TIMEOUT=${CK_DEFAULT_TIMEOUT:-120}
  export GF_SOURCE_ROOT=$GF_ROOT GF_BUILD_ROOT=$GF_ROOT/$GF_B
  export GPUFAAS_CUDA_MODULE=$GF_ROOT/$GF_B/runtime/libgf_backend_cuda.so
  export GF_WORKER=$GF_ROOT/$GF_B/runtime/worker/gpufaas-worker
  local py
  py=$(command -v python3 || true)
  [ -n "$py" ] && export GF_PYTHON=$py
  if [ -n "${GF_CUDA_LIB:-}" ]; then
    export LD_LIBRARY_PATH=$GF_CUDA_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
}

gf_test() { gf_test_with "" "$@"; }

# gf_test_with WRAPPER EXE ARGS...: a Check suite under a wrapper command.
gf_test_with() {
  local wrap=$1 exe=$2
  shift 2
  gf_test_env
  # shellcheck disable=SC2086
  $wrap "$GF_B/$exe" "$@"
}

# gf_bench NAME EXE ARGS...: a benchmark (EXE in the build folder, or an
# absolute path); its one-figure lines become NAME.key=value.
gf_bench() {
  local name=$1 exe=$2 tmp rc
  shift 2
  gf_test_env
  case $exe in /*) ;; *) exe=$GF_B/$exe ;; esac
  tmp=$(mktemp)
  "$exe" "$@" > "$tmp" 2>&1
  rc=$?
  cat "$tmp"
  grep -E '^[a-z][a-z0-9_]*=[^ ]*$' "$tmp" | grep -v '^device=' | sed "s/^/$name./" \
    | tee -a "$OUT/figures.txt" | sed 's/^/gf_figure: /'
  rm -f "$tmp"
  return "$rc"
}

# ---- running one check under the deadline ----------------------------------------
GF_FAILED=0
GF_COUNT_PASS=0
GF_COUNT_FAIL=0
GF_COUNT_SKIP=0

gf_result() { # NAME STATUS SECS NOTE
  local line="check=$1 status=$2 secs=$3"
  [ -n "$4" ] && line="$line $4"
  gf_emit "$line"
  case $2 in
    pass) GF_COUNT_PASS=$((GF_COUNT_PASS + 1)) ;;
    SKIP)
      GF_COUNT_SKIP=$((GF_COUNT_SKIP + 1))
      [ "$GF_HAVE_GPU" = 1 ] && GF_FAILED=1
      ;;
    *)
      GF_COUNT_FAIL=$((GF_COUNT_FAIL + 1))
      GF_FAILED=1
      ;;
  esac
}

# gf_run NAME CAP FUNCTION: FUNCTION in its own bash under timeout, its
# output to checks.log.
gf_run() { gf_run_logged "$1" "$2" "$3" "$OUT/checks.log"; }

gf_run_logged() { # NAME CAP FUNCTION LOGFILE
  local name=$1 cap=$2 fn=$3 logfile=$4 left t start rc note log
  left=$(($(gf_left) - GF_RESERVE))
  if [ "$left" -lt 5 ]; then
    gf_result "$name" SKIP 0 "(no time left before the ${GF_DEADLINE}s deadline)"
    return
  fi
  t=$left
  [ "$cap" -gt 0 ] && [ "$cap" -lt "$t" ] && t=$cap
  log=$(mktemp)
  printf '\n===== %s (up to %ss) =====\n' "$name" "$t" >> "$logfile"
  start=$(gf_now)
  timeout -k 5 "$t" bash -c "$fn" 2>&1 | tee -a "$logfile" > "$log"
  rc=${PIPESTATUS[0]}
  local secs=$(($(gf_now) - start))
  grep '^gf_figure: ' "$log" | sed 's/^gf_figure: //' | tee -a "$OUT/summary.txt"
  note=$(grep '^gf_note: ' "$log" | tail -1 | sed 's/^gf_note: //')
  rm -f "$log"
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    gf_result "$name" FAIL "$secs" "(timed out after ${t}s)"
  elif [ "$rc" = 0 ]; then
    gf_result "$name" pass "$secs" "${note:+($note)}"
  elif [ "$rc" = 77 ]; then
    gf_result "$name" SKIP "$secs" "(${note:-skipped by the test itself: see checks.log})"
  else
    gf_result "$name" FAIL "$secs" "(exit $rc${note:+; $note}; see $(basename "$logfile"))"
    [ "$name" = build ] && tail -30 "$logfile"
  fi
}

# ---- the machine -------------------------------------------------------------
GF_HAVE_GPU=0
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(uname -srm)"
  if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    nvidia-smi -L
    nvidia-smi --query-gpu=name,memory.total,driver_version,pcie.link.gen.max,pcie.link.width.max \
      --format=csv 2>&1
  else
    echo "gpu: none (nvidia-smi missing or lists no GPU)"
  fi
  echo "nvcc: $(nvcc --version 2>/dev/null | tail -1 || echo none)"
  echo "meson: $(meson --version 2>/dev/null || echo none) ninja: $(ninja --version 2>/dev/null || echo none)"
  echo "python3: $(python3 -c 'import sys, numpy; print(sys.version.split()[0], "numpy", numpy.__version__)' 2>&1)"
  [ -f "$GF_GPU_BUILDDIR/gf-prepared.txt" ] && cat "$GF_GPU_BUILDDIR/gf-prepared.txt"
} > "$OUT/env.txt" 2>&1
if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  GF_HAVE_GPU=1
fi
# the toolkit's libraries, for a module built elsewhere
nvcc_path=$(command -v nvcc || true)
if [ -n "$nvcc_path" ]; then
  for d in "$(dirname "$(dirname "$(readlink -f "$nvcc_path")")")"/lib64 /usr/local/cuda/lib64; do
    if [ -d "$d" ]; then GF_CUDA_LIB=$d; break; fi
  done
fi
export GF_HAVE_GPU GF_CUDA_LIB=${GF_CUDA_LIB:-}
gf_emit "gpu=$([ "$GF_HAVE_GPU" = 1 ] && nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr ' ' _ || echo none)"

# ---- the checks' list --------------------------------------------------------
GF_CHECKS_FILE=${GF_GPU_CHECKS_FILE:-tests/gpu/checks.sh}
# shellcheck source=tests/gpu/checks.sh
. "$GF_CHECKS_FILE"
if [ -n "${GF_GPU_ONLY:-}" ]; then
  keep=()
  for n in "${GF_NAMES[@]}"; do
    case " $GF_GPU_ONLY " in *" $n "*) keep+=("$n") ;; esac
  done
  GF_NAMES=("${keep[@]}")
fi
declare -A want_target
for n in "${GF_NAMES[@]}"; do
  for t in ${GF_TARGETS[$n]}; do want_target[$t]=1; done
done

# ---- the build: what changed since prepare.sh, else from scratch ---------------
GF_B=$GF_GPU_BUILDDIR
export GF_B

# A build folder prepared in another checkout records that checkout's
# absolute path (meson, the tests' GF_BUILD_DIR): make that path lead here.
gf_adopt_prepared() {
  local info=$GF_B/meson-info/meson-info.json src
  [ -f "$info" ] || return 1
  src=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["directories"]["source"])' \
        "$info" 2>/dev/null) || return 1
  [ -n "$src" ] || return 1
  [ "$(readlink -f "$src")" = "$(readlink -f "$GF_ROOT")" ] && return 0
  if [ ! -e "$src" ]; then
    mkdir -p "$(dirname "$src")" && ln -s "$GF_ROOT" "$src" && return 0
  fi
  echo "the prepared $GF_B was configured for $src, which is another tree here"
  return 1
}

gf_configure() {
  local opts
  mapfile -t opts < <(gf_gpu_meson_options "$GF_ROOT")
  echo "meson setup $GF_B ${opts[*]}"
  meson setup "$GF_B" "${opts[@]}"
}

check_build() {
  local targets
  read -r -a targets <<< "$GF_BUILD_TARGETS"
  if [ -f "$GF_B/build.ninja" ] && gf_adopt_prepared; then
    echo "building what changed in the prepared $GF_B: ${targets[*]}"
    local log rc
    log=$(mktemp)
    ninja -C "$GF_B" "${targets[@]}" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    if [ "$rc" = 0 ]; then
      rm -f "$log"
      gf_note "prepared build"
      return 0
    fi
    # a compile error fails here as it would afresh; only a build folder
    # this machine cannot use (meson must regenerate it, and the meson it
    # recorded is not here) is worth configuring again
    if ! grep -q 'Regenerating build files\|REGENERATE\|meson.*No such file' "$log"; then
      rm -f "$log"
      return "$rc"
    fi
    rm -f "$log"
    echo "the prepared build folder cannot be used here: configuring afresh"
  fi
  rm -rf "$GF_B"
  gf_configure || return 1
  ninja -C "$GF_B" "${targets[@]}" || return 1
  gf_note "configured and built here"
}
export GF_GPU_DEPS GF_BUILD_TARGETS="${!want_target[*]}"
export -f check_build gf_adopt_prepared gf_configure gf_gpu_meson_options gf_note
if [ -n "$GF_BUILD_TARGETS" ]; then
  gf_run_logged build 0 check_build "$OUT/build.log"
fi

# ---- run them ------------------------------------------------------------------
export -f gf_test gf_test_with gf_test_env gf_bench gf_note
for n in "${GF_NAMES[@]}"; do
  if [ "${GF_NEEDS[$n]}" = gpu ] && [ "$GF_HAVE_GPU" != 1 ]; then
    gf_result "$n" SKIP 0 "(no GPU on this machine)"
    continue
  fi
  missing=
  for t in ${GF_TARGETS[$n]}; do
    [ -e "$GF_B/$t" ] || { missing=$t; break; }
  done
  if [ -n "$missing" ]; then
    gf_result "$n" SKIP 0 "(not built: $missing)"
    continue
  fi
  export -f "check_$n"
  gf_run "$n" "${GF_SECS[$n]}" "check_$n"
done

# ---- summary -------------------------------------------------------------------
took=$(($(gf_now) - GF_T0))
{
  echo
  echo "== summary (${took}s of ${GF_DEADLINE}s; $OUT) =="
  grep '^check=' "$OUT/summary.txt"
  echo "== figures =="
  cat "$OUT/figures.txt"
  [ "$GF_HAVE_GPU" = 1 ] && [ "$GF_COUNT_SKIP" -gt 0 ] && echo "(a SKIP on a GPU machine counts as a failure)"
} | tee -a "$OUT/summary.txt"
gf_emit "$GF_COUNT_PASS passed, $GF_COUNT_FAIL failed, $GF_COUNT_SKIP skipped"
if [ "$GF_FAILED" = 1 ]; then
  exit 1
fi
if [ "$GF_HAVE_GPU" != 1 ]; then
  exit 77
fi
exit 0
