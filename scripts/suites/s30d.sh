# gpu_check.sh suite "s30d" (sourced; $out, $commit, ft() and status are set)
# Session 30: the shipped changes' GPU tests before the perf table (run as "s30d,perf").
# prologue_warps 8 (bitwise against the separate kernels, 4 and 8 warps); sliding windows
# on the fixed-point kernel at hd 128 non-causal from 8k keys (the public-API tests force
# it at their small shapes; causal and hd 64 windows keep two kernels); the
# window_one_loop withdrawal (the window tests with the shipped three loops).
source scripts/suites/lib/steps.sh
cuda_pytest pytest_prologue 120 4 tests/test_fixed_dq.py -k prologue
gpu_pytest pytest_fixed_windows 200 4 6 tests/test_hopper_bwd_reduce.py \
  -k "fixed_public_api or reduce_public_api or one_loop or prologue"
