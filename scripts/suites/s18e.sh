# gpu_check.sh suite "s18e" (sourced; $out, $commit, ft() and status are set)
# The dK/dV kernel's transposed tiles read their bit blocks one word per lane, with the
# warp transpose and two shuffles (s18d: 2 words per block and per-element shifts, dK/dV
# +9% on the two-layout words).
# 1. The Gluon backward's bits tests (the new reader against the float64 reference
#    replaying the mask and the portable backward), the Gluon forward's dropout tests.
# 2. Per kernel and the graphed MiniGPT step against cuDNN. Prediction (SASS sm_90, dK/dV
#    unmasked step loop 1039 -> 985): dK/dV 117.8 -> 108-113 us at 16 x 1024 and 46.4 ->
#    42-45 at 64 x 256; the step 8.06 -> ~8.01 ms.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_gluon_bits 150 4 4 tests/test_hopper_bwd.py -k "dropout"
gpu_pytest pytest_hopper_dropout 150 4 4 tests/test_hopper_dropout.py
timeout 100 python3 scripts/bench_dropout.py --kernels --backends flashtile,cudnn \
  --csv "$out/drop_k.csv" >"$out/drop_k.log" 2>&1 || status=1
grep -A1 "| 0.2 |" "$out/drop_k.log" | grep -E "\| 0\.2 \||per kernel" | cut -c1-250
timeout 150 python3 -m flashtile.cli train --bench \
  --bench-backends "flashtile:graph,sdpa-cudnn:graph" \
  --bench-shapes 64x256,16x1024 --bench-steps 80 --bench-rounds 8 \
  --csv "$out/train_bench.csv" >"$out/train_bench.log" 2>&1 || status=1
tail -n 5 "$out/train_bench.log" | cut -c1-120
