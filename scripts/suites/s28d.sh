# gpu_check.sh suite "s28d" (sourced; $out, $commit, ft() and status are set)
# The new default: deterministic causal calls at hd 128 from 4k keys (no window, no
# softcap) run the fixed-point one-kernel backward with the band in one loop
# (configs.hopper_bwd_fixed_preferred, hopper_bwd_reduce_config's one_loop = 2; s28c:
# +2.1% / +7.6% backward over the two-kernel backward at 4k / 16k).
# 1. GPU tests: the fixed-point and one-loop tests of tests/test_hopper_bwd_reduce.py
#    (the causal reduce configs now carry one_loop = 2), the bounds / dequantisation ones.
# 2. The covering grid's hd 64 / 128 cases with FLASHTILE_HOPPER_BWD_REDUCE_FIXED=1 (the
#    fixed adds, and at hd 128 causal the one-loop band, on every deterministic call they
#    cover; the grid stops at 1k keys).
# 3. perf: the full table (tile-major withdrawn, the causal one-kernel default).
#    Prediction: hd 128 causal forward+backward 0.93-0.96x cuDNN at 4k and 0.92-0.96x at
#    16k (0.95x / 0.89x at 7887446); the other cells as at 7887446 within this bench's 5%.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_s28d 150 4 8 tests/test_hopper_bwd_reduce.py tests/test_fixed_dq.py \
  -k "fixed or one_loop or bounds or dequantize"
FLASHTILE_HOPPER_BWD=1 FLASHTILE_HOPPER_BWD_REDUCE_FIXED=1 validate_covering_tail validate_fixed 120 1 64,128
source scripts/suites/perf.sh
