# gpu_check.sh suite "s27e" (sourced; $out, $commit, ft() and status are set)
# Back to whole-grid tile-major order (tile_heads = every head) after s27d's blocks of
# heads gained nothing; the shipped range is causal 4k <= seqlen_k < 16k. A/B at 4k (s27c:
# +3.7% / +8.1% at hd 128 / 64, once) and 8k (unmeasured), 5 interleaved rounds.
# Prediction: 4k +3-8% again; 8k +1-4%; gradients bitwise equal to head-major order.
timeout 100 python3 scripts/bench_hopper_bwd.py --ab "tile_major=0|tile_major=1" --rounds 5 \
  --head-dims 128 64 --seqlens 4096 8192 --causal 1 \
  --csv "$out/tile_major_ab3.csv" >"$out/tile_major_ab3.log" 2>&1 || status=1
grep -A6 "^Gluon backward TFLOPS" "$out/tile_major_ab3.log" | cut -c1-100
grep -E "Error|Traceback" "$out"/tile_major_ab3.log | head -5
