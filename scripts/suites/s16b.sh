# gpu_check.sh suite "s16b" (sourced; $out, $commit, ft() and status are set)
# The second half of s16 (s16 = s15e + this), split so each call stays well under the
# 10-minute limit.
# 1. Dropout under torch.cuda.graph capture (RNG state drawn on the device): the capture
#    test, with autograd inside the capture.
# 2. Dropout decisions as bits (FLASHTILE_DROPOUT_BITS=1): their GPU tests, then
#    scripts/bench_dropout.py off / on at MiniGPT's shapes. Prediction: the dropout share
#    of the backward's GPU time (+54 us per layer at 64 x 256 over no dropout) falls by
#    half or more; the forward +0-10 us (one more kernel, the bits' draw). ptxas has the
#    bits-reading kernels at more registers (forward 189 against 136, dK/dV spills 640 B
#    against 260): if they lose, look there first. ~4 min.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_graph 90 1 4 tests/test_flash.py -k "graph_capture"
gpu_pytest pytest_dropout_bits 120 4 4 tests/test_flash.py -k "dropout and not graph"
dropout_bits_ab dropout_bits
