#!/usr/bin/env bash
# Tests tests/gpu/run.sh's logic on any machine, with a fake GPU (a
# nvidia-smi on PATH that lists one) and without one: the result lines, the
# figures' prefixes, SKIP counted as a failure on a GPU machine, a check
# killed at its own cap, the deadline (checks past it are skipped, the script
# returns within it), the build step reusing a prepared folder, and the
# files under $OUT. Uses tests/gpu/fake_checks.sh and a fake build folder
# (a real ninja over a two-rule build.ninja).
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
expect() { # PATTERN FILE WHAT
  if ! grep -Eq -- "$1" "$2"; then
    echo "FAIL: $3: no line matching '$1' in $2:"
    sed 's/^/    /' "$2"
    fail=1
  fi
}
reject() { # PATTERN FILE WHAT
  if grep -Eq -- "$1" "$2"; then
    echo "FAIL: $3: a line matches '$1' in $2"
    fail=1
  fi
}

# a prepared build folder for this tree: meson-info names the source, ninja
# builds the two targets the checks name
b=$tmp/build-fake
mkdir -p "$b/meson-info" "$tmp/bin"
printf '{"directories": {"source": "%s", "build": "%s"}}\n' "$src" "$b" > "$b/meson-info/meson-info.json"
cat > "$b/fakebench.in" <<'B'
#!/bin/sh
echo "device=Fake GPU"
echo "chunk_bytes=65536 copy_gbps=1.0"
echo "alpha=1.5"
echo "beta_tflops=700.25"
B
cat > "$b/build.ninja" <<'N'
rule touch
  command = touch $out
rule exe
  command = cp $in $out && chmod +x $out
build fake.stamp: touch
build fakebench: exe fakebench.in
build no/such/target: phony
N
cat > "$tmp/bin/nvidia-smi" <<'S'
#!/bin/sh
case "$1" in
  -L) echo "GPU 0: Fake GPU (UUID: GPU-00000000)" ;;
  *) echo "Fake GPU" ;;
esac
S
chmod +x "$tmp/bin/nvidia-smi"

run() { # OUTDIR PATH-PREFIX ONLY DEADLINE
  local out=$1 pre=$2 only=$3 deadline=$4
  mkdir -p "$out"
  OUT=$out PATH="$pre$PATH" GF_GPU_BUILDDIR=$b GF_GPU_CHECKS_FILE=tests/gpu/fake_checks.sh \
    GF_GPU_DEADLINE=$deadline GF_GPU_ONLY="$only" "$src/tests/gpu/run.sh" > "$out/stdout" 2>&1
}

# 1. the whole list on a (fake) GPU machine, with a 22 s deadline
o1=$tmp/out1
t0=$(date +%s)
run "$o1" "$tmp/bin:" "" 22
rc=$?
took=$(($(date +%s) - t0))
s=$o1/summary.txt
[ "$rc" = 1 ] || { echo "FAIL: exit $rc, expected 1 (failures)"; fail=1; }
# returns at its deadline, give or take a loaded machine's seconds (without
# the deadline the long tail alone would run 60 s)
[ "$took" -le 30 ] || { echo "FAIL: took ${took}s past the 22 s deadline"; fail=1; }
expect '^gpu=Fake_GPU$' "$s" "the GPU line"
expect '^check=build status=pass secs=[0-9]+ \(prepared build\)$' "$s" "the prepared build"
expect '^check=fast_pass status=pass secs=[0-9]+$' "$s" "a pass"
expect '^check=a_skip status=SKIP secs=[0-9]+ \(nothing to do here\)$' "$s" "a skip with its note"
expect '^check=a_fail status=FAIL secs=[0-9]+ \(exit 3; see checks.log\)$' "$s" "a failure"
expect '^fake\.alpha=1\.5$' "$s" "a figure in the summary"
expect '^fake\.beta_tflops=700\.25$' "$o1/figures.txt" "a figure in figures.txt"
reject '^fake\.(device|chunk_bytes)' "$o1/figures.txt" "device names and detail lines are not figures"
expect '^check=hangs status=FAIL secs=[4-9] \(timed out after 4s\)$' "$s" "killed at its cap"
expect '^check=needs_gpu status=pass' "$s" "a GPU check on the GPU machine"
expect '^check=missing status=SKIP secs=0 \(not built: no/such/target\)$' "$s" "a missing target"
expect '^check=long_tail status=FAIL secs=[0-9]+ \(timed out after [0-9]+s\)$' "$s" "the deadline"
expect '^check=after status=SKIP secs=0 \(no time left before the 22s deadline\)$' "$s" "past the deadline"
expect '^4 passed, 3 failed, 3 skipped$' "$s" "the closing count (the build is a check)"
expect 'a SKIP on a GPU machine counts as a failure' "$s" "the SKIP rule"
expect 'hello from fast_pass' "$o1/checks.log" "a check's output"
expect '^boom$' "$o1/checks.log" "a check's stderr"
expect 'ninja' "$o1/build.log" "the build's output"
expect '^gpu: none|^GPU 0: Fake GPU' "$o1/env.txt" "the machine"
files=
for f in "$o1"/*; do
  [ "${f##*/}" = stdout ] || files="$files${f##*/} "
done
[ "$files" = "build.log checks.log env.txt figures.txt summary.txt " ] ||
  { echo "FAIL: files under OUT: $files"; fail=1; }
grep -q '^check=' "$o1/stdout" || { echo "FAIL: nothing on stdout"; fail=1; }

# 2. a SKIP on a GPU machine fails the run; the same without a GPU is exit 77
o2=$tmp/out2
run "$o2" "$tmp/bin:" "fast_pass a_skip" 30
rc=$?
[ "$rc" = 1 ] || { echo "FAIL: a SKIP on a GPU machine: exit $rc, expected 1"; fail=1; }
o3=$tmp/out3
run "$o3" "" "fast_pass needs_gpu a_skip" 30
rc=$?
[ "$rc" = 77 ] || { echo "FAIL: no GPU: exit $rc, expected 77"; cat "$o3/stdout"; fail=1; }
expect '^gpu=none$' "$o3/summary.txt" "no GPU"
expect '^check=needs_gpu status=SKIP secs=0 \(no GPU on this machine\)$' "$o3/summary.txt" \
  "a GPU check without a GPU"
expect '^check=fast_pass status=pass' "$o3/summary.txt" "a check that needs no GPU"
expect '^2 passed, 0 failed, 2 skipped$' "$o3/summary.txt" "the count without a GPU"

if [ "$fail" = 0 ]; then
  echo "run.sh: every check of its logic passed (deadline run took ${took}s of 22)"
fi
exit "$fail"
