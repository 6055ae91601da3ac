# shellcheck shell=bash
# Checks for tests/gpu/test_run_sh.sh, which runs tests/gpu/run.sh with this
# list (GF_GPU_CHECKS_FILE) against a fake build folder: one of each outcome,
# one that outlives its own cap, one that runs into the deadline and one that
# comes after it.
gf_check fast_pass  10 any  fake.stamp
gf_check a_skip     10 any
gf_check a_fail     10 any
gf_check figures    10 any  fakebench
gf_check hangs      4  any
gf_check needs_gpu  10 gpu
gf_check missing    10 any  no/such/target
gf_check long_tail  0  any
gf_check after      10 any

check_fast_pass() { echo "hello from fast_pass"; }
check_a_skip() {
  gf_note "nothing to do here"
  return 77
}
check_a_fail() {
  echo "boom" >&2
  return 3
}
check_figures() { gf_bench fake fakebench; }
check_hangs() { sleep 60; }
check_needs_gpu() { echo "the GPU is there"; }
check_missing() { echo "never runs"; }
check_long_tail() { sleep 60; }
check_after() { echo "never runs"; }
