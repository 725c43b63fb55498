# gpu_check.sh suite "s27d" (sourced; $out, $commit, ft() and status are set)
# s27c measured tile-major grids +3.7% / +8.1% at hd 128 / 64 causal 4k, level at 16k,
# -22% / -16% at 1k (L2: one program per head in flight), so the shipped causal tiles
# take them for 4096 <= seqlen_k < 16384 (configs.TILE_MAJOR_CAUSAL; 8k unmeasured).
# 1. A/B at 2k / 4k / 8k causal, both grids explicit, 5 interleaved rounds.
#    Prediction: 4k +3-8% again; 8k +1-4% (the simulated tail shrinks with the length,
#    the L2 cost too); 2k between the 1k loss and the 4k gain, -5% to +3%.
# 2. flashtile bench, causal hd 64 / 128 at 4k / 16k, beside cuDNN: forward+backward at
#    4k +2-4% over 7887446's perf table (0.98x / 0.95x cuDNN there), 16k unchanged.
source scripts/suites/lib/steps.sh
timeout 150 python3 scripts/bench_hopper_bwd.py --ab "tile_major=0|tile_major=1" --rounds 5 \
  --head-dims 128 64 --seqlens 2048 4096 8192 --causal 1 \
  --csv "$out/tile_major_ab2.csv" >"$out/tile_major_ab2.log" 2>&1 || status=1
grep -A8 "^Gluon backward TFLOPS" "$out/tile_major_ab2.log" | cut -c1-100
timeout 150 python3 -m flashtile.cli bench --rounds 3 --causal yes --head-dims 64 128 \
  --seqlens 4096 16384 --backends flashtile sdpa-cudnn --commit "$commit" \
  --csv "$out/bench_tile_major.csv" >"$out/bench_tile_major.log" 2>&1 || status=1
tail -n 12 "$out/bench_tile_major.log"
