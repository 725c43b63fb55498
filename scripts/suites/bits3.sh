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
dropout_bits_ab dropout_k --kernels --backends flashtile,cudnn
graph_step_bits 120
