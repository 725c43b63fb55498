# gpu_check.sh suite "s19f" (sourced; $out, $commit, ft() and status are set)
# Dropout on the Gluon forward at hd 128 too (configs.HOPPER_DROPOUT_HEAD_DIMS; the 16-bit
# draw made it fit: 206-255 registers, at most one word spilled).
# 1. Correctness: test_hopper_dropout.py at hd 64 and 128 (the mask bit for bit
#    dropout_mask's, outputs against the reference replaying it, the bit blocks; the
#    training call through the Gluon backward against the portable forward's), the Gluon
#    backward's dropout tests.
# 2. Per kernel at hd 128 (8 heads, causal, dropout 0.2): the Gluon forward (default)
#    against the portable one (FLASHTILE_HOPPER_DROPOUT=0) and cuDNN. Prediction: the
#    Gluon forward 1.5-2.5x the portable one (which writes the bits with tile reductions)
#    and 0.9-1.1x cuDNN's forward.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_hopper_dropout 240 4 6 tests/test_hopper_dropout.py
gpu_pytest pytest_gluon_bits 150 4 4 tests/test_hopper_bwd.py -k "dropout"
for mode in 1 0; do
  dropout_kernels "drop_k128_$mode" FLASHTILE_HOPPER_DROPOUT=$mode -- --heads 8 --head-dim 128 \
    --shapes 16x1024,4x4096 --tag "gluon_fwd=$mode"
done
