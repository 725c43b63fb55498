# gpu_check.sh suite "s18d" (sourced; $out, $commit, ft() and status are set)
# The Gluon forward with dropout on by default (hd 64), and the dQ kernel reading its bit
# blocks a band's 32 words at a time, one per lane, with a warp bit transpose (s18c: the
# 16-byte uniform loads cost dQ +15% / +27%).
# 1. Correctness: the Gluon forward's dropout tests, the Gluon backward's bits tests (the
#    transposing reader), test_flash's bits / dropout / capture / plan tests on CUDA,
#    MiniGPT's GPU tests.
# 2. Per kernel and the graphed MiniGPT step against cuDNN. Predictions (SASS sm_90, dQ
#    unmasked step loop 430 -> 387 instructions, 8 LDG.128 -> 1 LDG + 5 SHFL): dQ 84.4 ->
#    62-68 us at 16 x 1024 and 35.0 -> 29-32 at 64 x 256; the forward as s18c's Gluon
#    column (56.7 / 121.8); the step 6.99 -> ~6.96 and 8.09 -> ~7.98 ms.
source scripts/suites/lib/steps.sh
dropout_gpu_tests
dropout_kernels_step
