# shellcheck shell=bash
# Sourced by tests/gpu/prepare.sh (here) and tests/gpu/run.sh (on the GPU
# machine): the one place that says how the GPU build is configured, so that
# the build prepared here is exactly the one the device would make and the
# device builds only what changed since.
#
# The GPU machine has the CUDA toolkit, meson and ninja but no package
# registry and none of our -dev packages: no gateway (libmicrohttpd, jansson,
# sqlite3, libcurl), no OpenBLAS (the cpu backend's plain loops suffice for
# the cuda checks), no ONNX importer (protobuf-c; the ONNX cases are imported
# here by prepare.sh), Check and subunit from the .deb files prepare.sh unpacks
# into third_party/deps. -Dwerror=false: the device's compiler may warn where
# ours does not; warnings are errors in CI, which builds every file.

GF_GPU_BUILDDIR=${GF_GPU_BUILDDIR:-build-gpu}
GF_GPU_DEPS=third_party/deps

# gf_gpu_meson_options ROOT: the options, one a line, with deps_root absolute
# under ROOT (meson's find_library takes absolute folders only).
gf_gpu_meson_options() {
  printf '%s\n' -Dcuda=enabled -Dgateway=disabled -Dcpu_blas=disabled -Dtests=enabled \
    -Donnx_import=disabled \
    -Dwerror=false -Dbuildtype=release -Db_ndebug=false "-Ddeps_root=$1/$GF_GPU_DEPS"
}
