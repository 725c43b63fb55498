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
dropout_kernels_step
