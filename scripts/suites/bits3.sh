# gpu_check.sh suite "bits3" (sourced; $out, $commit, ft() and status are set)
# Prepared in session 16, not yet run: with FLASHTILE_DROPOUT_BITS=1 the portable
# forward draws as always and also writes its decisions as bit words (a
# dropout_bits_buffer: (seed, offset) in its header), so no kernel draws them a second
# time (the separate bits kernel of s16e cost 36.6 / 128.5 us and ate the backward's
# savings). ptxas sm_90, hd 64 causal forward: 255 registers, no spills (drawing: 136),
# step loop 981 -> 1495 instructions (the words' reductions). Prediction, per layer:
# forward ~60-75 us at 64 x 256 (50.5 drawing) and ~170-190 at 16 x 1024 (126), the
# backward kernels as in s16e with bits (107.6 / 235.9): total -0 to -15 us at 64 x 256
# and -20 to -50 us at 16 x 1024 against drawing; the graphed step within 0.1 ms / 0.1-0.3
# ms faster. ~3 min.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_bits 120 2 4 tests/test_flash.py -k "graph_capture"
timeout 120 python3 -m pytest -q tests/test_flash.py -k "dropout_bits" -p no:cacheprovider \
  >"$out/pytest_bits_cuda.log" 2>&1 || status=1
tail -n 1 "$out/pytest_bits_cuda.log"
for bits in 0 1; do
  FLASHTILE_DROPOUT_BITS=$bits timeout 150 python3 scripts/bench_dropout.py --kernels \
    --backends flashtile,cudnn --csv "$out/dropout_k$bits.csv" >"$out/dropout_k$bits.log" 2>&1 \
    || status=1
  echo "== FLASHTILE_DROPOUT_BITS=$bits"
  grep -A1 "| 0.2 | flashtile" "$out/dropout_k$bits.log" | cut -c1-300
done
timeout 120 python3 -m flashtile.cli train --bench \
  --bench-backends "flashtile:graph,sdpa-cudnn:graph,flashtile:graph@FLASHTILE_DROPOUT_BITS=1" \
  --bench-shapes 64x256,16x1024 --bench-steps 80 --bench-rounds 8 \
  --csv "$out/train_bench_bits.csv" >"$out/train_bench_bits.log" 2>&1 || status=1
tail -n 7 "$out/train_bench_bits.log" | cut -c1-120
