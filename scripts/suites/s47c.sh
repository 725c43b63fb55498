# gpu_check.sh suite "s47c" (sourced; $out, $commit, ft() and status are set)
# Prepared in session 47, not run there (device time). First: whether the causal hd 128
# one-kernel backward's tile-major blocks of 4 heads (shipped for 4k <= seqlen_k < 8k,
# configs.REDUCE_TILE_MAJOR_CAUSAL) also win at 8k (B2 H16, 64 key tiles per head). The
# list-scheduling model reads +5.5% at 8k (+6.3% at 4k, 0.2% at 16k); `s47a` measured
# +1.8% at 4k and -1.8% at 16k sustained, so the model overstates by ~3x where it is
# right at all. Prediction: +0% to +2% at 8k; ship the range to 16k if > +0.7% (the
# sustained noise). Then s46d (the forward's turn waits at hd 128 non-causal, stage A's
# blocks at hd 64 causal 4k) and the `floor` suite it ends with.
source scripts/suites/lib/steps.sh
env_ab envab_s47c_order8k 150 --ab "FLASHTILE_HOPPER_BWD_OVERRIDES=tile_major=0|FLASHTILE_HOPPER_BWD_OVERRIDES=tile_major=1,tile_heads=4" \
  --head-dims 128 --seqlens 8192 --causal 1 --measures bwd --rounds 2 --sustained 2
source scripts/suites/s46d.sh
