# gpu_check.sh suite "s19a" (sourced; $out, $commit, ft() and status are set)
# Dropout decided on 16 random bits (_common.DROPOUT_HALF_BITS): one Philox call draws 8
# elements instead of 4, in every kernel that draws (the portable kernels' dropout_keep,
# the Gluon forward's dropout_keeps_mma), bit for bit alike; the rate applied is p
# rounded to a multiple of 2^-16.
# 1. Correctness: the Gluon forward's dropout tests (its mask bit for bit flash.dropout_mask),
#    the Gluon backward's bits tests, test_flash's dropout / bits / capture / plan tests
#    on CUDA (the new numpy Philox reference among them), MiniGPT's GPU tests.
# 2. Per kernel and the graphed MiniGPT step against cuDNN. Predictions (SASS sm_90, the
#    Gluon forward's unmasked step loop 1434 -> 1040 instructions, IMAD.WIDE 224 -> 112;
#    461 without dropout, so dropout's extra instructions -40%): the forward 121.5 ->
#    90-100 us at 16 x 1024 and 56.2 -> 42-48 at 64 x 256; backward kernels unchanged
#    (they read bits); the step 6.99 -> 6.90-6.94 and 8.06 -> 7.88-7.95 ms.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_hopper_dropout 200 4 6 tests/test_hopper_dropout.py
gpu_pytest pytest_gluon_bits 150 4 4 tests/test_hopper_bwd.py -k "dropout"
timeout 240 python3 -m pytest -q tests/test_flash.py -k "dropout or graph_capture or plans or bits" \
  -p no:cacheprovider -rf --tb=short >"$out/pytest_flash_cuda.log" 2>&1 || status=1
grep -E "^FAILED|passed|failed" "$out/pytest_flash_cuda.log" | tail -n 4
gpu_pytest pytest_minigpt 150 2 4 tests/test_minigpt.py
dropout_kernels_step
