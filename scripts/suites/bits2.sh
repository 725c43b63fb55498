# gpu_check.sh suite "bits2" (sourced; $out, $commit, ft() and status are set)
# Dropout bits, second layout: s16d measured the first one (words by query row only)
# slower in the backward (64 x 256: 139.0 -> 167.1 us; 16 x 1024: 332.9 -> 402.0): the
# dK/dV kernel's (keys, rows) tiles selected a word per element over the whole tile and
# spilled 640 B. dropout_bits now also stores the words by key (one per key and 32 rows:
# a broadcast in those tiles); ptxas sm_90 hd 64 causal: dK/dV spills 640 -> 332 B
# (drawing: 260). Prediction: the backward with bits 139 -> 95-110 us at 64 x 256 and
# 333 -> 200-250 at 16 x 1024 (the two Philox passes gone, ~23 us each at 64 x 256 by the
# forward's cost); the forward the same (the draw moves to the bits kernel); the graphed
# step -0.15 to -0.3 ms / -0.4 to -0.8 ms. ~3.5 min.
source scripts/suites/lib/steps.sh
gpu_pytest pytest_bits 120 2 4 tests/test_flash.py -k "dropout"
dropout_bits_ab dropout_bits
graph_step_bits 150
