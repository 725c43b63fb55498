# gpu_check.sh suite "s27a" (sourced; $out, $commit, ft() and status are set)
# Session 27: s26a measured the fixed-point one-kernel backward (HopperBwdConfig.
# reduce_fixed) +4.4% / +11.9% / +10.4% over the two-kernel backward at hd 128 non-causal
# 4k / 8k / 16k, ahead of the racing reduce; configs.hopper_bwd_fixed_preferred makes it
# the deterministic default there. s26a's one failure was a stale test (it expected the
# whole head's dQ NaN from one NaN in dO: the multipliers are per row since 5e3899f).
# 1. GPU tests: the fixed / bound / dequantisation tests with the corrected NaN test,
#    the public-API tests of the reduce tiles.
# 2. The covering grid's hd 64 / 128 cases with FLASHTILE_HOPPER_BWD=1 and _REDUCE_FIXED=1 (the
#    fixed adds on every deterministic call they cover: causal, windows, softcaps, GQA,
#    MQA, every length class, strided layouts; the grid stops at 1k keys, where the
#    default would not take them).
# 3. perf: the full table with the new default.
#    Prediction: forward unchanged; hd 128 non-causal forward+backward 0.92-0.95x cuDNN at
#    4k and 0.94-0.97x at 16k (0.89x / 0.84x at 29acd62, s26a's bench 0.93x / 0.96x),
#    peak memory 390 / 387 MiB; the other cells as at 29acd62 within this bench's 5%.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_s27a 150 4 8 tests/test_hopper_bwd_reduce.py tests/test_fixed_dq.py \
  -k "fixed or bounds or dequantize or public"
FLASHTILE_HOPPER_BWD=1 FLASHTILE_HOPPER_BWD_REDUCE_FIXED=1 validate_covering_tail validate_fixed 120 1 64,128
source scripts/suites/perf.sh
