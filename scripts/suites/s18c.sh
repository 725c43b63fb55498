# gpu_check.sh suite "s18c" (sourced; $out, $commit, ft() and status are set)
# The dropout bits as warp-ballot blocks (one format instead of two layouts; the Gluon
# forward writes each word with one vote.ballot and 16-byte stores, the Gluon backward
# reads 16-byte words per block), first GPU run.
# 1. Correctness: the Gluon forward's dropout tests (decisions and words), the Gluon
#    backward's bits tests, test_flash's bits / dropout / capture / plan tests on CUDA.
# 2. Per kernel and the graphed MiniGPT step, portable forward (default) and Gluon
#    forward (FLASHTILE_HOPPER_DROPOUT=1) against cuDNN. Predictions (SASS sm_90):
#    Gluon forward step loop 2147 -> 1434 instructions: 202 -> 140-150 us at 16 x 1024,
#    94 -> 65-75 at 64 x 256; portable forward (241 -> 197 registers, no shuffles for the
#    words): 174 -> 150-165 and 84 -> 70-80; the Gluon backward kernels within +-5% (16-byte
#    word loads instead of 1-2 words per lane).
source scripts/suites/lib/steps.sh
gpu_pytest pytest_hopper_dropout 240 4 6 tests/test_hopper_dropout.py
gpu_pytest pytest_gluon_bits 150 4 4 tests/test_hopper_bwd.py -k "dropout"
timeout 220 python3 -m pytest -q tests/test_flash.py -k "dropout or graph_capture or plans or bits" \
  -p no:cacheprovider -rf --tb=short >"$out/pytest_flash_cuda.log" 2>&1 || status=1
grep -E "^FAILED|passed|failed" "$out/pytest_flash_cuda.log" | tail -n 4
for mode in 0 1; do
  echo "== FLASHTILE_HOPPER_DROPOUT=$mode"
  FLASHTILE_HOPPER_DROPOUT=$mode timeout 100 python3 scripts/bench_dropout.py --kernels \
    --backends flashtile,cudnn --csv "$out/drop_k$mode.csv" >"$out/drop_k$mode.log" 2>&1 \
    || status=1
  grep -A1 "| 0.2 |" "$out/drop_k$mode.log" | grep -E "\| 0\.2 \||per kernel" | cut -c1-250
done
timeout 150 python3 -m flashtile.cli train --bench \
  --bench-backends "flashtile:graph,flashtile:graph@FLASHTILE_HOPPER_DROPOUT=1,sdpa-cudnn:graph" \
  --bench-shapes 64x256,16x1024 --bench-steps 80 --bench-rounds 8 \
  --csv "$out/train_bench.csv" >"$out/train_bench.log" 2>&1 || status=1
tail -n 7 "$out/train_bench.log" | cut -c1-120
