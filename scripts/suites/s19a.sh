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
dropout_gpu_tests
dropout_kernels_step
