# gpu_check.sh suite "s16d" (sourced; $out, $commit, ft() and status are set)
# Dropout decisions as bits, now read per call (FLASHTILE_DROPOUT_BITS) and drawn under
# CUDA graph capture too:
# 1. s16b: the capture tests (drawing and bits), the dropout GPU tests, bench_dropout.py
#    with bits off / on (separate processes).
# 2. The graphed MiniGPT step with bits in the same interleaved rounds (graphtrain's
#    bits row did not set them: the switch was read at import). Prediction: the dropout
#    share of the backward (+54 us per layer at 64 x 256 over no dropout) halves, so the
#    graphed step -0.15 to -0.3 ms at 64 x 256 (flashtile:graph 7.25 ms, cuDNN 6.97 in
#    s16c), -0.4 to -0.8 ms at 16 x 1024 (8.90 against 7.88). ~5 min.
source scripts/suites/s16b.sh
graph_step_bits 150
