#!/usr/bin/env bash
# Install what is missing, build both configurations (release and
# AddressSanitizer + UndefinedBehaviorSanitizer), run every test with
# `meson test`. Exits non-zero when anything fails. CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '==> %s\n' "$*"; }
start=$(date +%s)

say "checking dependencies"
./deploy/install-deps.sh --test

export PATH="$PWD/.venv/bin:$PATH"
# The CUDA toolkit, when present, usually lives here without being on PATH.
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="$PATH:/usr/local/cuda/bin"
fi
if command -v nvcc >/dev/null; then
  say "nvcc found: the CUDA backend is compiled (its tests skip without a GPU)"
else
  say "no nvcc: building without the CUDA backend"
fi

jobs=$(nproc 2>/dev/null || echo 2)
status=0
failed_dirs=()

# What failed, named again at the very end: a CI log is often read from its
# tail, and meson's own summary sits above the later configurations' output.
summarize_failures() { # build dir
  python3 - "$1/meson-logs/testlog.json" <<'PY' || true
import json, sys
path = sys.argv[1]
try:
    lines = open(path, encoding="utf-8", errors="replace").read().splitlines()
except OSError as e:
    print(f"    (no test log: {e})"); sys.exit(0)
for line in lines:
    try:
        t = json.loads(line)
    except ValueError:
        continue
    if t.get("result") in ("OK", "SKIP", "EXPECTEDFAIL"):
        continue
    print(f"--- {t.get('name')}: {t.get('result')} "
          f"(exit {t.get('returncode')}, {t.get('duration', 0):.1f} s)")
    out = (t.get("stdout") or "") + (t.get("stderr") or "")
    for l in out.splitlines()[-40:]:
        print("    " + l[:300])
PY
}

run_config() { # name, meson options...
  local dir=$1; shift
  if [ ! -f "$dir/build.ninja" ]; then
    say "configuring $dir ($*)"
    meson setup "$dir" "$@" >/dev/null
  fi
  say "building $dir"
  ninja -C "$dir" -j "$jobs"
  say "testing $dir"
  if ! meson test -C "$dir" --print-errorlogs --num-processes "$jobs"; then
    say "FAILED: tests in $dir (log: $dir/meson-logs/testlog.txt)"
    failed_dirs+=("$dir")
    status=1
  fi
}

run_config build
run_config build-asan -Dbuildtype=debug -Db_sanitize=address,undefined -Db_lundef=false -Dcuda=disabled

# the parsers of outside input under libFuzzer, briefly, from the committed
# seeds (tests/fuzz/run.sh SECONDS runs them for as long as wanted)
say "fuzzing each parser for ${GF_FUZZ_SECS:-10} s (build-fuzz, clang)"
rc=0
GF_FUZZ_JOBS="$jobs" tests/fuzz/run.sh "${GF_FUZZ_SECS:-10}" || rc=$?
if [ "$rc" = 77 ]; then
  say "fuzz targets skipped (no clang with libFuzzer)"
elif [ "$rc" != 0 ]; then
  say "FAILED: a fuzz target (logs and inputs in build-fuzz/crashes)"
  status=1
fi

took=$(( $(date +%s) - start ))
if [ "$status" = 0 ]; then
  say "all tests passed in both configurations (${took}s)"
else
  for dir in "${failed_dirs[@]}"; do
    say "failed in $dir (each with the end of its output):"
    summarize_failures "$dir"
  done
  say "some tests failed (${took}s)"
fi
exit "$status"
