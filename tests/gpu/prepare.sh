#!/usr/bin/env bash
# Run HERE (a machine with Debian's package registry) before tests/gpu/run.sh
# is sent to a GPU machine, in the checkout the device call sends:
#
#  1. Check and subunit (static libraries) as .deb files, unpacked with
#     dpkg -x into third_party/deps: the GPU machine has the CUDA toolkit,
#     meson and ninja but no package registry and none of our -dev packages;
#  2. build-gpu configured with exactly the device's options
#     (tests/gpu/config.sh) and the checks' targets built (tests/gpu/checks.sh),
#     so that on the device ninja builds only what changed since;
#  3. the ONNX cases of the onnx_cuda check, imported into build-gpu/onnx-cases
#     (needs the release build in build/ and .venv: deploy/test.sh makes both).
#  4. the density check's gateway: gpufaas and bench_density from this
#     machine's own build (GF_GW_BUILDDIR, default build; configured with
#     -Dcuda=disabled when missing), copied with the shared libraries they
#     need beyond the C library into third_party/deps/gw/{bin,lib} (the
#     device has none of the gateway's libraries).
#
# Then the device call carries both: carry ["third_party/deps", "build-gpu"]
# (what git ignores travels only when named; together well under the
# tool's 64 MiB). prepare.sh prints their sizes.
set -euo pipefail
cd "$(dirname "$0")/../.."
say() { printf '==> %s\n' "$*"; }
# shellcheck source=tests/gpu/config.sh
. tests/gpu/config.sh

# 1. Check and subunit
mkdir -p third_party/debs "$GF_GPU_DEPS"
(
  cd third_party/debs
  for p in check libsubunit-dev libsubunit0; do
    if ! ls "${p}"_*.deb >/dev/null 2>&1; then
      say "downloading $p"
      apt-get download "$p" >/dev/null
    fi
  done
)
for d in third_party/debs/*.deb; do
  dpkg -x "$d" "$GF_GPU_DEPS"
done

# 2. the build, with the device's options and the checks' targets
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="$PATH:/usr/local/cuda/bin"
fi
command -v nvcc >/dev/null || { say "nvcc not found: cannot prepare the CUDA build"; exit 1; }
# meson records the python3 it finds; the device has its own, so use the
# system's here rather than a virtual environment's
PATH=$(printf '%s' "$PATH" | tr ':' '\n' | grep -v '/\.venv/bin$' | paste -sd: -)
export PATH
mapfile -t opts < <(gf_gpu_meson_options "$PWD")
if [ ! -f "$GF_GPU_BUILDDIR/build.ninja" ]; then
  say "configuring $GF_GPU_BUILDDIR: ${opts[*]}"
  meson setup "$GF_GPU_BUILDDIR" "${opts[@]}" > /dev/null
else
  meson configure "$GF_GPU_BUILDDIR" "${opts[@]}" > /dev/null
fi
# the targets run.sh will ask for: those of every check
targets=$(
  gf_check() { shift 3; printf '%s\n' "$@"; }
  # shellcheck source=tests/gpu/checks.sh
  . tests/gpu/checks.sh
) || true
mapfile -t targets < <(printf '%s\n' "$targets" | sort -u)
say "building ${#targets[@]} targets in $GF_GPU_BUILDDIR"
ninja -C "$GF_GPU_BUILDDIR" -j "${GF_JOBS:-2}" "${targets[@]}"
# 3. ONNX cases for the onnx_cuda check, imported here (the GPU build has no
#    ONNX importer: no protobuf-c there): ONNX's node tests that pass on the cpu,
#    three small networks and the ai.onnx.ml cases (scikit-learn's models), by the
#    release build's onnx_conformance --export
cases="$GF_GPU_BUILDDIR/onnx-cases"
if [ -x build/tests/functions/onnx_conformance ] && [ -x .venv/bin/python3 ] &&
   [ -d /usr/share/libonnx-testdata/data/node ]; then
  rm -rf "$cases" "$GF_GPU_BUILDDIR/onnx-models"
  build/tests/functions/onnx_conformance /usr/share/libonnx-testdata/data/node \
    --export "$cases" > /dev/null
  for m in mobilenet_v3_small bert_encoder roberta_encoder; do
    .venv/bin/python3 tests/bench/onnx_ref.py case "tests/functions/onnx/models/$m.onnx" \
      "$GF_GPU_BUILDDIR/onnx-models/test_$m" 5 2
  done
  build/tests/functions/onnx_conformance "$GF_GPU_BUILDDIR/onnx-models" --strict --rtol 1e-4 \
    --atol 1e-5 --export "$cases" > /dev/null
  build/tests/functions/onnx_conformance tests/functions/onnx/ml --strict --rtol 1e-4 \
    --atol 1e-5 --export "$cases" > /dev/null
  rm -rf "$GF_GPU_BUILDDIR/onnx-models"
  say "ONNX cases: $(find "$cases" -mindepth 1 -maxdepth 1 | wc -l) in $cases ($(du -sh "$cases" | cut -f1))"
else
  say "no ONNX cases (needs build/ with the importer, .venv and libonnx-testdata): onnx_cuda will skip"
fi
# 4. the density check's gateway and benchmark, with their libraries
gw_build=${GF_GW_BUILDDIR:-build}
if [ ! -f "$gw_build/build.ninja" ]; then
  say "configuring $gw_build (the gateway, without CUDA)"
  meson setup "$gw_build" -Dcuda=disabled > /dev/null
fi
if ninja -C "$gw_build" -j "${GF_JOBS:-2}" gateway/gpufaas tests/bench/bench_density; then
  gw=$GF_GPU_DEPS/gw
  rm -rf "$gw"
  mkdir -p "$gw/bin" "$gw/lib"
  cp "$gw_build/gateway/gpufaas" "$gw_build/tests/bench/bench_density" "$gw/bin/"
  ldd "$gw/bin/gpufaas" "$gw/bin/bench_density" | awk '/=> \// {print $3}' | sort -u |
    grep -Ev '/(libc|libm|libpthread|libdl|librt|libresolv|ld-linux[^/]*)\.so' |
    while read -r lib; do cp -L "$lib" "$gw/lib/"; done
  say "density gateway: $(du -sh "$gw" | cut -f1) in $gw"
else
  say "the gateway did not build in $gw_build: the density check will SKIP"
fi
{
  echo "prepared: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')"
  echo "options: ${opts[*]}"
} > "$GF_GPU_BUILDDIR/gf-prepared.txt"
say "ready to carry: $GF_GPU_DEPS $(du -sh "$GF_GPU_DEPS" | cut -f1), $GF_GPU_BUILDDIR $(du -sh "$GF_GPU_BUILDDIR" | cut -f1)"
