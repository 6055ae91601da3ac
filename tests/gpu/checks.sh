# shellcheck shell=bash
# The GPU check's list of checks, sourced by tests/gpu/run.sh (and by
# tests/gpu/prepare.sh, for the ninja targets to build here first).
#
# Adding a check: one gf_check line here, in the order it should run, and a
# function check_NAME below it. Nothing else changes.
#
#   gf_check NAME SECONDS NEEDS TARGET...
#     NAME     the name in its result line (check=NAME status=... secs=N)
#     SECONDS  the most it may take (it also gets no more than what is left
#              of the deadline); 0 = whatever is left (put such checks last)
#     NEEDS    gpu (SKIP where there is no GPU) or any
#     TARGET   ninja targets (paths in the build folder) it runs; run.sh
#              builds them all first and SKIPs a check whose target is missing
#
#   check_NAME: runs in its own bash under `timeout`, in the repository root;
#   its output goes to $OUT/checks.log as it is written. Exit 0 = pass, 77 =
#   SKIP, anything else = FAIL; `gf_note TEXT` adds TEXT to its result line.
#   Helpers (run.sh): gf_test EXE ARGS... runs a Check suite from the build
#   folder with the tests' environment; gf_bench NAME EXE ARGS... runs a
#   benchmark and prints each `key=value` line of its own as NAME.key=value
#   (to $OUT/figures.txt too); $GF_B is the build folder, $GF_HAVE_GPU 1 or 0.
#
# Budget: the whole script must finish within its deadline (300 s by default)
# with the build prepared here; keep each benchmark around 45 s at most
# (density takes up to 150: run the whole list with GF_GPU_DEADLINE=480).

gf_check runpath       30  any runtime/libgf_backend_cuda.so
gf_check backend_cuda  60  gpu tests/backend/test_backend runtime/libgf_backend_cuda.so
gf_check kernels_cuda  90  gpu tests/backend/test_kernels runtime/libgf_backend_cuda.so
gf_check kernels_ew_cuda 60 gpu tests/backend/test_kernels_ew runtime/libgf_backend_cuda.so
gf_check kernels_nn_cuda 60 gpu tests/backend/test_kernels_nn runtime/libgf_backend_cuda.so
gf_check kinds_cuda    90  gpu tests/functions/test_functions_kinds runtime/libgf_backend_cuda.so
gf_check onnx_cuda     60  gpu tests/functions/onnx_crosscheck runtime/libgf_backend_cuda.so
gf_check bench_copy    45  gpu tests/bench/bench_copy runtime/libgf_backend_cuda.so
gf_check bench_cache   45  gpu tests/bench/bench_cache runtime/libgf_backend_cuda.so
gf_check bench_gemm    45  gpu tests/bench/bench_gemm runtime/libgf_backend_cuda.so
gf_check bench_ipc     45  gpu tests/bench/bench_ipc runtime/worker/gpufaas-worker runtime/libgf_backend_cuda.so
gf_check density       150 gpu runtime/worker/gpufaas-worker runtime/libgf_backend_cuda.so
gf_check memcheck      0   gpu tests/backend/test_kernels runtime/libgf_backend_cuda.so

# The module's RUNPATH is absolute and holds the toolkit's libraries.
check_runpath() {
  tests/backend/module_runpath.sh "$GF_B/runtime/libgf_backend_cuda.so"
}

# The device interface on cuda:0: budget, pages, VMM mapping, copies, events.
check_backend_cuda() { gf_test tests/backend/test_backend cuda:0; }

# Every kernel against the double-precision references.
check_kernels_cuda() { gf_test tests/backend/test_kernels cuda:0; }

# The version 2 kernels (the ONNX kind's): elementwise, layout and casts;
# reductions, convolution and pooling.
check_kernels_ew_cuda() { gf_test tests/backend/test_kernels_ew cuda:0; }
check_kernels_nn_cuda() { gf_test tests/backend/test_kernels_nn cuda:0; }

# The built-in kinds on cuda:0 against the numpy reference; each case runs
# twice and the warm run must make no device allocation or free (no
# cudaMalloc/cudaFree on the request path: the request arena).
check_kinds_cuda() { GF_TEST_DEVICE=cuda:0 gf_test tests/functions/test_functions_kinds; }

# The onnx kind on cuda:0 against the cpu, on the cases prepare.sh imported
# (ONNX's node tests, mobilenet_v3_small, BERT and RoBERTa encoders):
# onnx.onnx_cuda_cases_passed, _failed, max_rel_err.
check_onnx_cuda() {
  [ -d "$GF_B/onnx-cases" ] || { gf_note "no $GF_B/onnx-cases (prepare.sh makes them)"; return 77; }
  gf_bench onnx tests/functions/onnx_crosscheck "$GF_B/onnx-cases" --device cuda:0
}

# copy.h2d_gbps (pinned, best chunk) against copy.link_peak_gbps (the link's
# maximum), copy.copy_efficiency, copy.map_us_per_page (a range mapped at
# once: one cuMemSetAccess) against copy.map_one_us_per_page (one per page).
check_bench_copy() { gf_bench copy tests/bench/bench_copy cuda:0; }

# cache.swap_efficiency, cache.pipeline_ratio, cache.hit_overhead_us,
# cache.overlap_ratio (a resident model's forward pass during the next
# model's swap-in, over the two in turn: < 1 when they overlap).
check_bench_cache() { gf_bench cache tests/bench/bench_cache cuda:0; }

# gemm.f32_tflops, gemm.f16_tflops, gemm.bf16_tflops, gemm.f32xf16_tflops
# (n = 8192), and the batch-8 half-weight path's bandwidth.
check_bench_gemm() { gf_bench gemm tests/bench/bench_gemm cuda:0; }

# ipc.ipc_mean_us and ipc.warm_overhead_us: a warm request to a real worker
# on cuda:0, and what the worker adds to the function's own time;
# ipc.device_allocs_per_request (0: the request arena).
check_bench_ipc() {
  gf_bench ipc tests/bench/bench_ipc cuda:0 "$GF_B/runtime/worker/gpufaas-worker"
}

# density.*: bench_density (docs/performance.md, "Density") through a real
# gpufaas serve and a worker on cuda:0: real PCIe swaps, no emulated link,
# short (--quick: one policy pair, no levers, ~100 s). The device has none of
# the gateway's libraries, so prepare.sh builds gpufaas and bench_density
# here and carries them with their shared libraries in third_party/deps/gw.
check_density() {
  local gw=$GF_ROOT/$GF_GPU_DEPS/gw
  if [ ! -x "$gw/bin/bench_density" ]; then
    gf_note "no $GF_GPU_DEPS/gw/bin/bench_density: run tests/gpu/prepare.sh with the gateway built"
    return 77
  fi
  LD_LIBRARY_PATH="$gw/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    gf_bench density "$gw/bin/bench_density" --quick --device cuda:0 \
    --gpufaas "$gw/bin/gpufaas" --worker "$GF_ROOT/$GF_B/runtime/worker/gpufaas-worker" \
    --scale 0.1 --device-memory 536870912 --max-ratio 8 --policies lru,gdsf --no-levers
}

# compute-sanitizer's memcheck over the kernel tests, with what time is left.
check_memcheck() {
  if ! command -v compute-sanitizer >/dev/null; then
    gf_note "compute-sanitizer not found"
    return 77
  fi
  local t
  for t in test_kernels test_kernels_ew test_kernels_nn; do
    CK_FORK=no gf_test_with "compute-sanitizer --tool memcheck --error-exitcode 3 \
      --target-processes all" "tests/backend/$t" cuda:0 || return
  done
}
