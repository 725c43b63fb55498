# gpu_check.sh suite "s48a" (sourced; $out, $commit, ft() and status are set)
# The fixed-point one-kernel backward's dequantize moved into its own launch
# (HopperBwdConfig.dq_finish, opt-in): finishing programs appended to the dK/dV grid wait
# for their heads' key-tile programs (a done count per grid row) and write dQ = sum /
# 2^e_i, in head order, so that most heads' dQ is written in the last wave's idle SMs
# (15 waves of 132 and one of 68 at the DESIGN.md hd 128 shapes) instead of by
# fixed_dq.dequantize after the launch (52 us at 16k tokens x 2048 hidden, step 73).
# Prediction: backward +1.5% at hd 128 non-causal 4k (-52 us, +~10 us of tail and
# release waits), +0.3% at 16k; causal 4k +2.5%, 16k +0.5%; dq bitwise unchanged.
# Forward+backward at hd 128 non-causal 4k 0.942x -> ~0.952x cuDNN sustained.
# Then s47c's causal blocks of heads at 8k (prediction +0-2%; ship to 16k if > +0.7%).
source scripts/suites/lib/steps.sh
gpu_pytest pytest_finish 140 4 8 tests/test_hopper_bwd_reduce.py -k "dq_finish or causal_tile_major"
env_ab envab_s48a_finish 160 --ab "FLASHTILE_HOPPER_BWD_OVERRIDES=dq_finish=0|FLASHTILE_HOPPER_BWD_OVERRIDES=dq_finish=1" \
  --head-dims 128 --seqlens 4096 16384 --causal 0 1 --measures bwd --rounds 2 --sustained 2
timeout 90 env FLASHTILE_HOPPER_BWD_OVERRIDES=dq_finish=1 python3 -m flashtile.cli bench --rounds 1 \
  --sustained 1.5 --commit "$commit" --head-dims 128 --seqlens 4k 16k \
  --backends flashtile sdpa-cudnn --csv "$out/bench_floor_finish.csv" \
  >"$out/bench_floor_finish.log" 2>&1 || status=1
tail -n 12 "$out/bench_floor_finish.log"
if [ -n "${S48A_ORDER8K:-}" ]; then  # (device time: only when asked for)
env_ab envab_s47c_order8k 100 --ab "FLASHTILE_HOPPER_BWD_OVERRIDES=tile_major=0|FLASHTILE_HOPPER_BWD_OVERRIDES=tile_major=1,tile_heads=4" \
  --head-dims 128 --seqlens 8192 --causal 1 --measures bwd --rounds 2 --sustained 2
fi
