# gpu_check.sh suite "s17g" (sourced; $out, $commit, ft() and status are set)
# Dropout bits by default where the Gluon backward reads them (FLASHTILE_DROPOUT_BITS
# unset = "auto"), the Gluon backward preferred with them at every length, its hd 64
# dK/dV tiles uncapped with dropout (s17f: 108.2 against 133.5 us capped at 16 x 1024).
# 1. GPU tests: the Gluon-with-bits tests (now uncapped at hd 64), the bits / capture
#    tests on CUDA, MiniGPT's graphed-step tests.
# 2. Per kernel with the new defaults at both MiniGPT shapes. Prediction: backward
#    kernels ~80 -> ~70 us at 64 x 256 (uncapped), ~174 at 16 x 1024.
# 3. The graphed MiniGPT step: default (bits + Gluon), drawing (FLASHTILE_DROPOUT_BITS=0),
#    cuDNN. Prediction: 64 x 256 7.19 -> ~7.05 ms (0.98x), 16 x 1024 8.83 -> ~8.35 (0.94x).
# 4. `flashtile validate --grid covering` (its dropout cases now read bits on Gluon).
source scripts/suites/lib/steps.sh
gpu_pytest pytest_gluon_bits 150 4 4 tests/test_hopper_bwd.py -k "dropout"
timeout 150 python3 -m pytest -q tests/test_flash.py -k "dropout or graph_capture" \
  -p no:cacheprovider >"$out/pytest_bits_cuda.log" 2>&1 || status=1
tail -n 1 "$out/pytest_bits_cuda.log"
gpu_pytest pytest_minigpt 150 4 4 tests/test_minigpt.py -k "graph or dropout"
dropout_default_benches
validate_covering validate 170
