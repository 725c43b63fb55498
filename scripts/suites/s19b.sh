# gpu_check.sh suite "s19b" (sourced; $out, $commit, ft() and status are set)
# The Gluon backward's dropout steps made cheaper (s19a: dK/dV +54 us over no dropout at
# 16 x 1024, dQ +25):
# - dK/dV: the keep masks of a thread's column pair from one shift of their shared word
#   and two shifts per mask (int masks applied with one AND: `dropped`), not a variable
#   shift, an AND, a compare and a select per element per use;
# - both kernels: 1 / (1 - p) taken out of the steps (P^T o M and dP o M unscaled, delta
#   times (1 - p), dK / dV / dQ times 1 / (1 - p) once at the end): -64 / -32 FMUL a step.
# SASS sm_90 (hd 64 causal): dK/dV unmasked step loop 881 -> 611 instructions (374 without
# dropout; 238 registers, uncapped as before), masked 1039 -> 768; dQ 387 -> 355.
# 1. Correctness: the Gluon backward's dropout tests (against the float64 reference
#    replaying the mask and against the portable backward), the Gluon forward's, test_flash's
#    dropout / bits / capture / plan tests on CUDA, MiniGPT's GPU tests.
# 2. Predictions: dK/dV 117.1 -> 85-100 us at 16 x 1024 and 46.3 -> 40-46 at 64 x 256; dQ
#    71.5 -> 65-69 and 32.2 -> 30-32; the graphed step 7.90 -> 7.70-7.80 ms (cuDNN 7.88) and
#    6.95 -> 6.85-6.93 (6.98).
source scripts/suites/lib/steps.sh
dropout_gpu_tests
dropout_kernels_step
