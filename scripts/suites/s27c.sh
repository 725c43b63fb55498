# gpu_check.sh suite "s27c" (sourced; $out, $commit, ft() and status are set)
# HopperBwdConfig.tile_major: both kernels of the two-kernel backward on grids (B * heads,
# tiles) instead of (tiles, B * heads). The block scheduler launches blockIdx.x fastest,
# so head-major grids start the last heads' heaviest causal tiles near the end; a list-
# scheduling simulation (2-3 programs per SM as independent slots, 2.7 steps of fixed
# cost per program) puts that tail at +6.6-6.8% of the dK/dV and dQ kernels' time at hd
# 128 causal 1k / 4k, +0.4% at 16k, hd 64 +3-5% at 1k / 4k; tile-major +0.2-0.8%.
# sm_90 builds: the same registers, spills and shared memory as the shipped kernels.
# 1. The Gluon backward's GPU tests with tile_major forced (FLASHTILE_HOPPER_BWD_OVERRIDES)
#    on every call through default_config, causal selection.
# 2. A/B, 5 interleaved rounds, backward TFLOPS (the '=' column: the gradients bitwise
#    equal to the shipped grid's, as they must be: each program's work is unchanged).
#    Prediction: causal +2-5% at hd 128 1k / 4k, +0-1% at 16k; hd 64 +1-4% at 1k / 4k,
#    +0-1% at 16k (SM-sharing programs absorb part of the simulated tail); non-causal
#    level (+-1%: every tile equal, only the L2 order of Q / dO reads changes).
source scripts/suites/lib/steps.sh
FLASHTILE_HOPPER_BWD_OVERRIDES=tile_major=1 gpu_pytest pytest_s27c 150 4 6 \
  tests/test_hopper_bwd.py -k "causal and (test_hopper_bwd_vs_reference or deterministic or poisoned)"
timeout 150 python3 scripts/bench_hopper_bwd.py --ab "|tile_major=1" --rounds 5 \
  --head-dims 128 64 --seqlens 1024 4096 16384 --causal 1 \
  --csv "$out/tile_major_ab.csv" >"$out/tile_major_ab.log" 2>&1 || status=1
grep -A8 "^Gluon backward TFLOPS" "$out/tile_major_ab.log" | cut -c1-100
timeout 60 python3 scripts/bench_hopper_bwd.py --ab "|tile_major=1" --rounds 5 \
  --head-dims 128 64 --seqlens 4096 --causal 0 \
  --csv "$out/tile_major_ab_nc.csv" >"$out/tile_major_ab_nc.log" 2>&1 || status=1
grep -A4 "^Gluon backward TFLOPS" "$out/tile_major_ab_nc.log" | cut -c1-100
grep -E "Error|Traceback" "$out"/tile_major_ab*.log | head -5
