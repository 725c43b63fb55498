# gpu_check.sh suite "s47a" (sourced; $out, $commit, ft() and status are set)
# The last wave's key tiles in pieces (HopperBwdConfig.tail_split, ops/tail_split.py) on
# the one-kernel backward, hd 128 non-causal. At the DESIGN.md shape both 4k and 16k run
# 2048 dK/dV programs, one per SM: 15 waves of 132 and a 16th of 68 (step 78's ncu: 16 x
# (6 us + 64 / 256 steps of 2.4 us)).
# Prediction (ops/tail_split's list-scheduling model): the backward +1.1% at 4k (68
# programs in 3 pieces) and +2.1% at 16k (3 pieces: +1.5%; 7 pieces with tail_split=8);
# dq bitwise unchanged (fixed point), dk / dv within two bf16 units of the unsplit
# kernel's. Then the floor pair with tail_split=8 forced on flashtile: hd 128 non-causal
# fwd+bwd 0.940x -> ~0.95x at 4k, 0.947-0.950x -> ~0.96x at 16k (sustained).
# Causal hd 128 (the one-kernel fixed-point backward, one program per SM since session
# 28), the launch order: the same model puts head-major order's last wave 6% above the
# ideal at 4k (the last heads' heaviest key tiles start near the end), tile-major blocks
# of 4 or 8 heads at the ideal, and all orders level at 16k. Session 27 (`s27d`, the
# two-kernel backward, several programs per SM) measured blocks of heads level with
# head-major at 4k, and session 28 whole-grid tile-major -5.7% (L2). Prediction: blocks
# of 4 / 8 heads +2% to +6% at causal 4k, level at 16k.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_tail 300 4 6 tests/test_hopper_bwd_reduce.py -k tail
cuda_pytest pytest_tail_combine 120 3 tests/test_tail_split.py -k combine
env_ab envab_s47a_tail 240 --ab "FLASHTILE_HOPPER_BWD_OVERRIDES=tail_split=0|FLASHTILE_HOPPER_BWD_OVERRIDES=tail_split=3|FLASHTILE_HOPPER_BWD_OVERRIDES=tail_split=8" \
  --head-dims 128 --seqlens 4096 16384 --causal 0 --measures bwd --rounds 2 --sustained 2
env_ab envab_s47a_order 200 --ab "FLASHTILE_HOPPER_BWD_OVERRIDES=tile_major=0|FLASHTILE_HOPPER_BWD_OVERRIDES=tile_major=1,tile_heads=4|FLASHTILE_HOPPER_BWD_OVERRIDES=tile_major=1,tile_heads=8" \
  --head-dims 128 --seqlens 4096 16384 --causal 1 --measures bwd --rounds 2 --sustained 2
env FLASHTILE_HOPPER_BWD_OVERRIDES=tail_split=8 python3 -m flashtile.cli bench --rounds 1 \
  --sustained 1.5 \
  --commit "$commit" --head-dims 128 --seqlens 4k 16k --backends flashtile sdpa-cudnn \
  --csv "$out/bench_floor_tail.csv" >"$out/bench_floor_tail.log" 2>&1 || status=1
tail -n 12 "$out/bench_floor_tail.log"
