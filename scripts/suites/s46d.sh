# gpu_check.sh suite "s46d" (sourced; $out, $commit, ft() and status are set)
# Two forward choices that earlier runs could not
# tell from noise, re-measured sustained (s46a: sustained ratios agree between runs
# within 0.2% median / 0.7% max):
# - hd 128 non-causal 4k / 16k, stage C's turn waits on (shipped) or off: `s36a` / `s36b`
#   read -8% to +3% with the sign flipping at 16k between runs (step 96), so they stayed
#   on. The floor cell hd 128 non-causal 16k reads 0.995-0.998x sustained.
# - hd 64 causal 4k, stage A's tile-major blocks (tile_heads 16 shipped, 8, 0 =
#   head-major): step 101 +2.5% / +3.1% for 16 over head-major by do_bench. The floor
#   cell reads 0.999x sustained.
# Prediction: turn waits off within +-2% of on (no clear winner, as before); tile_heads 16
# ahead of 0 by 2-4% sustained, 8 between them. Then the new `floor` suite's first run
# (last: the device time left this session is short).
source scripts/suites/lib/steps.sh
env_ab envab_s46d_turn 200 --ab "FLASHTILE_HOPPER_FWD_OVERRIDES=turn_waits=1|FLASHTILE_HOPPER_FWD_OVERRIDES=turn_waits=0" \
  --head-dims 128 --seqlens 4096 16384 --causal 0 --measures fwd --rounds 2 --sustained 2
env_ab envab_s46d_tiles 150 --ab "FLASHTILE_HOPPER_FWD_OVERRIDES=tile_heads=16|FLASHTILE_HOPPER_FWD_OVERRIDES=tile_heads=8|FLASHTILE_HOPPER_FWD_OVERRIDES=tile_heads=0" \
  --head-dims 64 --seqlens 4096 --causal 1 --measures fwd --rounds 2 --sustained 2
source scripts/suites/floor.sh
