# gpu_check.sh suite "s17f" (sourced; $out, $commit, ft() and status are set)
# Dropout on the Gluon backward (session 17): with FLASHTILE_DROPOUT_BITS=1 the portable
# forward writes its keep decisions as bit words and now both Gluon backward kernels read
# them (DROPOUT; two loads per lane per step, the mask from the words), wherever the
# Gluon backward runs without dropout (hd 64 from 640 causal keys, hd 128). ptxas sm_90:
# dK/dV 168 registers with 216 / 248 B of spills at hd 64 (capped), 255 + 80 / 172 at hd
# 128; dQ 157-222 registers, none. PTX of the shipped builds unchanged.
# 1. GPU tests: the Gluon backward with bits against the reference replaying the mask
#    and against the portable backward (MHA, GQA expanded and looping, ragged), through
#    autograd; the bits and capture tests on CUDA.
# 2. Per kernel (bench_dropout --kernels, bits on): 16 x 1024 with the Gluon backward
#    (shipped cap, and uncapped), 64 x 256 with it forced (FLASHTILE_HOPPER_BWD=1).
#    Prediction: the backward pair at 16 x 1024 130-170 us per layer (portable with bits
#    238.8 in s17a; Gluon without dropout ~118); at 64 x 256 no better than portable.
# 3. The graphed MiniGPT step. Prediction: 16 x 1024 8.84 -> 8.1-8.3 ms (0.94-0.97x
#    cuDNN), 64 x 256 unchanged.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_gluon_bits 200 4 4 tests/test_hopper_bwd.py -k "dropout_bits"
timeout 150 python3 -m pytest -q tests/test_flash.py -k "dropout_bits or graph_capture" \
  -p no:cacheprovider >"$out/pytest_bits_cuda.log" 2>&1 || status=1
tail -n 1 "$out/pytest_bits_cuda.log"
for run in "16x1024 ship" "16x1024 uncapped" "64x256 forced"; do
  set -- $run
  env_extra=""
  [ "$2" = uncapped ] && env_extra="FLASHTILE_HOPPER_BWD_OVERRIDES=max_regs=none"
  [ "$2" = forced ] && env_extra="FLASHTILE_HOPPER_BWD=1"
  env FLASHTILE_DROPOUT_BITS=1 $env_extra timeout 120 python3 scripts/bench_dropout.py \
    --kernels --backends flashtile --shapes "$1" --csv "$out/drop_$1_$2.csv" \
    >"$out/drop_$1_$2.log" 2>&1 || status=1
  echo "== $1 $2"
  grep -A1 "| 0.2 |" "$out/drop_$1_$2.log" | grep -E "\| 0\.2 \||per kernel" | cut -c1-250
done
timeout 200 python3 -m flashtile.cli train --bench \
  --bench-backends "flashtile:graph,sdpa-cudnn:graph,flashtile:graph@FLASHTILE_DROPOUT_BITS=1,flashtile:graph@FLASHTILE_DROPOUT_BITS=1@FLASHTILE_HOPPER_BWD=1" \
  --bench-shapes 64x256,16x1024 --bench-steps 80 --bench-rounds 8 \
  --csv "$out/train_bench.csv" >"$out/train_bench.log" 2>&1 || status=1
tail -n 9 "$out/train_bench.log" | cut -c1-120
