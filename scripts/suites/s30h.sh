# gpu_check.sh suite "s30h" (sourced; $out, $commit, ft() and status are set)
# Session 30: the shipped window dispatch at 8k keys, nothing forced (the fixed-point
# kernel non-causal, two kernels causal), against the fp64 reference.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_window_8k 240 3 6 tests/test_hopper_bwd_reduce.py -k "window_dispatch_at_8k"
