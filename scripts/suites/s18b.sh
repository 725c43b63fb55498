# gpu_check.sh suite "s18b" (sourced; $out, $commit, ft() and status are set)
# Dropout on the Gluon forward (stage A, hd 64): the Philox draw in the wgmma layout, the
# bit words from registers. First GPU run.
# 1. Its GPU tests (decisions bit for bit the portable kernels', words in both layouts,
#    out against the float64 reference, through autograd with the Gluon backward), the
#    Gluon-with-bits backward tests (their forward is now this one at hd 64), the
#    dropout / capture tests of test_flash on CUDA.
# 2. Per kernel and the graphed MiniGPT step, Gluon forward (default) against the
#    portable one (FLASHTILE_HOPPER_DROPOUT=0) and cuDNN. Prediction (SASS: the unmasked
#    step loop 461 -> 2147 instructions with the words; issue-bound): the forward 174 ->
#    110-140 us at 16 x 1024 and 82 -> 45-60 at 64 x 256; the step 8.20 -> 7.9-8.0 ms and
#    7.04 -> ~6.9.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_hopper_dropout 240 4 6 tests/test_hopper_dropout.py
gpu_pytest pytest_gluon_bits 150 4 4 tests/test_hopper_bwd.py -k "dropout"
timeout 200 python3 -m pytest -q tests/test_flash.py -k "dropout or graph_capture" \
  -p no:cacheprovider >"$out/pytest_flash_cuda.log" 2>&1 || status=1
grep -E "^FAILED|passed|failed" "$out/pytest_flash_cuda.log" | tail -n 4
for mode in 1 0; do
  dropout_kernels "drop_k$mode" FLASHTILE_HOPPER_DROPOUT=$mode
done
graph_step train_bench "flashtile:graph,flashtile:graph@FLASHTILE_HOPPER_DROPOUT=0,sdpa-cudnn:graph"
