# gpu_check.sh suite "s18c" (sourced; $out, $commit, ft() and status are set)
# The dropout bits as warp-ballot blocks (one format instead of two layouts; the Gluon
# forward writes each word with one vote.ballot and 16-byte stores, the Gluon backward
# reads 16-byte words per block), first GPU run.
# 1. Correctness: the Gluon forward's dropout tests (decisions and words), the Gluon
#    backward's bits tests, test_flash's bits / dropout / capture / plan tests on CUDA.
# 2. Per kernel and the graphed MiniGPT step, portable forward (default) and Gluon
#    forward (FLASHTILE_HOPPER_DROPOUT=1) against cuDNN. Predictions (SASS sm_90):
#    Gluon forward step loop 2147 -> 1434 instructions: 202 -> 140-150 us at 16 x 1024,
#    94 -> 65-75 at 64 x 256; portable forward (241 -> 197 registers, no shuffles for the
#    words): 174 -> 150-165 and 84 -> 70-80; the Gluon backward kernels within +-5% (16-byte
#    word loads instead of 1-2 words per lane).
source scripts/suites/lib/steps.sh
dropout_gpu_tests  # (since the 2026-12-01 review: MiniGPT's GPU tests too)
for mode in 0 1; do
  dropout_kernels "drop_k$mode" FLASHTILE_HOPPER_DROPOUT=$mode
done
graph_step train_bench "flashtile:graph,flashtile:graph@FLASHTILE_HOPPER_DROPOUT=1,sdpa-cudnn:graph"
