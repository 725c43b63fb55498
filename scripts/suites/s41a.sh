# gpu_check.sh suite "s41a" (sourced; $out, $commit, ft() and status are set)
# Session 41: stage A's hd 64 causal grid tile-major in blocks of 8 heads from 8k query
# rows, shipped (configs.TILE_HEADS / TILE_HEADS_MIN; docs/performance.md step 99).
# 1. GPU tests: stage A tile-major (now with an 8k case: every output written, within the
#    bound, bitwise the head-major launch's) and the split ring without O buffers.
# 2. env_ab forward through the public call, hd 64 causal 4k / 8k / 16k: shipped against
#    head-major (tile_heads=0). Prediction: +3% at 8k / 16k (the session 41 A/Bs), 0 at 4k
#    (both head-major there).
# 3. The hf suite's benchmark (issue 9's 8k forward runs the shipped order).
source scripts/suites/lib/steps.sh
gpu_pytest pytest_s41 250 4 4 tests/test_hopper.py -k "split_no_o_stage or tile_major"
env_ab fwd_tm0_64c 150 --ab "|FLASHTILE_HOPPER_FWD_OVERRIDES=tile_heads=0" --measures fwd \
  --head-dims 64 --seqlens 4096 8192 16384 --causal 1 --rounds 5
source scripts/suites/hf.sh
