# gpu_check.sh suite "s42d" (sourced; $out, $commit, ft() and status are set)
# For session 42: stage A's hd 64 causal grid tile-major from 4k (blocks of 16 below 8k,
# configs.TILE_HEADS_SHORT / TILE_HEADS_MIN). The tile-major GPU tests (new: 4k, blocks
# of 16), then the shipped order against head-major through the public call.
# Prediction: +3-5% at 4k (two runs: +5.5% / +4.2% as an override), level at 2k.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_s42d 150 4 4 tests/test_hopper.py -k "tile_major and (4096 or 16])"
env_ab fwd_tm_shipped 90 --ab "|FLASHTILE_HOPPER_FWD_OVERRIDES=tile_heads=0" --measures fwd \
  --head-dims 64 --seqlens 2048 4096 --causal 1 --rounds 7
