# gpu_check.sh suite "s27d" (sourced; $out, $commit, ft() and status are set)
# s27c measured fully tile-major grids +3.7% / +8.1% at hd 128 / 64 causal 4k, level at
# 16k, -22% / -16% at 1k (L2: one program per head in flight), so the shipped causal tiles
# take them for 4096 <= seqlen_k < 16384 (configs.TILE_MAJOR_CAUSAL). Since then the order
# is tile-major within blocks of heads whose tiles fill about a wave of two programs per
# SM (ops/hopper_bwd._tile_heads: 17 heads at 1k, 5 at 4k, 2 at 16k with 64-row tiles on
# 132 SMs), so the programs in flight span as few heads as head-major order's. The
# simulation (no L2): +1.4-6.6% at 1k-4k over head-major, level at 16k.
# 1. The Gluon backward's causal GPU tests with tile_major forced (the new index code).
# 2. A/B at 1k-16k causal, both orders explicit, 5 interleaved rounds. Prediction: 1k +1-4%
#    (no L2 loss now), 2k +2-5%, 4k +3-8%, 8k +1-4%, 16k +-1%; gradients bitwise equal.
# 3. flashtile bench, causal hd 64 / 128 at 4k / 16k, beside cuDNN: forward+backward at
#    4k +2-4% over 7887446's perf table (0.98x / 0.95x cuDNN there), 16k unchanged.
source scripts/suites/lib/steps.sh
FLASHTILE_HOPPER_BWD_OVERRIDES=tile_major=1 gpu_pytest pytest_s27d 110 4 6 \
  tests/test_hopper_bwd.py -k "causal and (test_hopper_bwd_vs_reference or deterministic or poisoned)"
timeout 170 python3 scripts/bench_hopper_bwd.py --ab "tile_major=0|tile_major=1" --rounds 5 \
  --head-dims 128 64 --seqlens 1024 2048 4096 8192 16384 --causal 1 \
  --csv "$out/tile_major_ab2.csv" >"$out/tile_major_ab2.log" 2>&1 || status=1
grep -A12 "^Gluon backward TFLOPS" "$out/tile_major_ab2.log" | cut -c1-100
grep -E "Error|Traceback" "$out"/tile_major_ab2.log | head -5
timeout 100 python3 -m flashtile.cli bench --rounds 3 --causal yes --head-dims 64 128 \
  --seqlens 4096 16384 --backends flashtile sdpa-cudnn --commit "$commit" \
  --csv "$out/bench_tile_major.csv" >"$out/bench_tile_major.log" 2>&1 || status=1
tail -n 12 "$out/bench_tile_major.log"
