# gpu_check.sh suite "s40a" (sourced; $out, $commit, ft() and status are set)
# Session 40: the measurement of suite s37a (its file folded in here; sessions 37-39 got
# no machine), and stage A's causal grid launched tile-major (HopperFwdConfig.tile_heads,
# opt-in).
# 1. GPU tests: the split ring without O buffers at hd 128 / 256; stage A tile-major
#    (every output written, within the bound, bitwise the head-major launch's).
# 2. env_ab forward, hd 64 causal (stage A from 1k) and hd 128 causal 1k (stage A's short
#    tiles): head-major (shipped) against tile-major in blocks of 8 / 32 heads and the
#    whole grid. Prediction (step 99; a list-scheduling model without L2, 264 slots):
#    head-major ends 5-7% above the ideal makespan at every length, blocks of 8 recover it
#    from 4k (not at 1k, where 8 heads of 8 tiles are a quarter of a wave), blocks of 32
#    everywhere; so +2-6% forward at hd 64 causal 4k-16k, +0-2% at 1k with blocks of 8,
#    +2-6% with 32; the whole grid the same unless L2 misses cost it (128 heads' K/V,
#    128 MiB at 4k, do not fit L2).
# 3. env_ab forward, hd 128: shipped against K3 V3 without O buffers (s37a's; prediction
#    in docs/performance.md step 98).
source scripts/suites/lib/steps.sh
gpu_pytest pytest_s40 250 4 4 tests/test_hopper.py -k "split_no_o_stage or tile_major"
tm="FLASHTILE_HOPPER_FWD_OVERRIDES=tile_heads"
env_ab fwd_tm64c 200 --ab "|$tm=8|$tm=32|$tm=100000" --measures fwd --head-dims 64 \
  --seqlens 1024 4096 8192 16384 --causal 1 --rounds 3
env_ab fwd_tm128c 100 --ab "|$tm=8|$tm=32|$tm=100000" --measures fwd --head-dims 128 \
  --seqlens 1024 --causal 1 --rounds 3
# S40A_QUICK=1 (a small device budget): steps 1-2 only
if [ -z "${S40A_QUICK:-}" ]; then
  noo="FLASHTILE_HOPPER_FWD_OVERRIDES=num_stages=3,v_stages=3,o_stage=0,persistent=1,paired=1"
  env_ab fwd_noo128 200 --ab "|$noo" --measures fwd --head-dims 128 \
    --seqlens 1024 4096 16384 --causal 0 --rounds 3
  env_ab fwd_noo128c 200 --ab "|$noo" --measures fwd --head-dims 128 \
    --seqlens 4096 8192 16384 --causal 1 --rounds 3
fi
